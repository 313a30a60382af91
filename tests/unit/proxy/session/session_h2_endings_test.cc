// How HTTP/2 streams and connections end on a real loop (docs/wire.md#http2, "Endings"):
// idle_timeout counts a stream's own progress, so a stream whose origin is silent gets its 504
// while the client sends PINGs, and a connection with no stream is ended with GOAWAY however
// many PINGs it sends (frames that carry no request are no progress); draining says GOAWAY
// NO_ERROR and lets the stream in flight finish; the abort after it (shutdown_grace over) cuts
// it short, on record.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_h2_fixture.h"

namespace sluice::test_support {
namespace {

constexpr auto kIdle = 300ms;
constexpr auto kPingEvery = 100ms;

class SessionH2EndingsTest : public SessionH2Test {
 protected:
  void configureShortIdle() {
    BedConfig config;
    config.limits = "{handshake_timeout: 2s, idle_timeout: 300ms}";
    configure(config);
  }
};

TEST_F(SessionH2EndingsTest, SilentOriginGets504AtIdleTimeoutWhileTheClientPingsEvery100ms) {
  configureShortIdle();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  // A warm upstream: the silent request goes out at once, no dial within its idle time.
  const std::int32_t warm = client->request("GET", "/warm");
  ASSERT_TRUE(client->awaitStream(warm)) << client->describe();
  // (The stream's idle time runs from its HEADERS at the earliest: the clock starts before.)
  const auto start = std::chrono::steady_clock::now();
  const std::int32_t id = client->request("GET", "/stall");
  client->pingEvery(kPingEvery);
  ASSERT_TRUE(bed_.runUntil([&] { return !bed_.tlsOrigin().requestsFor("/stall").empty(); }));
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EXPECT_GE(since(start), kIdle - kH2ClockSlack);
  EXPECT_GE(client->pingAcks(), 1u) << "the PINGs never reached sluice's nghttp2";

  const Http2Client::Stream& stream = client->stream(id);
  EXPECT_EQ(stream.status, 504) << client->describe();
  EXPECT_EQ(stream.header("sluice-reason"), "upstream_timeout");
  EXPECT_TRUE(stream.ended);
  EXPECT_FALSE(client->goAway()) << "a stream's timeout ended the connection";
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 1u) << "the silent request went on the warm upstream";
  ASSERT_TRUE(awaitEnd(bed_, bed_.tlsOrigin().connection(0))) << "the silent upstream was kept";

  const std::vector<AuditLine> lines = awaitAudit(bed_, 2);
  ASSERT_TRUE(
      isOneRecord(recordsWith(lines, {{"url", url("/stall")}}), {{"decision", "deny"},
                                                                 {"reason", "upstream_timeout"},
                                                                 {"status", "504"},
                                                                 {"proto", "h2"},
                                                                 {"upstream", upstream()}}));
}

TEST_F(SessionH2EndingsTest, ConnectionWithNoStreamThatPingsEvery100msGetsGoAwayAtIdleTimeout) {
  configureShortIdle();
  // (The connection's idle time runs from the end of its handshake at the earliest: the clock
  // starts before the client connects.)
  const auto start = std::chrono::steady_clock::now();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  client->pingEvery(kPingEvery);
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_GE(since(start), kIdle - kH2ClockSlack);
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_EQ(client->goAway()->last_stream_id, 0);
  ASSERT_TRUE(client->awaitEnd()) << "GOAWAY, and the connection stayed open";
  EXPECT_GE(client->pingAcks(), 1u) << "the PINGs never reached sluice's nghttp2";
  client->peer().close();  // as a client does once it was told GOAWAY: no linger
  ASSERT_TRUE(bed_.allSessionsFinished());

  // A tunnel that carried no request is on record as such.
  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(isOneRecord(lines, {{"method", "CONNECT"},
                                  {"decision", "allow"},
                                  {"status", "200"},
                                  {"proto", "h2"},
                                  {"error", "timeout"}}));
}

// The worker drains (SIGTERM): GOAWAY NO_ERROR naming the stream in flight, which finishes; a
// stream opened after the GOAWAY is not processed; then the connection ends.
TEST_F(SessionH2EndingsTest, DrainSaysGoAwayNoErrorAndLetsTheStreamInFlightFinish) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t id = client->request("GET", "/held");
  ASSERT_TRUE(awaitHeld());

  bed_.drainSessions();
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_EQ(client->goAway()->last_stream_id, id);
  EXPECT_FALSE(client->stream(id).over()) << client->describe();
  EXPECT_FALSE(client->ended());

