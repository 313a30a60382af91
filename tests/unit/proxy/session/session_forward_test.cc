// The session forwarding plain HTTP (absolute-form requests on the explicit listener) on a real
// loop: what the client gets, what the origin gets, what the audit record says, and how the
// connection ends, for allowed and denied requests, pipelined requests and half-closes.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

class SessionForwardTest : public ::testing::Test {
 protected:
  void SetUp() override { bed_.configure(); }

  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }

  SessionBed bed_;
};

TEST_F(SessionForwardTest, AllowedAbsoluteFormGetIsForwardedInOriginFormAndAudited) {
  bed_.origin().on_request = answerEach("hello");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/hello"));

  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "hello");
  EXPECT_EQ(response->header("connection"), std::nullopt) << "a keep-alive answer";

  ASSERT_EQ(bed_.origin().requests().size(), 1u);
  const HttpMessage& sent = bed_.origin().requests()[0].message;
  EXPECT_EQ(sent.start_line, "GET /hello HTTP/1.1");
  EXPECT_EQ(sent.header("host"), origin());

  // The record is in the file before the answer's last byte left (the session flushes first).
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 1u);
  const AuditLine& r = lines[0];
  EXPECT_EQ(r["sandbox"], "sb");
  EXPECT_EQ(r["mode"], "forward");
  EXPECT_EQ(r["decision"], "allow");
  EXPECT_EQ(r["rule"], "plain");
  EXPECT_TRUE(r.isNull("reason")) << r.line;
  EXPECT_EQ(r["status"], "200");
  EXPECT_EQ(r["method"], "GET");
  EXPECT_EQ(r["url"], "http://" + origin() + "/hello");
  EXPECT_EQ(r["host"], origin());
  EXPECT_TRUE(r.isNull("sni")) << r.line;
  EXPECT_EQ(r["addrs"], "[\"127.0.0.1\"]");
  EXPECT_EQ(r["upstream"], "127.0.0.1:" + std::to_string(bed_.origin().port()));
  EXPECT_EQ(r["req_bytes"], "0");
  EXPECT_EQ(r["resp_bytes"], "5");
}

TEST_F(SessionForwardTest, KeepAliveRequestsShareOneUpstreamConnection) {
  bed_.origin().on_request = answerEach("again");
  LoopPeer& client = bed_.connectClient();
  for (int i = 0; i < 3; ++i) {
    client.write(absoluteRequest("GET", origin(), "/n" + std::to_string(i)));
    std::optional<HttpMessage> response = awaitResponse(bed_, client);
    ASSERT_TRUE(response) << "request " << i << ": " << client.received();
    EXPECT_EQ(response->status, 200);
  }
  EXPECT_EQ(bed_.origin().accepted(), 1u);
  ASSERT_EQ(bed_.origin().requests().size(), 3u);
  EXPECT_EQ(bed_.origin().requests()[2].on_connection, 3u);
  EXPECT_EQ(bed_.dns().queries("origin.test", testing::FakeDnsServer::kTypeA), 1)
      << "the answer is cached (and the parked upstream needs no lookup)";
  EXPECT_EQ(bed_.auditLines().size(), 3u);
}

TEST_F(SessionForwardTest, RequestBodiesReachTheOriginExactlyInBothFramings) {
  bed_.origin().on_request = answerEach("got it");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("POST", origin(), "/length", "Content-Length: 11\r\n") +
               "hello world");
  ASSERT_TRUE(awaitResponse(bed_, client));
  client.write(absoluteRequest("POST", origin(), "/chunked", "Transfer-Encoding: chunked\r\n") +
               "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  ASSERT_TRUE(awaitResponse(bed_, client));
  ASSERT_EQ(bed_.origin().requests().size(), 2u);
  EXPECT_EQ(bed_.origin().requests()[0].message.body, "hello world");
  EXPECT_EQ(bed_.origin().requests()[1].message.body, "hello world");
  EXPECT_TRUE(bed_.origin().requests()[1].message.chunked);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["req_bytes"], "11");
  EXPECT_EQ(lines[1]["req_bytes"], "11");
}

TEST_F(SessionForwardTest, ChunkedResponseReachesTheClientChunked) {
  bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
  };
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/chunks"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(response->body, "abcdefg");
  EXPECT_EQ(bed_.auditLines().at(0)["resp_bytes"], "7");
}

