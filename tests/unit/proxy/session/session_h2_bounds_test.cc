// What one HTTP/2 connection can make sluice do or hold, against the bounds sluice promises
// (docs/wire.md#http2 "Flow control and memory" and "Floods",
// docs/audit.md#when-the-audit-file-cannot-be-written), on a real loop: resets, the client's own
// or those it provokes, are one budget (a burst of 100, then 50 a second) past which GOAWAY
// ENHANCE_YOUR_CALM ends the connection, on record as h2_rapid_reset; while the audit file
// cannot be written a connection keeps one refusal, says GOAWAY and has its later streams
// refused unprocessed; and 100 streams of a large answer whose client never returns a window use
// at most ConnectionBudget::kUpstreams upstream connections at once and get no byte past the
// client's windows; a sandbox's limits.max_streams is what its connections promise and hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "proxy/session/context/connection_budget.h"
#include "tests/unit/proxy/session/session_h2_fixture.h"

namespace sluice::test_support {
namespace {

// sluice's reset budget (docs/wire.md#http2, "Floods").
constexpr double kResetBurst = 100;
constexpr double kResetRate = 50;  // a second
// Streams written at once: the most that can be in one read when the budget runs out.
constexpr std::size_t kRound = 50;
constexpr std::size_t kMaxRounds = 20;

double seconds(std::chrono::milliseconds span) { return static_cast<double>(span.count()) / 1000; }

// Writes rounds of kRound streams, each made by `stream(client, id)` and the round ended by a
// PING; the next round once that PING was acknowledged (sluice read the round and answered what
// it answers), until sluice says GOAWAY or kMaxRounds were sent. Returns the streams sent.
template <class MakeStream>
std::size_t sendRounds(SessionBed& bed, Http2Client& client, MakeStream stream) {
  std::size_t sent = 0;
  for (std::size_t round = 0; round < kMaxRounds; ++round) {
    if (client.goAway() || client.ended()) {
      break;
    }
    std::string frames;
    for (std::size_t i = 0; i < kRound; ++i) {
      frames += stream(client, client.takeStreamId());
    }
    client.write(frames + Http2Client::pingFrame(round));
    sent += kRound;
    const bool read = bed.runUntil(
        [&] { return client.goAway() || client.ended() || client.pingAcks() > round; });
    EXPECT_TRUE(read) << "a round of streams left unread: " << client.describe();
  }
  return sent;
}

// The tunnel's record of a connection sluice ended for a flood: after its streams' records.
void expectFloodRecord(const std::vector<AuditLine>& lines, std::string_view error) {
  ASSERT_FALSE(lines.empty());
  const std::vector<AuditLine> tunnel = recordsWith(lines, {{"method", "CONNECT"}});
  EXPECT_TRUE(isOneRecord(tunnel, {{"decision", "deny"},
                                   {"reason", "bad_request"},
                                   {"status", "null"},
                                   {"proto", "h2"},
                                   {"error", error}}));
  EXPECT_EQ(lines.back()["method"], "CONNECT") << "the tunnel's record came before its streams'";
}

// MadeYouReset (CVE-2025-8671): each stream declares content-length 1 and sends 2 bytes of DATA,
// which nghttp2 answers with RST_STREAM PROTOCOL_ERROR. Those resets draw from the budget the
// client's own do: GOAWAY ENHANCE_YOUR_CALM once it is spent, with no more resets (and dials)
// than the budget and the one read that spent it.
TEST_F(SessionH2Test, ResetsTheClientProvokesEndTheConnectionWithEnhanceYourCalmWithinTheBudget) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const std::size_t sent = sendRounds(bed_, *client, [](Http2Client& c, std::int32_t id) {
    return c.headersFrame(id, c.requestFields("POST", "/provoked", {{"content-length", "1"}}),
                          false) +
           Http2Client::dataFrame(id, "xy", true);
  });
  const double elapsed = seconds(since(start));
  ASSERT_TRUE(client->awaitGoAway()) << sent << " streams reset: " << client->describe();
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_LT(sent, kMaxRounds * kRound);

  const std::size_t resets = client->resets(NGHTTP2_PROTOCOL_ERROR);
  const double limit = kResetBurst + kResetRate * elapsed + kRound;
  EXPECT_GE(resets, static_cast<std::size_t>(kResetBurst)) << "GOAWAY before the burst was spent";
  EXPECT_LE(static_cast<double>(resets), limit) << "in " << elapsed << " s";
  EXPECT_LE(static_cast<double>(bed_.tlsOrigin().accepted()), limit);
  EXPECT_TRUE(bed_.tlsOrigin().requests().empty()) << "a broken request reached the origin";
  ASSERT_TRUE(client->awaitEnd());
  client->peer().close();  // as a client does once it was told GOAWAY: no linger
  ASSERT_TRUE(bed_.allSessionsFinished());

