// The session's deadlines on a real loop, each in the state it bounds, with small limits:
// handshake_timeout (the proxy head from accept; a later request head from its first byte),
// upstream.connect_timeout (a blackhole), idle_timeout (a lookup, a response that does not come,
// a body that stops, a keep-alive connection between requests) and the linger after sluice's
// last word. Each test waits for the end it expects and checks it came no earlier than its limit
// (sluice's timers run on the loop's clock, which the harness brings up to date at accept).
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

constexpr auto kHandshake = 400ms;
constexpr auto kIdle = 800ms;
constexpr auto kConnect = 300ms;
constexpr auto kLinger = 2000ms;  // fixed in the session (not configurable)
// The loop's clock counts whole milliseconds and is read at the start of each round.
constexpr auto kClockSlack = 20ms;

class SessionTimeoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BedConfig config;
    config.limits = "{handshake_timeout: 400ms, idle_timeout: 800ms}";
    config.upstream = "{connect_timeout: 300ms}";
    bed_.configure(config);
  }

  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }

  SessionBed bed_;
  std::unique_ptr<Trickle> trickle_;  // after bed_: closed first
};

TEST_F(SessionTimeoutTest, SilentClientIsClosedAtHandshakeTimeoutWithoutARecord) {
  auto start = std::chrono::steady_clock::now();
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kHandshake - kClockSlack);
  EXPECT_EQ(client.received(), "") << "a client that asked nothing got an answer";
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(bed_.auditLines().empty());
}

// Bytes keep coming (each one is progress for idle_timeout), but the proxy head must be whole
// within handshake_timeout of the accept.
TEST_F(SessionTimeoutTest, ProxyHeadTrickledByteByByteIsCutAtHandshakeTimeout) {
  auto start = std::chrono::steady_clock::now();
  LoopPeer& client = bed_.connectClient();
  const std::string head = absoluteRequest("GET", origin(), "/slow");
  trickle_ = std::make_unique<Trickle>(bed_.loop(), client, head, 50ms);
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kHandshake - kClockSlack);
  EXPECT_GT(trickle_->sent(), 4u);
  EXPECT_LT(trickle_->sent(), head.size()) << "the head was let through whole";
  EXPECT_EQ(client.received(), "");
  EXPECT_EQ(bed_.dns().queries(), 0);
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(bed_.auditLines().empty());
}

// After a first exchange, the next head is bounded from its first byte (slowloris).
TEST_F(SessionTimeoutTest, RequestHeadTrickledAfterAFirstRequestIsCutAtHandshakeTimeout) {
  bed_.origin().on_request = answerEach("first");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/first"));
  ASSERT_TRUE(awaitResponse(bed_, client));
  auto start = std::chrono::steady_clock::now();
  const std::string head = absoluteRequest("GET", origin(), "/slow");
  trickle_ = std::make_unique<Trickle>(bed_.loop(), client, head, 50ms);
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kHandshake - kClockSlack);
  EXPECT_LT(trickle_->sent(), head.size()) << "the head was let through whole";
  EXPECT_EQ(client.received(), "");
  EXPECT_TRUE(bed_.origin().requestsFor("/slow").empty());
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.auditLines().size(), 1u) << "a head cut short is no request";
}

TEST_F(SessionTimeoutTest, IdleKeepAliveConnectionIsClosedAtIdleTimeoutWithoutARecord) {
  bed_.origin().on_request = answerEach("first");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/first"));
  ASSERT_TRUE(awaitResponse(bed_, client));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kIdle - kClockSlack);
  EXPECT_EQ(client.end(), LoopPeer::End::Eof);
  EXPECT_EQ(client.received(), "");
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.auditLines().size(), 1u);
  EXPECT_EQ(bed_.pool().idle(), 1u) << "the idle client's upstream went to the pool";
}

TEST_F(SessionTimeoutTest, LookupLongerThanIdleTimeoutIs504AndTheLookupIsCancelled) {
  testing::FakeDnsServer::Zone held;
  held.a = {"127.0.0.1"};
  held.hold = true;
  bed_.dns().set("origin.test", held);
  LoopPeer& client = bed_.connectClient();
  auto start = std::chrono::steady_clock::now();
  client.write(absoluteRequest("GET", origin(), "/slow-dns"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_GE(since(start), kIdle - kClockSlack);
  EXPECT_EQ(response->status, 504);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_timeout");
  // The answer comes after the 504: nothing is dialled for it.
  ASSERT_GT(bed_.dns().held(), 0u);
  bed_.dns().releaseHeld();
  client.close();
  ASSERT_TRUE(bed_.allSessionsFinished());
  bed_.runFor(50ms);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"reason", "upstream_timeout"}, {"status", "504"}}));
}

