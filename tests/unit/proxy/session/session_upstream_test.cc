// The session's upstream side on a real loop: the name's lookup (cancelled, failing, outlived by
// its client), an origin that fails mid-exchange, and a pooled connection found dead when reused
// (a safe request sent again once on a dialled connection; any other answered 502).
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

using Zone = testing::FakeDnsServer::Zone;
using Mode = testing::FakeDnsServer::Mode;

class SessionUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override { bed_.configure(); }

  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }

  // origin.test's lookups wait until the test releases them.
  void holdLookups() {
    Zone zone;
    zone.a = {"127.0.0.1"};
    zone.hold = true;
    bed_.dns().set("origin.test", zone);
  }

  SessionBed bed_;
};

// --- the lookup -------------------------------------------------------------------------------

// What happens today: while the name resolves the session reads nothing from its client, so a
// client that resets then is not noticed until the exchange starts; the request has gone to the
// origin by then. The record is the exchange cut short: allowed, no status.
TEST_F(SessionUpstreamTest, ClientResetWhileResolvingIsNoticedOnlyOnceTheExchangeStarts) {
  holdLookups();
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/gone"));
  ASSERT_TRUE(bed_.runUntil([&] { return bed_.dns().held() > 0; }));
  client.reset();
  bed_.runFor(50ms);  // the reset reaches sluice's socket
  EXPECT_EQ(bed_.liveSessions(), 1u) << "the session saw the reset while resolving";

  bed_.dns().releaseHeld();
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_EQ(bed_.origin().accepted(), 1u);
  EXPECT_EQ(bed_.origin().requestsFor("/gone").size(), 1u);
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));
  EXPECT_EQ(bed_.pool().idle(), 0u) << "an upstream with a request in flight was pooled";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "allow"},
                          {"reason", "null"},
                          {"status", "null"},
                          {"upstream", "127.0.0.1:" + std::to_string(bed_.origin().port())}}));
}

TEST_F(SessionUpstreamTest, AbortWhileResolvingCancelsTheLookupAndDialsNothing) {
  holdLookups();
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/never"));
  ASSERT_TRUE(bed_.runUntil([&] { return bed_.dns().held() > 0; }));
  bed_.abortSessions();  // the worker's shutdown
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(), "");

  // The answer comes after the session is gone: the resolver calls no one back.
  bed_.dns().releaseHeld();
  bed_.runFor(100ms);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 1u) << "the request cut short has its record";
  EXPECT_EQ(lines[0]["decision"], "allow");
  EXPECT_TRUE(lines[0].isNull("status")) << lines[0].line;
  EXPECT_TRUE(lines[0].isNull("upstream")) << lines[0].line;
  EXPECT_EQ(lines[0]["addrs"], "[]");
}

struct FailedLookup {
  const char* edge;
  Mode mode;
};

void PrintTo(const FailedLookup& row, std::ostream* out) { *out << row.edge; }

class SessionFailedLookupTest : public SessionUpstreamTest,
                                public ::testing::WithParamInterface<FailedLookup> {
 protected:
  // A DNS timeout of its own: the silent server's lookup gives up within the test.
  void SetUp() override {
    BedConfig config;
    config.dns = "{timeout: 300ms}";
    bed_.configure(config);
  }
};

TEST_P(SessionFailedLookupTest, IsA502DnsFailedAndNothingIsDialled) {
  Zone zone;
  zone.mode = GetParam().mode;
  bed_.dns().set("origin.test", zone);
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/x"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  EXPECT_EQ(response->header("sluice-reason"), "dns_failed");
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines,
      {{"decision", "deny"}, {"reason", "dns_failed"}, {"status", "502"}, {"rule", "plain"}}));
}

INSTANTIATE_TEST_SUITE_P(
    Answers, SessionFailedLookupTest,
    ::testing::Values(FailedLookup{"NxDomain", Mode::NxDomain},
                      FailedLookup{"NoAddresses", Mode::Answer},  // a zone without records
                      FailedLookup{"ServFail", Mode::ServFail},
                      FailedLookup{"SilentServer", Mode::Silent}),
    [](const ::testing::TestParamInfo<FailedLookup>& row) { return row.param.edge; });

// --- the origin fails -------------------------------------------------------------------------

// After the response head went out, sluice cannot answer any more: the client's connection is
// cut, and the record says the response was allowed, began with 200, and failed upstream.
TEST_F(SessionUpstreamTest, UpstreamResetsMidBody) {
  bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
  };
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/big"));
  ASSERT_TRUE(bed_.runUntil([&] { return client.received().ends_with("0123456789"); }));
  bed_.origin().connection(0).reset();

  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(),
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
      << "the client must see a short body, nothing sluice made up";
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"},
                                  {"reason", "upstream_connect"},
                                  {"status", "200"},
                                  {"resp_bytes", "10"}}));
}

TEST_F(SessionUpstreamTest, UpstreamClosesMidBody) {
  bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
    connection.shutdownWrite();
  };
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/big"));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(client.received().ends_with("\r\n\r\n0123456789")) << client.received();
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines, {{"decision", "allow"}, {"reason", "upstream_connect"}, {"status", "200"}}));
}

// An until-close body ends with the origin's FIN: complete, re-chunked for the client, whose
// connection stays open (the upstream's is not reused).
TEST_F(SessionUpstreamTest, UntilCloseBodyEndsWithTheOriginsFinAndTheClientKeepsItsConnection) {
  bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nstreamed");
    connection.shutdownWrite();
  };
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/stream"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(response->body, "streamed");
  EXPECT_EQ(response->header("connection"), std::nullopt);
  EXPECT_EQ(bed_.pool().idle(), 0u);
  EXPECT_EQ(bed_.liveSessions(), 1u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].isNull("reason")) << lines[0].line;
}

TEST_F(SessionUpstreamTest, FreshUpstreamResetBeforeAnsweringIs502AndNotSentAgain) {
  bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.reset();
  };
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/reset"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_connect");
  EXPECT_EQ(bed_.origin().accepted(), 1u) << "only a reused connection's failure is retried";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines, {{"decision", "deny"}, {"reason", "upstream_connect"}, {"status", "502"}}));
}

// The origin answers before the request body is complete (a 413): the response is forwarded and
// both connections close, as neither is in a known state. Today the head does not say
// "Connection: close": that is decided once the response is complete, after its head went out.
TEST_F(SessionUpstreamTest, OriginAnswersBeforeTheBodyEndsAndBothConnectionsClose) {
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("POST", origin(), "/upload", "Content-Length: 1000\r\n") + "part");
  ASSERT_TRUE(bed_.runUntil([&] {
    return bed_.origin().accepted() == 1 &&
           bed_.origin().connection(0).received().ends_with("part");
  }));
  bed_.origin().connection(0).write(
      "HTTP/1.1 413 Content Too Large\r\nContent-Length: 4\r\n\r\nbig!");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(response->header("connection"), std::nullopt);
  ASSERT_TRUE(awaitEnd(bed_, client));
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));
  EXPECT_EQ(bed_.pool().idle(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"}, {"status", "413"}}));
}

}  // namespace
}  // namespace sluice::test_support