  std::vector<AuditLine> lines = bed_.auditLines();
  expectFloodRecord(lines, "h2_rapid_reset");
  const std::vector<AuditLine> streams = recordsWith(lines, {{"method", "POST"}});
  EXPECT_EQ(streams.size(), recordsWith(streams, {{"reason", "bad_request"}}).size());
  EXPECT_EQ(streams.size(), resets) << "a reset stream without its record, or a record too many";
}

// The client's own RST_STREAMs, counted as they are read: the one past the burst (and what the
// rate gave back meanwhile) ends the connection there, its stream the last one processed.
TEST_F(SessionH2Test, ClientResetsPastTheBurstEndTheConnectionWithEnhanceYourCalm) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  sendRounds(bed_, *client, [](Http2Client& c, std::int32_t id) {
    return c.headersFrame(id, c.requestFields("GET", "/stall/reset"), true) +
           Http2Client::rstStreamFrame(id, NGHTTP2_CANCEL);
  });
  const double elapsed = seconds(since(start));
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  // Stream n has id 2n - 1; the GOAWAY names the last one sluice processed.
  const auto processed = static_cast<double>((client->goAway()->last_stream_id + 1) / 2);
  EXPECT_GE(processed, kResetBurst + 1) << client->describe();
  EXPECT_LE(processed, kResetBurst + 1 + kResetRate * elapsed) << "in " << elapsed << " s";
  ASSERT_TRUE(client->awaitEnd());
  client->peer().close();  // as a client does once it was told GOAWAY: no linger
  ASSERT_TRUE(bed_.allSessionsFinished());
  const std::vector<AuditLine> lines = bed_.auditLines();
  expectFloodRecord(lines, "h2_rapid_reset");
  EXPECT_EQ(static_cast<double>(recordsWith(lines, {{"method", "GET"}}).size()), processed)
      << "a stream the client reset is on record, with what was sent";
}

// While the audit file cannot be written: the connection keeps one refusal (503
// audit_unavailable, its record kept in memory) and says GOAWAY; the streams it opened after it
// are refused unprocessed (REFUSED_STREAM) and only counted. Once the file takes the records
// again, every one kept is there, in order.
TEST_F(SessionH2Test, AuditUnavailableKeepsOneRefusalThenGoAwayAndLaterStreamsAreRefused) {
  BedConfig config;
  config.audit_can_fail = true;
  configure(config);
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t first = client->request("GET", "/first");
  ASSERT_TRUE(client->awaitStream(first));
  ASSERT_EQ(awaitAudit(bed_, 1).size(), 1u);

  // The next record cannot be written: its request was admitted and answered (the failure is
  // found only by writing), and from then on the sink is unavailable.
  bed_.failAuditWrites(true);
  const std::int32_t second = client->request("GET", "/second");
  ASSERT_TRUE(client->awaitStream(second));
  EXPECT_EQ(client->stream(second).status, 200);
  ASSERT_TRUE(bed_.runUntil([&] { return !bed_.auditSink().available(); }));

  std::string frames;
  std::vector<std::int32_t> ids;
  for (const char* path : {"/third", "/fourth", "/fifth"}) {
    ids.push_back(client->takeStreamId());
    frames += client->headersFrame(ids.back(), client->requestFields("GET", path), true);
  }
  client->write(frames);
  ASSERT_TRUE(client->awaitStream(ids[0])) << client->describe();
  EXPECT_EQ(client->stream(ids[0]).status, 503);
  EXPECT_EQ(client->stream(ids[0]).header("sluice-reason"), "audit_unavailable");
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));
  ASSERT_TRUE(client->awaitStream(ids[1])) << client->describe();
  ASSERT_TRUE(client->awaitStream(ids[2])) << client->describe();
  EXPECT_EQ(client->stream(ids[1]).reset, NGHTTP2_REFUSED_STREAM) << client->describe();
  EXPECT_EQ(client->stream(ids[2]).reset, NGHTTP2_REFUSED_STREAM) << client->describe();
  EXPECT_EQ(bed_.auditSink().status().refused_streams, 2u);
  ASSERT_TRUE(client->awaitEnd()) << "GOAWAY, and the connection stayed open";
  client->peer().close();  // as a client does once it was told GOAWAY: no linger
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.tlsOrigin().requests().size(), 2u) << "a refused stream reached the origin";
  EXPECT_EQ(bed_.auditLines().size(), 1u) << "written while the file could not be";

  // The file takes its lines again (the server's retry timer flushes; here, the test).
  bed_.failAuditWrites(false);
  bed_.auditSink().flush();
  EXPECT_TRUE(bed_.auditSink().available());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 3u) << "one refusal kept, and the record that failed";
  EXPECT_EQ(lines[1]["url"], url("/second"));
  EXPECT_EQ(lines[1]["status"], "200");
  EXPECT_EQ(lines[2]["url"], url("/third"));
  EXPECT_EQ(lines[2]["decision"], "deny");
  EXPECT_EQ(lines[2]["reason"], "audit_unavailable");
  EXPECT_EQ(lines[2]["status"], "503");
}

