// The exchange's edges where the request body and the response cross on a real loop: an origin
// that answers before the request body is complete (its head only, or a whole response ended by
// its close), and what then ends the exchange: the body's end, a bad chunk, the client's FIN or
// reset, the upstream's reset. Each test names the edge of exchange_state.h it drives and checks
// that the session took it, what the client and the origin saw, and the audit record.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/transition_log.h"
#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

constexpr std::size_t kBodySize = 1000;
// What a POST of kBodySize bytes sends first; the rest is kRest.
constexpr std::string_view kFirstPart = "part";
const std::string kRest(kBodySize - kFirstPart.size(), 'b');

class SessionEdgesTest : public ::testing::Test {
 protected:
  void SetUp() override { bed_.configure(); }

  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }

  // A POST whose body (Content-Length kBodySize, or chunked) is begun with kFirstPart; true
  // once the origin has the head and that part: the exchange is in SendingRequest.
  bool startUpload(LoopPeer& client, bool chunked = false) {
    if (chunked) {
      client.write(absoluteRequest("POST", origin(), "/upload", "Transfer-Encoding: chunked\r\n") +
                   "4\r\npart\r\n");
    } else {
      client.write(absoluteRequest("POST", origin(), "/upload",
                                   "Content-Length: " + std::to_string(kBodySize) + "\r\n") +
                   std::string(kFirstPart));
    }
    return bed_.runUntil([&] {
      return bed_.origin().accepted() == 1 &&
             bed_.origin().connection(0).received().find(kFirstPart) != std::string::npos;
    });
  }

  LoopPeer& upstream() { return bed_.origin().connection(0); }

  // The origin's response head, before the request body is complete; true once the client
  // has it (the exchange is in RespondingWhileSending).
  bool answerEarly(LoopPeer& client, std::string_view head) {
    upstream().write(head);
    return bed_.runUntil([&] { return client.received().find("\r\n\r\n") != std::string::npos; });
  }

  // The origin answers a whole response ended by its close, before the request body is
  // complete; true once the client has all of it (re-chunked: its last chunk).
  bool answerEarlyAndClose(LoopPeer& client) {
    upstream().write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nearly");
    upstream().shutdownWrite();
    return bed_.runUntil([&] { return client.received().ends_with("0\r\n\r\n"); });
  }

  SessionBed bed_;
};

constexpr std::string_view kEarlyHead = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n";

// exchange RespondingWhileSending -> Responding: the response head went out first, then the
// request's end went upstream, then the response's body: one complete exchange, and the
// client's connection is kept.
TEST_F(SessionEdgesTest, EarlyResponseHeadThenTheRequestEndsThenTheResponse) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client));
  EdgeWatch early("exchange", "SendingRequest", "RespondingWhileSending");
  EdgeWatch edge("exchange", "RespondingWhileSending", "Responding");
  ASSERT_TRUE(answerEarly(client, kEarlyHead)) << client.received();
  EXPECT_TRUE(early.seen()) << early.name();
  EXPECT_FALSE(edge.seen()) << edge.name();

  client.write(kRest);
  ASSERT_TRUE(bed_.runUntil([&] { return upstream().received().ends_with(kRest); }));
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_TRUE(bed_.auditLines().empty()) << "a record before the response ended";

  upstream().write("done");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "done");
  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"},
                                  {"reason", "null"},
                                  {"status", "200"},
                                  {"req_bytes", std::to_string(kBodySize)},
                                  {"resp_bytes", "4"}}));
  EXPECT_EQ(client.end(), LoopPeer::End::Open) << "a complete exchange closed its client";
  EXPECT_EQ(bed_.liveSessions(), 1u);
}

// exchange RespondingWhileSending -> FinishingRequest -> Complete: the origin's close ended
// its response before the request body did; the client has the whole response, and the rest
// of its body is read and dropped. The record is written at the request's end.
TEST_F(SessionEdgesTest, UpstreamCloseEndsTheResponseFirstThenTheBodyIsReadToItsEnd) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client));
  EdgeWatch finishing("exchange", "RespondingWhileSending", "FinishingRequest");
  EdgeWatch complete("exchange", "FinishingRequest", "Complete");
  ASSERT_TRUE(answerEarlyAndClose(client)) << client.received();
  EXPECT_TRUE(finishing.seen()) << finishing.name();
  std::optional<HttpMessage> response = client.takeResponse();
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(response->body, "early");
  ASSERT_TRUE(awaitEnd(bed_, upstream()));
  EXPECT_TRUE(bed_.auditLines().empty()) << "a record before the request ended";

  const std::size_t forwarded = upstream().received().size();
  client.write(kRest);
  std::vector<AuditLine> lines = awaitAudit(bed_, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(complete.seen()) << complete.name();
  EXPECT_EQ(upstream().received().size(), forwarded) << "the dropped body went upstream";
  EXPECT_EQ(lines[0]["decision"], "allow");
  EXPECT_TRUE(lines[0].isNull("reason")) << lines[0].line;
  EXPECT_EQ(lines[0]["status"], "200");
  EXPECT_EQ(lines[0]["req_bytes"], std::to_string(kBodySize));
  EXPECT_EQ(lines[0]["resp_bytes"], "5");
  EXPECT_EQ(bed_.pool().idle(), 0u);
}