  const std::int32_t late = client->request("GET", "/late");
  client->ping(7);  // (read with the late stream's HEADERS: its answer, if any, comes first)
  ASSERT_TRUE(client->awaitPingAcks(1)) << client->describe();
  held_->write(okResponse("finished"));
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EXPECT_EQ(client->stream(id).status, 200);
  EXPECT_EQ(client->stream(id).body, "finished");
  EXPECT_TRUE(client->stream(id).ended);
  ASSERT_TRUE(client->awaitEnd()) << "the connection outlived its last stream while draining";
  EXPECT_EQ(client->stream(late).status, 0) << "a stream after GOAWAY was answered";
  EXPECT_TRUE(bed_.tlsOrigin().requestsFor("/late").empty());
  client->peer().close();  // as a client does once it was told GOAWAY: no linger
  ASSERT_TRUE(bed_.allSessionsFinished());

  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"url", url("/held")},
                                  {"decision", "allow"},
                                  {"status", "200"},
                                  {"resp_bytes", "8"},
                                  {"proto", "h2"}}))
      << "a record for the stream after GOAWAY, or for the tunnel";
}

// What the worker does after draining, once shutdown_grace is over: the connection, told
// GOAWAY already, closes now; the stream still in flight is cut short, on record with what was
// sent, and its upstream closed.
TEST_F(SessionH2EndingsTest, AbortAfterTheDrainCutsTheStreamStillInFlightShortOnRecord) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t id = client->request("GET", "/held");
  ASSERT_TRUE(awaitHeld());
  bed_.drainSessions();
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));

  bed_.abortSessions();
  ASSERT_TRUE(client->awaitEnd()) << client->describe();
  EXPECT_EQ(client->stream(id).status, 0) << client->describe();
  EXPECT_FALSE(client->stream(id).ended);
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_TRUE(awaitEnd(bed_, *held_)) << "the upstream of the cut stream was kept";

  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(isOneRecord(lines, {{"url", url("/held")},
                                  {"decision", "allow"},
                                  {"status", "null"},
                                  {"resp_bytes", "null"},
                                  {"proto", "h2"},
                                  {"upstream", upstream()}}));
}

// The client resets a stream in flight (a gRPC deadline: RST_STREAM CANCEL): on record as such,
// error client_reset (docs/audit.md#errors), not as a stream that simply got no answer; its
// upstream goes, and the connection goes on.
TEST_F(SessionH2EndingsTest, AStreamTheClientResetsIsOnRecordAsClientReset) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t id = client->request(
      "POST", "/held/pkg.Service/Call", {{"content-type", "application/grpc"}, {"te", "trailers"}});
  ASSERT_TRUE(awaitHeld());
  client->rstStream(id, NGHTTP2_CANCEL);
  ASSERT_TRUE(awaitEnd(bed_, *held_)) << "the upstream of the reset stream was kept";
  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(isOneRecord(lines, {{"url", url("/held/pkg.Service/Call")},
                                  {"decision", "allow"},
                                  {"reason", "null"},
                                  {"status", "null"},
                                  {"error", "client_reset"},
                                  {"proto", "h2"},
                                  {"upstream", upstream()}}));
  EXPECT_FALSE(client->goAway()) << client->describe();
  // A stream that ends because the connection went is no reset of the client's.
  const std::int32_t second = client->request("GET", "/stall");
  ASSERT_TRUE(bed_.runUntil([&] { return !bed_.tlsOrigin().requestsFor("/stall").empty(); }));
  client->peer().reset();
  ASSERT_TRUE(bed_.allSessionsFinished());
  lines = awaitAudit(bed_, 2);
  ASSERT_TRUE(isOneRecord(recordsWith(lines, {{"url", url("/stall")}}), {{"error", "null"}}))
      << second;
}

// Two streams at once to a name whose resolver never answers: each fails 502 dns_failed when
// its lookup gives up (the two are one query), neither waits for the other's lookup and then
// looks up again (it did: the second stream joined the first's dial from its start, and got
// 504 at idle_timeout, seen as a flake of the soak). Nothing is dialled.
TEST_F(SessionH2EndingsTest, TwoStreamsToANameThatNeverResolvesEachFailWithTheirLookup) {
  BedConfig config;
  config.limits = "{handshake_timeout: 2s, idle_timeout: 450ms}";
  config.dns = "{timeout: 300ms}";
  config.h2_upstreams = true;
  configure(config);
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  testing::FakeDnsServer::Zone silent;
  silent.mode = testing::FakeDnsServer::Mode::Silent;
  bed_.dns().set("origin.test", silent);
  const std::int32_t first = client->request("GET", "/one");
  bed_.runFor(100ms);
  const std::int32_t second = client->request("GET", "/two");
  ASSERT_TRUE(client->awaitStream(first)) << client->describe();
  ASSERT_TRUE(client->awaitStream(second)) << client->describe();
  for (const std::int32_t id : {first, second}) {
    EXPECT_EQ(client->stream(id).status, 502) << client->describe();
    EXPECT_EQ(client->stream(id).header("sluice-reason"), "dns_failed") << client->describe();
  }
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 0u);
  const std::vector<AuditLine> lines = awaitAudit(bed_, 2);
  EXPECT_EQ(recordsWith(lines, {{"reason", "dns_failed"}, {"status", "502"}}).size(), 2u);
}

}  // namespace
}  // namespace sluice::test_support
