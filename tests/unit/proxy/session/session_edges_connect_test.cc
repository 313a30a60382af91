// The connector's and the connection's edges on a real loop that the other session tests do
// not take: a dial or an upstream handshake cancelled by the worker's shutdown, an allowed IP
// literal dialled without a lookup, a client that rejects sluice's leaf, and a redirected
// (transparent) connection's first byte. Each test names the edge of connector_state.h or
// connection_state.h it drives and checks that the session took it, what the peers saw, and the
// audit record.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/transition_log.h"
#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";

class SessionConnectEdgesTest : public ::testing::Test {
 protected:
  // Extra rules: the IP literal 127.0.0.1 on the plain origin's port, and paths.test (a name
  // no test resolves) on the TLS origin's port for the paths under /only/.
  void configure() {
    BedConfig config;
    config.extra_rules = "      - {name: literal, hosts: [127.0.0.1], schemes: [http], ports: [" +
                         std::to_string(bed_.origin().port()) + "], ips: [127.0.0.1/32]}\n" +
                         "      - {name: pathed, hosts: [paths.test], ports: [" +
                         std::to_string(bed_.tlsOrigin().port()) +
                         "], paths: [/only/], ips: [127.0.0.1/32]}\n";
    bed_.configure(config);
  }

  // CONNECT `authority`; true once sluice said the tunnel is established (taken out).
  bool connect(LoopPeer& client, const std::string& authority) {
    client.write("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
    bed_.runUntil([&] {
      return client.received().size() >= kEstablished.size() || client.end() != LoopPeer::End::Open;
    });
    if (!client.received().starts_with(kEstablished)) {
      ADD_FAILURE() << "CONNECT " << authority << " answered: " << client.received();
      return false;
    }
    client.received().erase(0, kEstablished.size());
    return true;
  }

  // Runs the loop until the client's TLS handshake is over, one way or the other.
  void awaitHandshake(LoopPeer& client) {
    bed_.runUntil([&] {
      return client.tls()->handshakeDone() || client.tls()->failed() ||
             client.end() != LoopPeer::End::Open;
    });
  }

  SessionBed bed_;
};

// connector Connecting -> Idle: the worker shuts down while the upstream's connect is pending
// (the blackhole never answers it): the dialled socket is closed, nothing reaches the client,
// and the request has its record: allowed, no status.
TEST_F(SessionConnectEdgesTest, AbortWhileConnectingCancelsTheDial) {
  configure();
  EdgeWatch connecting("connector", "Resolving", "Connecting");
  EdgeWatch edge("connector", "Connecting", "Idle");
  LoopPeer& client = bed_.connectClient();
  client.write(
      absoluteRequest("GET", "blackhole.test:" + std::to_string(bed_.blackholePort()), "/never"));
  ASSERT_TRUE(bed_.runUntil([&] { return connecting.seen(); }));
  bed_.abortSessions();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(), "");
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "allow"}, {"rule", "blackhole"}, {"status", "null"}}));
}

// connector Handshaking -> Idle: inside a tunnel, the worker shuts down while the upstream's
// TLS handshake is pending (the plain origin never answers the ClientHello sluice sent it):
// that connection is closed, and the request has its record: allowed, no status.
TEST_F(SessionConnectEdgesTest, AbortWhileTheUpstreamHandshakeStallsCancelsIt) {
  configure();
  EdgeWatch handshaking("connector", "Connecting", "Handshaking");
  EdgeWatch edge("connector", "Handshaking", "Idle");
  LoopPeer& client = bed_.connectClient();
  const std::string authority = "tls-stall.test:" + std::to_string(bed_.origin().port());
  ASSERT_TRUE(connect(client, authority));
  client.startTlsClient(bed_.sandboxCaFile(), "tls-stall.test");
  awaitHandshake(client);
  ASSERT_TRUE(client.tls()->handshakeDone()) << client.tls()->error();
  client.write("GET /x HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  ASSERT_TRUE(bed_.runUntil([&] {
    return handshaking.seen() && bed_.origin().accepted() == 1 &&
           bed_.origin().connection(0).rawBytesReceived() > 0;
  }));
  bed_.abortSessions();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(), "");
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "allow"}, {"rule", "tls-stall"}, {"status", "null"}}));
}

