// A WebSocket on a real loop (docs/wire.md#websocket): an upgrade a rule with `websocket: true`
// allows goes to the origin with the upgrade fields sluice writes itself; the origin's 101 turns
// the exchange into a relay (exchange AwaitingResponse -> Tunneling), bytes flow both ways as
// they come (what the client sent before the 101 first), and the session ends when either side
// closes (Tunneling -> Complete) or at idle_timeout (Tunneling -> Failed), with one record.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/transition_log.h"
#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

constexpr std::string_view kUpgradeFields =
    "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
constexpr std::string_view kSwitch =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

class SessionWebSocketTest : public ::testing::Test {
 protected:
  void configure(std::string limits = "{handshake_timeout: 2s, idle_timeout: 5s}") {
    BedConfig config;
    config.limits = std::move(limits);
    // After the bed's own rule for origin.test, which allows the host but no WebSocket.
    config.extra_rules = "      - {name: live, hosts: [origin.test], schemes: [http], ports: [" +
                         std::to_string(bed_.origin().port()) +
                         "], ips: [127.0.0.1/32], websocket: true}\n";
    bed_.configure(config);
  }
  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }
  LoopPeer& upstream() { return bed_.origin().connection(0); }
  std::int64_t sessionsActive() {
    return bed_.context()
        .currentGeneration()
        ->find(kSandbox)
        ->runtime->metrics.websocket_sessions_active.load();
  }

  // The upgrade (and `early`, sent in the same write) until the origin has the head; then its
  // 101 and `first` until the client has them: the exchange is Tunneling.
  bool openSession(LoopPeer& client, std::string_view early, std::string_view first,
                   std::string_view more_fields = "") {
    client.write(absoluteRequest("GET", origin(), "/chat",
                                 std::string(kUpgradeFields) + std::string(more_fields)) +
                 std::string(early));
    if (!bed_.runUntil([&] {
          return bed_.origin().accepted() == 1 &&
                 upstream().received().find("\r\n\r\n") != std::string::npos;
        })) {
      return false;
    }
    upstream().write(std::string(kSwitch) + std::string(first));
    return bed_.runUntil([&] { return client.received().ends_with(first); });
  }

  SessionBed bed_;
};