// limits.max_connections of the sandbox, checked as the worker makes the session: the
// connection over it is answered 503 at once, on record, and the others are served.
TEST(SessionConnectionLimitTest, ConnectionOverTheSandboxsLimitIsAnswered503AndAudited) {
  SessionBed bed;
  BedConfig config;
  config.sandbox_limits = "{max_connections: 1}";
  bed.configure(config);
  bed.origin().on_request = answerEach("served");
  LoopPeer& first = bed.connectClient();
  LoopPeer& second = bed.connectClient();
  std::optional<HttpMessage> refused = awaitResponse(bed, second);
  ASSERT_TRUE(refused) << second.received();
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->header("sluice-reason"), "too_many_connections");
  ASSERT_TRUE(awaitEnd(bed, second));

  const std::string authority = "origin.test:" + std::to_string(bed.origin().port());
  first.write(absoluteRequest("GET", authority, "/first"));
  std::optional<HttpMessage> served = awaitResponse(bed, first);
  ASSERT_TRUE(served) << first.received();
  EXPECT_EQ(served->status, 200);
  std::vector<AuditLine> lines = bed.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["reason"], "too_many_connections");
  EXPECT_EQ(lines[0]["status"], "503");
  EXPECT_TRUE(lines[0].isNull("method")) << lines[0].line;
}

TEST_F(SessionForwardTest, DeniedHostIsAnswered403WithItsReasonAuditedAndClosed) {
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", "elsewhere.test", "/x"));

  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 403);
  EXPECT_EQ(response->header("sluice-reason"), "not_allowed_host");
  EXPECT_EQ(response->header("proxy-status"),
            "sluice; error=http_request_denied; details=\"not_allowed_host\"");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_EQ(response->body, "sluice: not_allowed_host: elsewhere.test is not in the policy of "
                            "sandbox sb; a rule would need hosts: [elsewhere.test]\n");
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.end(), LoopPeer::End::Eof) << "a FIN after the answer, not a reset";

  EXPECT_EQ(bed_.dns().queries("elsewhere.test"), 0) << "a denied name is never resolved";
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "deny"},
                                  {"reason", "not_allowed_host"},
                                  {"status", "403"},
                                  {"mode", "forward"},
                                  {"url", "http://elsewhere.test/x"},
                                  {"rule", "null"},
                                  {"upstream", "null"},
                                  {"addrs", "[]"}}));
}

// Requests sluice refuses on its head alone: each gets its status and reason, a record, and the
// connection closes; nothing is resolved or dialled.
struct RefusedHead {
  const char* edge;
  std::string request;  // "@" stands for the origin's port
  int status;
  const char* reason;
};

void PrintTo(const RefusedHead& row, std::ostream* out) { *out << row.edge; }

class SessionRefusedHeadTest : public SessionForwardTest,
                               public ::testing::WithParamInterface<RefusedHead> {};

TEST_P(SessionRefusedHeadTest, IsAnsweredAuditedAndClosedWithoutADial) {
  std::string request = GetParam().request;
  for (std::size_t at = request.find('@'); at != std::string::npos; at = request.find('@')) {
    request.replace(at, 1, std::to_string(bed_.origin().port()));
  }
  LoopPeer& client = bed_.connectClient();
  client.write(request);
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, GetParam().status);
  EXPECT_EQ(response->header("sluice-reason"), std::string(GetParam().reason));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(bed_.dns().queries(), 0);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "deny"},
                                  {"reason", GetParam().reason},
                                  {"status", std::to_string(GetParam().status)}}));
}

INSTANTIATE_TEST_SUITE_P(
    Heads, SessionRefusedHeadTest,
    ::testing::Values(
        RefusedHead{"OriginFormToAProxy", "GET /x HTTP/1.1\r\nHost: origin.test\r\n\r\n", 400,
                    "bad_request"},
        RefusedHead{"HttpsUrlWithoutConnect",
                    "GET https://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n", 400,
                    "bad_request"},
        RefusedHead{"OtherScheme", "GET ftp://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n",
                    403, "not_allowed_scheme"},
        RefusedHead{"PortNotAllowed",
                    "GET http://origin.test:1/ HTTP/1.1\r\nHost: origin.test:1\r\n\r\n", 403,
                    "not_allowed_port"},
        RefusedHead{"IpLiteral", "GET http://127.0.0.1:@/ HTTP/1.1\r\nHost: 127.0.0.1:@\r\n\r\n",
                    403, "ip_literal"},
        RefusedHead{"HostHeaderNamesAnotherHost",
                    "GET http://origin.test:@/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n", 403,
                    "host_mismatch"},
        RefusedHead{"MalformedHead", "GET http://origin.test/ HTTP/1.1\r\nBad Field\r\n\r\n", 400,
                    "bad_request"}),
    [](const ::testing::TestParamInfo<RefusedHead>& row) { return row.param.edge; });