// connector Idle -> Connecting: an allowed IP literal is its own, already checked, address:
// dialled with no DNS query, and the request is forwarded.
TEST_F(SessionConnectEdgesTest, AllowedIpLiteralIsDialledWithoutALookup) {
  configure();
  bed_.origin().on_request = answerEach("literal");
  EdgeWatch edge("connector", "Idle", "Connecting");
  LoopPeer& client = bed_.connectClient();
  const std::string authority = "127.0.0.1:" + std::to_string(bed_.origin().port());
  client.write(absoluteRequest("GET", authority, "/lit"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "literal");
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(bed_.dns().queries(), 0);
  EXPECT_EQ(bed_.origin().requestsFor("/lit").size(), 1u);
  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "allow"}, {"rule", "literal"}, {"upstream", authority}}));
}

// connection TlsHandshake -> Lingering: the CONNECT was allowed and the ClientHello too, but
// the client does not trust the leaf sluice presents (it verifies against another CA) and
// aborts the handshake: sluice's handshake fails, the connection ends, and nothing was dialled.
// A tunnel the sandbox abandons has no record today (docs/wire.md, "Tunnels that get no TLS
// session"): the allowed CONNECT was no request.
TEST_F(SessionConnectEdgesTest, ClientThatRejectsSluicesLeafEndsTheTunnel) {
  configure();
  EdgeWatch edge("connection", "TlsHandshake", "Lingering");
  LoopPeer& client = bed_.connectClient();
  const std::string authority = "origin.test:" + std::to_string(bed_.tlsOrigin().port());
  ASSERT_TRUE(connect(client, authority));
  client.startTlsClient(bed_.dir() + "/origin-ca/ca.pem", "origin.test");
  awaitHandshake(client);
  EXPECT_TRUE(client.tls()->failed());
  EXPECT_FALSE(client.tls()->handshakeDone());
  ASSERT_TRUE(awaitEnd(bed_, client));
  client.shutdownWrite();  // the client gives up too: the linger ends at its FIN
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 0u);
  // The tunnel carried no request: its record says the client refused sluice's certificate
  // (docs/audit.md#errors).
  ASSERT_TRUE(isOneRecord(bed_.auditLines(), {{"method", "CONNECT"},
                                              {"decision", "allow"},
                                              {"status", "200"},
                                              {"error", "tls_unknown_ca"}}));
}

// exchange Deciding -> Failed: inside a tunnel, a request to a refused path arrives in the same
// read as a TLS record that fails to decrypt (a bad MAC). Its head is parsed before the failure
// ends the connection; its 403 names the target, so one over 4 KiB is written at once, over a
// TLS session that has failed: the write fails, and the connection closes while sluice was
// answering. The client gets no answer.
TEST_F(SessionConnectEdgesTest, ConnectionClosesWhileSluiceAnswersARefusedRequest) {
  configure();
  EdgeWatch edge("exchange", "Deciding", "Failed");
  LoopPeer& client = bed_.connectClient();
  const std::string authority = "paths.test:" + std::to_string(bed_.tlsOrigin().port());
  ASSERT_TRUE(connect(client, authority));
  client.startTlsClient(bed_.sandboxCaFile(), "paths.test");
  awaitHandshake(client);
  ASSERT_TRUE(client.tls()->handshakeDone()) << client.tls()->error();
  const std::string target = "/elsewhere/" + std::string(5000, 'x');
  client.write("GET " + target + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  // An application-data record of 16 bytes that no key made.
  client.writeRaw(std::string("\x17\x03\x03\x00\x10", 5) + std::string(16, '\x5a'));
  ASSERT_TRUE(awaitEnd(bed_, client));
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(client.received(), "") << "an answer over a failed TLS session";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["decision"], "deny");
  EXPECT_EQ(lines[0]["method"], "GET");
  EXPECT_TRUE(lines[0].isNull("status")) << "no answer went out";
  // The record is the one written for the exchange cut short, before deny() wrote its own:
  // it still says why the request was refused.
  EXPECT_EQ(lines[0]["reason"], "not_allowed_path");
}