TEST_F(SessionTimeoutTest, NoResponseHeadWithinIdleTimeoutIs504) {
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/stall"));
  ASSERT_TRUE(bed_.runUntil([&] { return !bed_.origin().requestsFor("/stall").empty(); }));
  auto start = std::chrono::steady_clock::now();
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_GE(since(start), kIdle - kClockSlack);
  EXPECT_EQ(response->status, 504);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_timeout");
  EXPECT_EQ(response->header("proxy-status"),
            "sluice; error=connection_timeout; details=\"upstream_timeout\"")
      << "one Proxy-Status token per reason, whichever deadline it was";
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));  // the upstream is closed
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "deny"},
                          {"reason", "upstream_timeout"},
                          {"status", "504"},
                          {"upstream", "127.0.0.1:" + std::to_string(bed_.origin().port())}}));
}

TEST_F(SessionTimeoutTest, ResponseBodyStalledAfterItsHeadIsCutAtIdleTimeout) {
  bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  };
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/stall-body"));
  ASSERT_TRUE(bed_.runUntil([&] { return client.received().ends_with("abc"); }));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kIdle - kClockSlack);
  EXPECT_TRUE(client.received().ends_with("\r\n\r\nabc")) << "nothing after the short body";
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines, {{"decision", "allow"}, {"reason", "null"}, {"status", "200"}, {"resp_bytes", "3"}}));
}

// connect_timeout alone: the other limits are far, so the 504 can only be its.
TEST(SessionConnectTimeoutTest, ConnectTimeoutAgainstABlackholeIs504) {
  SessionBed bed;
  BedConfig config;
  config.limits = "{handshake_timeout: 5s, idle_timeout: 10s}";
  config.upstream = "{connect_timeout: 300ms}";
  bed.configure(config);
  LoopPeer& client = bed.connectClient();
  const std::string authority = "blackhole.test:" + std::to_string(bed.blackholePort());
  auto start = std::chrono::steady_clock::now();
  client.write(absoluteRequest("GET", authority, "/"));
  std::optional<HttpMessage> response = awaitResponse(bed, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_GE(since(start), kConnect - kClockSlack);
  EXPECT_EQ(response->status, 504);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_timeout");
  EXPECT_EQ(response->header("proxy-status"),
            "sluice; error=connection_timeout; details=\"upstream_timeout\"");
  std::vector<AuditLine> lines = bed.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "deny"},
                                  {"reason", "upstream_timeout"},
                                  {"status", "504"},
                                  {"rule", "blackhole"},
                                  {"addrs", "[\"127.0.0.1\"]"},
                                  {"upstream", "null"}}));
}

// After a denial sluice sends FIN and reads (and drops) what the client still sends, so that
// closing does not reset the answer away; the session ends when the linger is over. Here the
// other limits are far: the linger alone ends it.
class SessionLingerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BedConfig config;
    config.limits = "{handshake_timeout: 5s, idle_timeout: 10s}";
    bed_.configure(config);
  }

  // A denied request; returns once its answer and the FIN after it are in.
  LoopPeer& deniedClient() {
    LoopPeer& client = bed_.connectClient();
    client.write(absoluteRequest("GET", "elsewhere.test", "/denied"));
    std::optional<HttpMessage> response = awaitResponse(bed_, client);
    EXPECT_TRUE(response && response->status == 403) << client.received();
    EXPECT_TRUE(awaitEnd(bed_, client));
    EXPECT_EQ(client.end(), LoopPeer::End::Eof);
    return client;
  }

  SessionBed bed_;
  std::unique_ptr<Trickle> trickle_;
};

TEST_F(SessionLingerTest, LingerAfterADenialEndsAfterTwoSecondsWhileTheClientSendsMore) {
  auto start = std::chrono::steady_clock::now();
  LoopPeer& client = deniedClient();
  trickle_ = std::make_unique<Trickle>(bed_.loop(), client,
                                       absoluteRequest("GET", "elsewhere.test", "/more"), 20ms);
  ASSERT_TRUE(bed_.allSessionsFinished(kLinger + 3s));
  EXPECT_GE(since(start), kLinger - kClockSlack);
  EXPECT_GT(trickle_->sent(), 4u);
  EXPECT_EQ(client.received(), "") << "an answer to what came after the denial";
  EXPECT_EQ(bed_.auditLines().size(), 1u);
}

TEST_F(SessionLingerTest, LingerEndsAtOnceWhenTheClientCloses) {
  LoopPeer& client = deniedClient();
  EXPECT_EQ(bed_.liveSessions(), 1u) << "lingering";
  auto closed = std::chrono::steady_clock::now();
  client.close();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_LT(since(closed), kLinger / 2) << "the session lingered on after the client's FIN";
}

// The linger is bounded by idle_timeout too, counted from the denied head's last byte.
TEST_F(SessionTimeoutTest, IdleTimeoutShorterThanTheLingerEndsItSooner) {
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", "elsewhere.test", "/denied"));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(awaitEnd(bed_, client));
  ASSERT_TRUE(bed_.allSessionsFinished(kLinger + 3s));
  EXPECT_GE(since(start), kIdle - kClockSlack);
  EXPECT_LT(since(start), kLinger);
}

}  // namespace
}  // namespace sluice::test_support