TEST_F(SessionForwardTest, DenialReadsNothingPipelinedAfterIt) {
  bed_.origin().on_request = answerEach("never");
  LoopPeer& client = bed_.connectClient();
  // One write: the denied request and an allowed one behind it.
  client.write(absoluteRequest("GET", "elsewhere.test", "/first") +
               absoluteRequest("GET", origin(), "/second"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 403);
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(), "") << "a second answer followed the denial";
  client.close();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.dns().queries("origin.test"), 0);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  EXPECT_EQ(bed_.auditLines().size(), 1u) << "the pipelined request was read";
}

TEST_F(SessionForwardTest, ClientHalfClosesAfterACompleteRequestAndStillGetsTheAnswer) {
  bed_.origin().on_request = answerEach("late");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/half"));
  client.shutdownWrite();
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "late");
  EXPECT_EQ(response->header("connection"), "close") << "the client is done: so is sluice";
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.end(), LoopPeer::End::Eof);
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"}, {"status", "200"}}));
}

TEST_F(SessionForwardTest, ClientHalfClosesMidBodyIsABadRequestAndTheUpstreamIsDropped) {
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("POST", origin(), "/upload", "Content-Length: 10\r\n") + "abcd");
  // The origin has the head and the four bytes: then the client gives up.
  ASSERT_TRUE(bed_.runUntil([&] {
    return bed_.origin().accepted() == 1 &&
           bed_.origin().connection(0).received().ends_with("\r\n\r\nabcd");
  }));
  client.shutdownWrite();
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 400);
  EXPECT_EQ(response->header("sluice-reason"), "bad_request");
  EXPECT_EQ(response->body, "sluice: bad_request: client closed mid-request\n");
  // The upstream got half a request: it is closed, never pooled.
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.pool().idle(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines,
      {{"decision", "deny"}, {"reason", "bad_request"}, {"status", "400"}, {"req_bytes", "4"}}));
}

TEST_F(SessionForwardTest, ClientHalfClosesMidHeadIsClosedWithoutAnswerOrRecord) {
  LoopPeer& client = bed_.connectClient();
  client.write("GET http://" + origin() + "/x HTTP/1.1\r\nHost: ori");
  client.shutdownWrite();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(), "");
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.dns().queries(), 0);
  EXPECT_TRUE(bed_.auditLines().empty());
}

TEST_F(SessionForwardTest, ClientHalfClosesBetweenRequestsEndsTheSessionAndPoolsTheUpstream) {
  bed_.origin().on_request = answerEach("one");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/one"));
  ASSERT_TRUE(awaitResponse(bed_, client));
  client.shutdownWrite();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.end(), LoopPeer::End::Eof);
  ASSERT_TRUE(bed_.allSessionsFinished());
  // Its upstream outlives it, idle in the worker's pool, still open at the origin.
  EXPECT_EQ(bed_.pool().idle(), 1u);
  EXPECT_EQ(bed_.origin().connection(0).end(), LoopPeer::End::Open);
  EXPECT_EQ(bed_.auditLines().size(), 1u) << "the half-close is no request";
}

TEST_F(SessionForwardTest, ANewClientTakesThePooledUpstreamOfAnEndedOne) {
  bed_.origin().on_request = answerEach("pooled");
  LoopPeer& first = bed_.connectClient();
  first.write(absoluteRequest("GET", origin(), "/first"));
  ASSERT_TRUE(awaitResponse(bed_, first));
  first.close();
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_EQ(bed_.pool().idle(), 1u);

  LoopPeer& second = bed_.connectClient();
  second.write(absoluteRequest("GET", origin(), "/second"));
  std::optional<HttpMessage> response = awaitResponse(bed_, second);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(bed_.origin().accepted(), 1u);
  EXPECT_EQ(bed_.origin().requestsFor("/second").at(0).on_connection, 2u);
}

}  // namespace
}  // namespace sluice::test_support