TEST_F(SessionWebSocketTest, RelaysBothWaysUntilTheOriginCloses) {
  configure();
  LoopPeer& client = bed_.connectClient();
  EdgeWatch opened("exchange", "AwaitingResponse", "Tunneling");
  EdgeWatch ended("exchange", "Tunneling", "Complete");
  EXPECT_EQ(sessionsActive(), 0);
  ASSERT_TRUE(openSession(client, "early", "from-origin")) << client.received();
  EXPECT_TRUE(opened.seen()) << opened.name();
  EXPECT_EQ(sessionsActive(), 1);

  // The head sluice wrote asks for the upgrade itself; what the client sent before the 101 was
  // held, not parsed, and went to the origin only once it had switched.
  const std::string& head = upstream().received();
  EXPECT_NE(head.find("\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"), std::string::npos)
      << head;
  EXPECT_NE(head.find("\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), std::string::npos);
  ASSERT_TRUE(bed_.runUntil([&] { return upstream().received().ends_with("\r\n\r\nearly"); }))
      << upstream().received();
  // The client's 101: the upgrade fields, no framing, the origin's bytes right after it.
  const std::string& answer = client.received();
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 101 Switching Protocols\r\n")) << answer;
  EXPECT_NE(answer.find("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\nfrom-origin"),
            std::string::npos)
      << answer;
  EXPECT_EQ(answer.find("Transfer-Encoding"), std::string::npos) << answer;

  client.write("more");
  ASSERT_TRUE(bed_.runUntil([&] { return upstream().received().ends_with("earlymore"); }));
  upstream().write("bye");
  ASSERT_TRUE(bed_.runUntil([&] { return client.received().ends_with("from-originbye"); }));
  EXPECT_FALSE(ended.seen()) << "the session ended while both sides were open";

  upstream().shutdownWrite();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(ended.seen()) << ended.name();
  EXPECT_EQ(sessionsActive(), 0);
  EXPECT_NE(client.end(), LoopPeer::End::Open);
  ASSERT_TRUE(isOneRecord(bed_.auditLines(), {{"decision", "allow"},
                                              {"rule", "live"},
                                              {"status", "101"},
                                              {"upgrade", "websocket"},
                                              {"proto", "http/1.1"},
                                              {"upstream_proto", "http/1.1"},
                                              {"req_bytes", "9"},
                                              {"resp_bytes", "14"}}));
}

// The client's FIN (with its last bytes in the same breath) is passed on after those bytes;
// what the origin still sends reaches the client; the origin's close then ends the session.
TEST_F(SessionWebSocketTest, TheClientsCloseIsPassedOnAndTheOriginsLastWordsStillArrive) {
  configure();
  LoopPeer& client = bed_.connectClient();
  EdgeWatch ended("exchange", "Tunneling", "Complete");
  ASSERT_TRUE(openSession(client, "", "hi"));
  client.write("close-frame");
  client.shutdownWrite();
  ASSERT_TRUE(bed_.runUntil([&] { return upstream().end() == LoopPeer::End::Eof; }))
      << "the client's end was not passed on";
  EXPECT_TRUE(upstream().received().ends_with("\r\n\r\nclose-frame")) << upstream().received();
  EXPECT_FALSE(ended.seen()) << "the session ended before the origin did";
  upstream().write("close-ack");
  ASSERT_TRUE(bed_.runUntil([&] { return client.received().ends_with("hiclose-ack"); }));
  upstream().shutdownWrite();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(ended.seen()) << ended.name();
  ASSERT_TRUE(isOneRecord(bed_.auditLines(),
                          {{"status", "101"}, {"req_bytes", "11"}, {"resp_bytes", "11"}}));
}

// JDK 17's java.net.http.WebSocket sends `Content-Length: 0` on its opening GET: no body (RFC
// 9110 section 8.6), so the upgrade goes on, its head without the field. A real body is refused
// before anything is dialled: 400 bad_request (docs/wire.md#websocket).
TEST_F(SessionWebSocketTest, AZeroContentLengthIsNoBodyAndARealOneIsRefused) {
  configure();
  LoopPeer& client = bed_.connectClient();
  EdgeWatch opened("exchange", "AwaitingResponse", "Tunneling");
  ASSERT_TRUE(openSession(client, "", "hi", "Content-Length: 0\r\n")) << client.received();
  EXPECT_TRUE(opened.seen()) << opened.name();
  EXPECT_EQ(upstream().received().find("Content-Length"), std::string::npos)
      << upstream().received();
  upstream().shutdownWrite();
  ASSERT_TRUE(bed_.allSessionsFinished());

  LoopPeer& second = bed_.connectClient();
  second.write(absoluteRequest("GET", origin(), "/chat",
                               std::string(kUpgradeFields) + "Content-Length: 2\r\n") +
               "ab");
  std::optional<HttpMessage> response = awaitResponse(bed_, second);
  ASSERT_TRUE(response) << second.received();
  EXPECT_EQ(response->status, 400);
  EXPECT_EQ(response->header("Sluice-Reason").value_or(""), "bad_request");
  EXPECT_EQ(bed_.origin().accepted(), 1u);
  ASSERT_TRUE(bed_.allSessionsFinished());
  const std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(recordsWith(lines, {{"status", "101"}, {"decision", "allow"}}).size(), 1u);
  EXPECT_EQ(recordsWith(lines, {{"status", "400"}, {"reason", "bad_request"}}).size(), 1u);
}

TEST_F(SessionWebSocketTest, AnIdleSessionEndsAtIdleTimeout) {
  configure("{handshake_timeout: 2s, idle_timeout: 300ms}");
  LoopPeer& client = bed_.connectClient();
  EdgeWatch cut("exchange", "Tunneling", "Failed");
  ASSERT_TRUE(openSession(client, "", "hi"));
  ASSERT_TRUE(bed_.allSessionsFinished(3s));
  EXPECT_TRUE(cut.seen()) << cut.name();
  EXPECT_EQ(sessionsActive(), 0);
  EXPECT_NE(client.end(), LoopPeer::End::Open);
  ASSERT_TRUE(isOneRecord(bed_.auditLines(), {{"status", "101"}, {"upgrade", "websocket"}}));
}

TEST_F(SessionWebSocketTest, A101ToAnUpgradeNotAskedForIsRefused) {
  configure();
  LoopPeer& client = bed_.connectClient();
  // The request asks for h2c, which sluice never forwards: the origin's 101 is no answer.
  client.write(absoluteRequest("GET", origin(), "/x", "Connection: Upgrade\r\nUpgrade: h2c\r\n"));
  ASSERT_TRUE(bed_.runUntil([&] {
    return bed_.origin().accepted() == 1 &&
           upstream().received().find("\r\n\r\n") != std::string::npos;
  }));
  EXPECT_EQ(upstream().received().find("Upgrade"), std::string::npos) << upstream().received();
  upstream().write(kSwitch);
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_TRUE(isOneRecord(
      bed_.auditLines(), {{"reason", "upstream_connect"}, {"status", "502"}, {"upgrade", "null"}}));
}

}  // namespace
}  // namespace sluice::test_support