// 100 streams of a 1 MiB answer, and a client that never sends WINDOW_UPDATE (its streams'
// windows 16 KiB, its connection's 65,535 bytes): the origin (HTTP/1.1: a connection per
// request) sees ConnectionBudget::kUpstreams connections and no more while the 100 streams are
// in flight, the other streams waiting their turn; sluice sends no DATA past a window. When a
// stream that has an upstream is reset, the next waiting stream takes its turn: still at most
// kUpstreams at once.
TEST_F(SessionH2Test, HundredStreamsThatNeverReturnAWindowUseAtMostSixteenUpstreamsAtOnce) {
  constexpr std::size_t kStreams = 100;
  constexpr std::uint32_t kStreamWindow = 16 * 1024;
  constexpr std::size_t kConnectionWindow = 65535;  // RFC 9113's initial window, never raised
  constexpr std::size_t kUpstreams = proxy::session::ConnectionBudget::kUpstreams;
  static const std::string kBig(1024 * 1024, 'b');
  configure();
  bed_.tlsOrigin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBig.size()) +
                     "\r\n\r\n");
    connection.write(kBig);
  };
  Http2Client::Options options;
  options.return_windows = false;
  options.settings = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  Http2Client* client = openClient(options);
  ASSERT_NE(client, nullptr);

  std::string frames;
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < kStreams; ++i) {
    ids.push_back(client->takeStreamId());
    frames += client->headersFrame(
        ids.back(), client->requestFields("GET", "/big/" + std::to_string(ids.back())), true);
  }
  client->write(frames);
  const auto& metrics = bed_.context().generation->sandboxes.front().runtime->metrics;
  // Every window filled: what sluice can send before the client gives any back.
  ASSERT_TRUE(bed_.runUntil([&] {
    return bed_.tlsOrigin().requests().size() >= kUpstreams &&
           client->dataBytes() >= kConnectionWindow;
  })) << bed_.tlsOrigin().requests().size()
      << " requests at the origin; " << client->describe();
  bed_.runFor(300ms);  // and nothing more comes meanwhile
  EXPECT_EQ(metrics.h2_client_streams_active.load(), static_cast<std::int64_t>(kStreams));
  EXPECT_EQ(bed_.tlsOrigin().accepted(), kUpstreams);
  EXPECT_EQ(bed_.tlsOrigin().requests().size(), kUpstreams);
  EXPECT_EQ(client->dataBytes(), kConnectionWindow) << "DATA past the connection's window";
  std::size_t answered = 0;
  for (std::int32_t id : ids) {
    const Http2Client::Stream& stream = client->stream(id);
    EXPECT_LE(stream.data_bytes, kStreamWindow) << "DATA past stream " << id << "'s window";
    EXPECT_FALSE(stream.over()) << "stream " << id << ": " << client->describe();
    answered += stream.status == 200 ? 1 : 0;
  }
  // Heads only for streams with an upstream, and only for those read before the connection's
  // answers held (ConnectionBudget::kHeldBytes) filled up: the others wait in their sockets.
  EXPECT_GE(answered, 1u);
  EXPECT_LE(answered, kUpstreams);
  ASSERT_FALSE(client->goAway()) << client->describe();

  // One stream with an upstream gives up: its upstream goes, and a waiting stream's comes.
  const std::string first = bed_.tlsOrigin().requests()[0].message.target;
  const std::int32_t cut = std::stoi(first.substr(first.rfind('/') + 1));
  const std::size_t cut_connection = bed_.tlsOrigin().requests()[0].connection;
  client->rstStream(cut, NGHTTP2_CANCEL);
  ASSERT_TRUE(bed_.runUntil([&] {
    return bed_.tlsOrigin().requests().size() == kUpstreams + 1 &&
           bed_.tlsOrigin().connection(cut_connection).end() != LoopPeer::End::Open;
  })) << bed_.tlsOrigin().requests().size()
      << " requests at the origin";
  bed_.runFor(100ms);
  EXPECT_EQ(bed_.tlsOrigin().accepted(), kUpstreams + 1);
  std::size_t open = 0;
  for (std::size_t i = 0; i < bed_.tlsOrigin().accepted(); ++i) {
    open += bed_.tlsOrigin().connection(i).end() == LoopPeer::End::Open ? 1 : 0;
  }
  EXPECT_EQ(open, kUpstreams);
  EXPECT_LE(client->dataBytes(), kConnectionWindow);

  // The client leaves: every stream is cut short, on record.
  client->peer().reset();
  ASSERT_TRUE(bed_.allSessionsFinished());
  // (Its streams count until the session is deleted, on the loop's next turn.)
  EXPECT_TRUE(bed_.runUntil([&] { return metrics.h2_client_streams_active.load() == 0; }))
      << metrics.h2_client_streams_active.load() << " streams still counted";
  EXPECT_EQ(recordsWith(bed_.auditLines(), {{"method", "GET"}, {"proto", "h2"}}).size(), kStreams);
}

