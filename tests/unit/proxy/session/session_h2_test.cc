// HTTP/2 toward the sandbox on a real loop (docs/wire.md#http2): streams of one connection each
// decided, forwarded, denied and audited on their own. An allowed GET reaches the origin and is
// answered; a denial is an answer on its stream while the connection's other streams go on; a
// malformed stream is reset PROTOCOL_ERROR and on record as bad_request, whether nghttp2 or
// sluice found it out; and DATA that meet a stream's content-length in one read and break it in
// the next never give an HTTP/1.1 origin a complete request.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_h2_fixture.h"

namespace sluice::test_support {
namespace {

TEST_F(SessionH2Test, AllowedGetIsForwardedToItsOriginAndAnsweredOnItsStream) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  // What sluice promised in its SETTINGS.
  EXPECT_EQ(client->setting(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 100u);
  EXPECT_EQ(client->setting(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE), 64u * 1024);
  EXPECT_EQ(client->setting(NGHTTP2_SETTINGS_ENABLE_PUSH).value_or(0), 0u);

  const std::int32_t id = client->request("GET", "/hello", {{"accept", "text/plain"}});
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  const Http2Client::Stream& stream = client->stream(id);
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.ended);
  EXPECT_FALSE(stream.reset);
  EXPECT_EQ(stream.body, "answer /hello");
  EXPECT_EQ(stream.header("content-length"), "13");

  ASSERT_EQ(bed_.tlsOrigin().requests().size(), 1u);
  const HttpMessage& got = bed_.tlsOrigin().requests()[0].message;
  EXPECT_EQ(got.start_line, "GET /hello HTTP/1.1");
  EXPECT_EQ(got.header("host"), authority()) << "the :authority, as Host";
  EXPECT_EQ(got.header("accept"), "text/plain");

  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(isOneRecord(lines, {{"mode", "connect"},
                                  {"sni", "origin.test"},
                                  {"method", "GET"},
                                  {"url", url("/hello")},
                                  {"decision", "allow"},
                                  {"rule", "tls"},
                                  {"reason", "null"},
                                  {"status", "200"},
                                  {"resp_bytes", "13"},
                                  {"proto", "h2"},
                                  {"upstream_proto", "http/1.1"},
                                  {"upstream", upstream()},
                                  {"error", "null"}}));
  EXPECT_FALSE(client->goAway()) << "one stream over is no reason to end the connection";
  EXPECT_FALSE(client->ended());
}

// A stream whose :authority is not the tunnel's is refused on its stream (403, sluice-reason),
// while a stream opened before it waits for its origin and is answered after it.
TEST_F(SessionH2Test, DeniedStreamIs403WithItsReasonWhileAnotherStreamOfTheConnectionGoesOn) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t held = client->request("GET", "/held");
  ASSERT_TRUE(awaitHeld());

  const std::int32_t denied = client->takeStreamId();
  client->headers(denied,
                  {{":method", "GET"},
                   {":scheme", "https"},
                   {":authority", "elsewhere.test"},
                   {":path", "/denied"}},
                  true);
  ASSERT_TRUE(client->awaitStream(denied)) << client->describe();
  const Http2Client::Stream& refusal = client->stream(denied);
  EXPECT_EQ(refusal.status, 403);
  EXPECT_EQ(refusal.header("sluice-reason"), "host_mismatch");
  EXPECT_TRUE(refusal.header("proxy-status").has_value());
  EXPECT_FALSE(refusal.body.empty()) << "the denial's one line";
  EXPECT_TRUE(refusal.ended);
  EXPECT_FALSE(client->stream(held).over())
      << "the denial ended the other stream: " << client->describe();

  held_->write(okResponse("late"));
  ASSERT_TRUE(client->awaitStream(held)) << client->describe();
  EXPECT_EQ(client->stream(held).status, 200);
  EXPECT_EQ(client->stream(held).body, "late");
  EXPECT_FALSE(client->goAway());

  ASSERT_EQ(bed_.tlsOrigin().requests().size(), 1u) << "the denied stream reached the origin";
  EXPECT_EQ(bed_.tlsOrigin().requests()[0].message.target, "/held");
  std::vector<AuditLine> lines = awaitAudit(bed_, 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(isOneRecord(recordsWith(lines, {{"decision", "deny"}}), {{"reason", "host_mismatch"},
                                                                       {"status", "403"},
                                                                       {"method", "GET"},
                                                                       {"proto", "h2"},
                                                                       {"upstream", "null"}}));
  EXPECT_TRUE(isOneRecord(recordsWith(lines, {{"decision", "allow"}}),
                          {{"url", url("/held")}, {"status", "200"}, {"proto", "h2"}}));
}

// Malformed streams (RFC 9113 section 8.1.1) are stream errors, never translated: an upper-case
// field name, which nghttp2 finds before sluice sees the head, and two host fields that name
// different authorities, which sluice's own checks find. Each is reset PROTOCOL_ERROR, never
// reaches the origin, and is on record as bad_request with no status; the connection goes on.
TEST_F(SessionH2Test, MalformedStreamsAreResetProtocolErrorOnRecordAsBadRequestAndTheRestGoesOn) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t upper = client->request("GET", "/upper", {{"X-Upper", "1"}});
  const std::int32_t hosts =
      client->request("GET", "/two-hosts", {{"host", authority()}, {"host", "other.test"}});
  ASSERT_TRUE(client->awaitStream(upper)) << client->describe();
  ASSERT_TRUE(client->awaitStream(hosts)) << client->describe();
  EXPECT_EQ(client->stream(upper).reset, NGHTTP2_PROTOCOL_ERROR) << client->describe();
  EXPECT_EQ(client->stream(hosts).reset, NGHTTP2_PROTOCOL_ERROR) << client->describe();
  EXPECT_EQ(client->stream(upper).status, 0) << "a malformed stream got an answer";
  EXPECT_EQ(client->stream(hosts).status, 0) << "a malformed stream got an answer";