// exchange FinishingRequest -> Failed: the response is over, and the client ends its side
// before the body it announced: the request never completed, the connection is closed.
TEST_F(SessionEdgesTest, ClientFinMidBodyAfterTheResponseEndedFailsTheExchange) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client));
  EdgeWatch edge("exchange", "FinishingRequest", "Failed");
  ASSERT_TRUE(answerEarlyAndClose(client)) << client.received();
  client.shutdownWrite();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(edge.seen()) << edge.name();
  std::optional<HttpMessage> response = client.takeResponse();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, "early");
  EXPECT_EQ(client.received(), "") << "sluice said more after the response";
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"},
                                  {"reason", "bad_request"},
                                  {"status", "200"},
                                  {"req_bytes", std::to_string(kFirstPart.size())}}));
}

// exchange FinishingRequest -> Denied: the response is over, and the rest of a chunked body
// is malformed: nothing more can be said to the client (its response went out), the record
// says bad_request with the status it got, and the connection ends.
TEST_F(SessionEdgesTest, BadChunkAfterTheResponseEndedDeniesTheExchange) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client, /*chunked=*/true));
  EdgeWatch edge("exchange", "FinishingRequest", "Denied");
  ASSERT_TRUE(answerEarlyAndClose(client)) << client.received();
  ASSERT_TRUE(client.takeResponse());
  client.write("zz\r\n");
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(client.received(), "") << "sluice answered again after the response";
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "deny"}, {"reason", "bad_request"}, {"status", "200"}}));
}

// exchange RespondingWhileSending -> Denied: the response head went out, then the request's
// chunked body turns out malformed: no 400 can follow a 200, so the client's connection ends
// after what it got, and so does the upstream's (its request never completed).
TEST_F(SessionEdgesTest, BadChunkWhileAnEarlyResponseFlowsDeniesTheExchange) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client, /*chunked=*/true));
  EdgeWatch edge("exchange", "RespondingWhileSending", "Denied");
  ASSERT_TRUE(answerEarly(client, kEarlyHead)) << client.received();
  client.write("zz\r\n");
  ASSERT_TRUE(awaitEnd(bed_, client));
  ASSERT_TRUE(awaitEnd(bed_, upstream()));
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(client.received(), kEarlyHead) << "sluice's own answer after the origin's head";
  EXPECT_EQ(bed_.pool().idle(), 0u);
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "deny"}, {"reason", "bad_request"}, {"status", "200"}}));
}

// exchange RespondingWhileSending -> Failed: the origin resets after its head, while the
// request body still flows: the client's connection is cut after the head (a short response,
// nothing sluice made up), and the record says the upstream failed.
TEST_F(SessionEdgesTest, UpstreamResetWhileAnEarlyResponseFlowsFailsTheExchange) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client));
  EdgeWatch edge("exchange", "RespondingWhileSending", "Failed");
  ASSERT_TRUE(answerEarly(client, kEarlyHead)) << client.received();
  upstream().reset();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(client.received(), kEarlyHead);
  ASSERT_TRUE(bed_.allSessionsFinished());
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"},
                                  {"reason", "upstream_connect"},
                                  {"status", "200"},
                                  {"resp_bytes", "0"}}));
}

// exchange SendingRequest -> Failed: the client resets while its body is being forwarded and
// before any answer: the upstream's connection (carrying half a request) is closed, not
// pooled, and the request has its record: allowed, no status, what was sent.
TEST_F(SessionEdgesTest, ClientResetWhileTheBodyIsSentFailsTheExchange) {
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(startUpload(client));
  EdgeWatch edge("exchange", "SendingRequest", "Failed");
  client.reset();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  ASSERT_TRUE(awaitEnd(bed_, upstream()));
  EXPECT_EQ(bed_.pool().idle(), 0u) << "an upstream with half a request was pooled";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "allow"},
                                  {"status", "null"},
                                  {"req_bytes", std::to_string(kFirstPart.size())}}));
}

class SessionHeldBodyEdgesTest : public SessionEdgesTest {
 protected:
  void SetUp() override {
    BedConfig config;
    config.with_secret = true;
    bed_.configure(config);
  }
};

// exchange HoldingBody -> Failed: secrets are configured, so the body's start is held and
// scanned before anything is resolved; the client resets meanwhile. Nothing was resolved or
// dialled; the request has its record.
TEST_F(SessionHeldBodyEdgesTest, ClientResetWhileTheBodyIsHeldFailsTheExchange) {
  EdgeWatch holding("exchange", "Deciding", "HoldingBody");
  EdgeWatch edge("exchange", "HoldingBody", "Failed");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("POST", origin(), "/held",
                               "Content-Length: " + std::to_string(kBodySize) + "\r\n") +
               std::string(kFirstPart));
  ASSERT_TRUE(bed_.runUntil([&] { return holding.seen(); }));
  client.reset();
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(edge.seen()) << edge.name();
  EXPECT_EQ(bed_.dns().queries(), 0);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "allow"}, {"status", "null"}, {"upstream", "null"}}));
}

}  // namespace
}  // namespace sluice::test_support