// limits.max_streams (docs/configuration.md): the sandbox's connections promise that many
// streams in SETTINGS, and a stream past it is refused (REFUSED_STREAM: the client may retry it
// once one ends), never decided or forwarded, while those in flight go on.
// limits.max_streams is the connection's SETTINGS_MAX_CONCURRENT_STREAMS: streams in flight, not
// streams in all (one that ended frees its place). A client that opens one more after it
// acknowledged the SETTINGS broke a promise it made: the connection ends, GOAWAY PROTOCOL_ERROR
// naming the last stream taken (RFC 9113 section 5.1.2), and the stream past it never reaches an
// origin (docs/wire.md#http2).
TEST_F(SessionH2Test, AStreamPastTheSandboxsMaxStreamsEndsTheConnectionUnprocessed) {
  BedConfig config;
  config.sandbox_limits = "{max_streams: 2}";
  configure(config);
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->setting(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 2u);
  const auto holdNext = [&](std::string_view path, std::int32_t* id) {
    *id = client->request("GET", path);
    held_ = nullptr;
    return awaitHeld();
  };
  std::int32_t first = 0, second = 0, third = 0;
  ASSERT_TRUE(holdNext("/held-one", &first));
  LoopPeer* first_origin = held();
  ASSERT_TRUE(holdNext("/held-two", &second));
  first_origin->write(okResponse("one"));
  ASSERT_TRUE(client->awaitStream(first)) << client->describe();
  EXPECT_EQ(client->stream(first).body, "one");
  // One place is free again: a third stream is taken while the second is still in flight.
  ASSERT_TRUE(holdNext("/held-three", &third));
  EXPECT_FALSE(client->goAway());
  const std::int32_t fourth = client->request("GET", "/held-four");
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_EQ(client->goAway()->error_code, NGHTTP2_PROTOCOL_ERROR);
  EXPECT_EQ(client->goAway()->last_stream_id, third);
  EXPECT_FALSE(client->stream(fourth).ended);
  ASSERT_TRUE(client->awaitEnd()) << client->describe();
  std::vector<std::string> targets;
  for (const auto& request : bed_.tlsOrigin().requests()) {
    targets.push_back(request.message.target);
  }
  EXPECT_EQ(targets, (std::vector<std::string>{"/held-one", "/held-two", "/held-three"}));
}

// Before the client acknowledged the SETTINGS, it may not know the bound yet (its first flight
// can cross sluice's SETTINGS): a stream past it is refused unprocessed, REFUSED_STREAM, which a
// client may retry, and the connection goes on (docs/wire.md#http2).
TEST_F(SessionH2Test, AStreamPastMaxStreamsBeforeTheSettingsAreAcknowledgedIsRefusedUnprocessed) {
  BedConfig config;
  config.sandbox_limits = "{max_streams: 1}";
  configure(config);
  Http2Client::Options options;
  options.acknowledge_settings = false;
  Http2Client* client = openClient(std::move(options));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->setting(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 1u);
  const std::int32_t first = client->request("GET", "/held-one");
  const std::int32_t second = client->request("GET", "/two");
  ASSERT_TRUE(client->awaitStream(second)) << client->describe();
  EXPECT_EQ(client->stream(second).reset, NGHTTP2_REFUSED_STREAM);
  ASSERT_TRUE(awaitHeld());
  held()->write(okResponse("one"));
  ASSERT_TRUE(client->awaitStream(first)) << client->describe();
  EXPECT_EQ(client->stream(first).body, "one");
  client->acknowledgeSettings();
  const std::int32_t third = client->request("GET", "/three");
  ASSERT_TRUE(client->awaitStream(third)) << client->describe();
  EXPECT_EQ(client->stream(third).status, 200);
  EXPECT_FALSE(client->goAway());
  std::vector<std::string> targets;
  for (const auto& request : bed_.tlsOrigin().requests()) {
    targets.push_back(request.message.target);
  }
  EXPECT_EQ(targets, (std::vector<std::string>{"/held-one", "/three"}));
}

}  // namespace
}  // namespace sluice::test_support
