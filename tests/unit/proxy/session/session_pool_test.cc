// A reused upstream connection (parked by the client's session, or idle in the worker's pool)
// that the origin closes, on a real loop. Closed while idle: replaced, never used. Closed after
// reading a request it did not answer: a request that is safe to repeat (GET, HEAD, OPTIONS,
// TRACE) without a body is sent again once, on a connection dialled for it; any other gets
// 502 upstream_connect and has reached the origin once (docs: "Sending a request again").
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

class SessionPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { bed_.configure(); }

  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }

  // Like the hang-up origin of the integration tests: each connection's first request is
  // answered, and the origin hangs up on the next after reading it.
  void hangUpOnSecondRequests() {
    bed_.origin().on_request = [](LoopPeer& connection, const OriginServer::Request& request) {
      if (request.on_connection == 1) {
        connection.write(okResponse("first"));
      } else {
        connection.close();
      }
    };
  }

  // GET /prime on a new client, answered: the client's session keeps that upstream parked.
  LoopPeer& primedClient() {
    LoopPeer& client = bed_.connectClient();
    client.write(absoluteRequest("GET", origin(), "/prime"));
    std::optional<HttpMessage> response = awaitResponse(bed_, client);
    EXPECT_TRUE(response && response->status == 200) << client.received();
    return client;
  }

  SessionBed bed_;
};

struct Repeatable {
  const char* method;
  bool bodiless_answer;
};

void PrintTo(const Repeatable& row, std::ostream* out) { *out << row.method; }

class SessionSafeRetryTest : public SessionPoolTest,
                             public ::testing::WithParamInterface<Repeatable> {};

TEST_P(SessionSafeRetryTest, ParkedConnectionDeadOnReuseSendsItAgainOnADialledConnection) {
  hangUpOnSecondRequests();
  LoopPeer& client = primedClient();
  client.write(absoluteRequest(GetParam().method, origin(), "/again"));
  std::optional<HttpMessage> response =
      awaitResponse(bed_, client, GetParam().bodiless_answer);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);

  std::vector<OriginServer::Request> seen = bed_.origin().requestsFor("/again");
  ASSERT_EQ(seen.size(), 2u) << "sent once on the reused connection, once more on a new one";
  EXPECT_EQ(seen[0].connection, 0u);
  EXPECT_EQ(seen[0].on_connection, 2u);
  EXPECT_EQ(seen[1].connection, 1u);
  EXPECT_EQ(seen[1].on_connection, 1u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["method"], GetParam().method);
  EXPECT_EQ(lines[1]["decision"], "allow");
  EXPECT_EQ(lines[1]["status"], "200");
}

INSTANTIATE_TEST_SUITE_P(Methods, SessionSafeRetryTest,
                         ::testing::Values(Repeatable{"GET", false}, Repeatable{"HEAD", true},
                                           Repeatable{"OPTIONS", false}),
                         [](const ::testing::TestParamInfo<Repeatable>& row) {
                           return std::string(row.param.method);
                         });