  const std::int32_t after = client->request("GET", "/after");
  ASSERT_TRUE(client->awaitStream(after)) << client->describe();
  EXPECT_EQ(client->stream(after).status, 200);
  EXPECT_FALSE(client->goAway()) << client->describe();

  ASSERT_EQ(bed_.tlsOrigin().requests().size(), 1u);
  EXPECT_EQ(bed_.tlsOrigin().requests()[0].message.target, "/after");
  std::vector<AuditLine> lines = awaitAudit(bed_, 3);
  ASSERT_EQ(lines.size(), 3u);
  std::vector<AuditLine> bad = recordsWith(
      lines,
      {{"decision", "deny"}, {"reason", "bad_request"}, {"status", "null"}, {"proto", "h2"}});
  ASSERT_EQ(bad.size(), 2u) << lines[0].line << "\n" << lines[1].line << "\n" << lines[2].line;
  EXPECT_EQ(bad[0]["upstream"], "null");
  EXPECT_EQ(bad[1]["upstream"], "null");
  EXPECT_TRUE(isOneRecord(recordsWith(lines, {{"decision", "allow"}}),
                          {{"url", url("/after")}, {"status", "200"}}));
}

// A POST of content-length 3 whose DATA "abc" come without END_STREAM, then (in a later read,
// after a PING barrier) one byte more: the origin, on a warm keep-alive upstream, got the head
// and "ab" as they came but never the last byte, so it never had a request to act on; the
// stream is reset PROTOCOL_ERROR, the upstream dropped, and the record says bad_request.
TEST_F(SessionH2Test, ContentLengthMetBeforeEndStreamThenBrokenInALaterReadNeverCompletesUpstream) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t warm = client->request("GET", "/warm");
  ASSERT_TRUE(client->awaitStream(warm)) << client->describe();
  ASSERT_EQ(client->stream(warm).status, 200);

  const std::int32_t id = client->request("POST", "/post", {{"content-length", "3"}}, false);
  client->data(id, "abc", false);
  client->ping(1);
  ASSERT_TRUE(client->awaitPingAcks(1)) << client->describe();
  ASSERT_TRUE(bed_.runUntil([&] {
    const std::string got = originReceived();
    return got.find("POST /post HTTP/1.1\r\n") != std::string::npos &&
           got.find("\r\n\r\nab") != std::string::npos;
  })) << "the head and the first bytes of the body never reached the origin: "
      << originReceived();
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 1u) << "the POST went on the warm upstream";
  EXPECT_NE(originReceived().find("Content-Length: 3\r\n"), std::string::npos);
  EXPECT_TRUE(originReceived().ends_with("ab")) << "the body's last byte went before its end";

  client->data(id, "d", true);  // the fourth byte of three
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EXPECT_EQ(client->stream(id).reset, NGHTTP2_PROTOCOL_ERROR) << client->describe();
  EXPECT_EQ(client->stream(id).status, 0);
  LoopPeer& upstream = bed_.tlsOrigin().connection(0);
  ASSERT_TRUE(awaitEnd(bed_, upstream)) << "the upstream of a broken request was kept";
  EXPECT_TRUE(upstream.received().ends_with("ab")) << upstream.received();
  EXPECT_EQ(upstream.received().find("abc"), std::string::npos) << "the origin got the last byte";
  EXPECT_TRUE(bed_.tlsOrigin().requestsFor("/post").empty());
  EXPECT_FALSE(client->goAway()) << "a stream error ended the connection: " << client->describe();

  std::vector<AuditLine> lines = awaitAudit(bed_, 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(isOneRecord(
      recordsWith(lines, {{"method", "POST"}}),
      {{"url", url("/post")}, {"decision", "deny"}, {"reason", "bad_request"}, {"proto", "h2"}}));
}

// The same with content-length 0 and no END_STREAM on the HEADERS: the origin gets the head but
// its last byte, so not even a bodiless request is complete there before the stream's end.
TEST_F(SessionH2Test, DeclaredEmptyBodyThenDataInALaterReadNeverCompletesTheHeadUpstream) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t warm = client->request("GET", "/warm");
  ASSERT_TRUE(client->awaitStream(warm)) << client->describe();

  const std::int32_t id = client->request("POST", "/zero", {{"content-length", "0"}}, false);
  client->ping(1);
  ASSERT_TRUE(client->awaitPingAcks(1)) << client->describe();
  ASSERT_TRUE(bed_.runUntil([&] {
    return originReceived().find("POST /zero HTTP/1.1\r\n") != std::string::npos;
  })) << originReceived();
  client->data(id, "x", true);
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EXPECT_EQ(client->stream(id).reset, NGHTTP2_PROTOCOL_ERROR) << client->describe();
  LoopPeer& upstream = bed_.tlsOrigin().connection(0);
  ASSERT_TRUE(awaitEnd(bed_, upstream));
  const std::string got = upstream.received().substr(upstream.received().find("POST /zero"));
  EXPECT_TRUE(got.ends_with("\r\n\r"))
      << "the head's last byte went before the stream's end: " << got;
  EXPECT_TRUE(bed_.tlsOrigin().requestsFor("/zero").empty());
  std::vector<AuditLine> lines = awaitAudit(bed_, 2);
  EXPECT_TRUE(
      isOneRecord(recordsWith(lines, {{"method", "POST"}}),
                  {{"url", url("/zero")}, {"decision", "deny"}, {"reason", "bad_request"}}));
}

}  // namespace
}  // namespace sluice::test_support