// A redirected connection, as the transparent listener takes it. The bed's sockets were never
// redirected by nftables, so SO_ORIGINAL_DST has no answer: the session runs with the original
// destination unknown (a plain request's port is then 80, a TLS one's 443). With
// original_dst: require_match, an unknown destination matches nothing.
class SessionTransparentEdgesTest : public SessionConnectEdgesTest {
 protected:
  void SetUp() override {
    BedConfig config;
    // Refusals at the ClientHello (an alert), the edge these tests take; in band:
    // session_refusal_in_band_test.cc.
    config.sandbox_fields =
        "    transparent: 127.0.0.1:15001\n"
        "    original_dst: require_match\n"
        "    refusal: at_connect\n";
    config.extra_rules =
        "      - {name: literal80, hosts: [127.0.0.1], schemes: [http], ports: [80], "
        "ips: [127.0.0.1/32]}\n";
    bed_.configure(config);
  }
};

// connection Sniffing -> Closing: the client ends its side before a first byte: the
// connection closes, with nothing said and nothing on record.
TEST_F(SessionTransparentEdgesTest, EofBeforeTheFirstByteClosesTheConnection) {
  EdgeWatch edge("connection", "Sniffing", "Closing");
  LoopPeer& client = bed_.connectClient(Entry::Transparent);
  client.shutdownWrite();
  ASSERT_TRUE(awaitEnd(bed_, client));
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(client.received(), "");
  EXPECT_TRUE(bed_.auditLines().empty());
}

// connection Sniffing -> Serving, and connector Idle -> Failed: a first byte that is not a
// TLS record is HTTP/1.1 with H from its Host. The IP literal is allowed on port 80, but with
// require_match it must be the address the sandbox dialled, which is unknown here: 403
// dns_mismatch, before anything is dialled.
TEST_F(SessionTransparentEdgesTest, PlainHttpToALiteralThatWasNotDialledIsDnsMismatch) {
  EdgeWatch serving("connection", "Sniffing", "Serving");
  EdgeWatch refused("connector", "Idle", "Failed");
  LoopPeer& client = bed_.connectClient(Entry::Transparent);
  client.write("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_TRUE(serving.seen()) << serving.name();
  EXPECT_TRUE(refused.seen()) << refused.name();
  EXPECT_EQ(response->status, 403);
  EXPECT_EQ(response->header("sluice-reason"), "dns_mismatch");
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  EXPECT_EQ(bed_.dns().queries(), 0);
  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "deny"},
                                  {"reason", "dns_mismatch"},
                                  {"rule", "literal80"},
                                  {"mode", "transparent"},
                                  {"orig_dst", "null"}}));
}

// connection Sniffing -> ReadingClientHello: a first byte 0x16 is a TLS handshake record; H is
// the SNI and the port the one dialled (443, unknown here). origin.test is allowed on another
// port only: refused with a TLS alert, and on record.
TEST_F(SessionTransparentEdgesTest, ClientHelloIsReadForItsSni) {
  EdgeWatch edge("connection", "Sniffing", "ReadingClientHello");
  LoopPeer& client = bed_.connectClient(Entry::Transparent);
  client.startTlsClient(bed_.sandboxCaFile(), "origin.test");
  awaitHandshake(client);
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_FALSE(client.tls()->handshakeDone());
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_NE(client.tls()->peerAlert(), "") << client.tls()->error();
  client.shutdownWrite();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines, {{"decision", "deny"}, {"mode", "transparent"}, {"url", "https://origin.test"}}))
      << "the url never carries its default port (docs/audit.md#the-fields)";
}

}  // namespace
}  // namespace sluice::test_support