TEST_F(SessionPoolTest, ARequestIsSentAgainOnlyOnce) {
  // The first request is answered; the origin hangs up on every other after reading it.
  bed_.origin().on_request = [this](LoopPeer& connection, const OriginServer::Request&) {
    if (bed_.origin().requests().size() == 1) {
      connection.write(okResponse("first"));
    } else {
      connection.close();
    }
  };
  LoopPeer& client = primedClient();
  client.write(absoluteRequest("GET", origin(), "/twice"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_connect");
  EXPECT_EQ(bed_.origin().requestsFor("/twice").size(), 2u);
  EXPECT_EQ(bed_.origin().accepted(), 2u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["decision"], "deny");
  EXPECT_EQ(lines[1]["reason"], "upstream_connect");
  EXPECT_EQ(lines[1]["status"], "502");
}

struct NotRepeatable {
  const char* edge;
  const char* method;
  const char* fields;
};

void PrintTo(const NotRepeatable& row, std::ostream* out) { *out << row.edge; }

class SessionNoRetryTest : public SessionPoolTest,
                           public ::testing::WithParamInterface<NotRepeatable> {};

TEST_P(SessionNoRetryTest, ParkedConnectionDeadOnReuseIs502AndTheRequestReachedTheOriginOnce) {
  hangUpOnSecondRequests();
  LoopPeer& client = primedClient();
  client.write(absoluteRequest(GetParam().method, origin(), "/once", GetParam().fields));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_connect");
  EXPECT_NE(response->body.find(std::string("a ") + GetParam().method + " is not sent again"),
            std::string::npos)
      << response->body;
  EXPECT_EQ(bed_.origin().requestsFor("/once").size(), 1u);
  EXPECT_EQ(bed_.origin().accepted(), 1u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["method"], GetParam().method);
  EXPECT_EQ(lines[1]["decision"], "deny");
  EXPECT_EQ(lines[1]["reason"], "upstream_connect");
  EXPECT_EQ(lines[1]["status"], "502");
}

INSTANTIATE_TEST_SUITE_P(
    Methods, SessionNoRetryTest,
    ::testing::Values(NotRepeatable{"Delete", "DELETE", ""},
                      NotRepeatable{"PostWithoutBody", "POST", ""},
                      NotRepeatable{"PostEmptyBody", "POST", "Content-Length: 0\r\n"},
                      NotRepeatable{"PutEmptyBody", "PUT", "Content-Length: 0\r\n"},
                      NotRepeatable{"Patch", "PATCH", ""}),
    [](const ::testing::TestParamInfo<NotRepeatable>& row) { return row.param.edge; });

TEST_F(SessionPoolTest, AGetWithABodyIsNotSentAgain) {
  hangUpOnSecondRequests();
  LoopPeer& client = primedClient();
  client.write(absoluteRequest("GET", origin(), "/body", "Content-Length: 3\r\n") + "abc");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_connect");
  EXPECT_EQ(bed_.origin().requestsFor("/body").size(), 1u);
}

TEST_F(SessionPoolTest, ParkedConnectionClosedWhileIdleIsReplacedNotUsed) {
  bed_.origin().on_request = answerEach("ok");
  LoopPeer& client = primedClient();
  // The origin half-closes the idle connection: sluice's parked upstream sees the FIN and
  // closes its side, which the origin sees.
  bed_.origin().connection(0).shutdownWrite();
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));
  // A DELETE, which would not be sent again: it goes on a new connection, answered.
  client.write(absoluteRequest("DELETE", origin(), "/after"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  ASSERT_EQ(bed_.origin().requestsFor("/after").size(), 1u);
  EXPECT_EQ(bed_.origin().requestsFor("/after")[0].connection, 1u);
}

TEST_F(SessionPoolTest, ParkedConnectionSendingOutOfTurnIsRetired) {
  bed_.origin().on_request = answerEach("ok");
  LoopPeer& client = primedClient();
  bed_.origin().connection(0).write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(awaitEnd(bed_, bed_.origin().connection(0)));
  client.write(absoluteRequest("GET", origin(), "/after"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "ok") << "the stray answer was taken for this one";
  EXPECT_EQ(bed_.origin().requestsFor("/after").at(0).connection, 1u);
}

// Two clients' upstreams end up idle in the pool; the origin hangs up on both when reused. A
// GET taken to one of them is sent again on a connection dialled for it, not on the other.
TEST_F(SessionPoolTest, TheRetryDialsANewConnectionNotAnotherPooledOne) {
  hangUpOnSecondRequests();
  LoopPeer& first = primedClient();
  LoopPeer& second = primedClient();  // the first holds its upstream: a second one is dialled
  ASSERT_EQ(bed_.origin().accepted(), 2u);
  first.close();
  second.close();
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_EQ(bed_.pool().idle(), 2u);

  LoopPeer& third = bed_.connectClient();
  third.write(absoluteRequest("GET", origin(), "/again"));
  std::optional<HttpMessage> response = awaitResponse(bed_, third);
  ASSERT_TRUE(response) << third.received();
  EXPECT_EQ(response->status, 200);
  std::vector<OriginServer::Request> seen = bed_.origin().requestsFor("/again");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].on_connection, 2u) << "first on a pooled connection";
  EXPECT_EQ(seen[1].connection, 2u) << "then on a new one";
  EXPECT_EQ(bed_.pool().idle(), 1u) << "the other pooled connection is left alone";
}

}  // namespace
}  // namespace sluice::test_support
