// With secrets configured, the session holds the start of a request body (up to 64 KiB) and
// looks for placeholders in it before anything is resolved or dialled (docs: credential
// brokering). On a real loop: a placeholder in a body or a header the rule does not inject is
// refused first; a clean body goes out whole; 100-continue comes from sluice; a client that
// half-closes while its body is held gets 400.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

class SessionHeldBodyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BedConfig config;
    config.with_secret = true;
    bed_.configure(config);
  }

  std::string origin() { return "origin.test:" + std::to_string(bed_.origin().port()); }

  static std::string post(std::string_view authority, std::string_view body,
                          std::string_view extra_fields = "") {
    return absoluteRequest("POST", authority, "/post",
                           "Content-Length: " + std::to_string(body.size()) + "\r\n" +
                               std::string(extra_fields)) +
           std::string(body);
  }

  SessionBed bed_;
};

TEST_F(SessionHeldBodyTest, BodyCarryingAPlaceholderNoRuleInjectsIsRefusedBeforeAnyLookup) {
  bed_.origin().on_request = answerEach("never");
  LoopPeer& client = bed_.connectClient();
  client.write(post(origin(), "key=" + std::string(kSecretPlaceholder)));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 403);
  EXPECT_EQ(response->header("sluice-reason"), "secret_misuse");
  EXPECT_EQ(bed_.dns().queries(), 0);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(
      isOneRecord(lines, {{"decision", "deny"}, {"reason", "secret_misuse"}, {"status", "403"}}));
}

TEST_F(SessionHeldBodyTest, HeaderCarryingAPlaceholderIsRefusedBeforeAnyLookup) {
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("GET", origin(), "/",
                               "Authorization: Bearer " + std::string(kSecretPlaceholder) +
                                   "\r\n"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 403);
  EXPECT_EQ(response->header("sluice-reason"), "secret_misuse");
  EXPECT_EQ(bed_.dns().queries(), 0);
}

TEST_F(SessionHeldBodyTest, NothingIsResolvedUntilTheHeldBodyIsCompleteThenItGoesOutWhole) {
  bed_.origin().on_request = answerEach("stored");
  LoopPeer& client = bed_.connectClient();
  const std::string request = post(origin(), "hello world");
  client.write(request.substr(0, request.size() - 5));  // all but "world"
  bed_.runFor(100ms);
  EXPECT_EQ(bed_.dns().queries(), 0) << "resolved before the body was scanned";
  client.write("world");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  ASSERT_EQ(bed_.origin().requests().size(), 1u);
  EXPECT_EQ(bed_.origin().requests()[0].message.body, "hello world");
}

// A body longer than what is held: its first 64 KiB are scanned, and all of it is forwarded.
TEST_F(SessionHeldBodyTest, BodyLongerThanTheScanIsForwardedWhole) {
  bed_.origin().on_request = answerEach("stored");
  LoopPeer& client = bed_.connectClient();
  std::string body(100 * 1024, 'b');
  client.write(post(origin(), body));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  ASSERT_EQ(bed_.origin().requests().size(), 1u);
  EXPECT_EQ(bed_.origin().requests()[0].message.body, body);
  EXPECT_EQ(bed_.auditLines().at(0)["req_bytes"], std::to_string(body.size()));
}

TEST_F(SessionHeldBodyTest, ExpectContinueIsAnsweredBySluiceWhileTheBodyIsHeld) {
  bed_.origin().on_request = answerEach("stored");
  LoopPeer& client = bed_.connectClient();
  client.write(absoluteRequest("POST", origin(), "/post",
                               "Content-Length: 5\r\nExpect: 100-continue\r\n"));
  std::optional<HttpMessage> interim = awaitResponse(bed_, client);
  ASSERT_TRUE(interim) << client.received();
  EXPECT_EQ(interim->status, 100);
  EXPECT_EQ(bed_.dns().queries(), 0) << "the 100 came from sluice, before any lookup";
  client.write("hello");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(bed_.origin().requests().at(0).message.body, "hello");
}

TEST_F(SessionHeldBodyTest, ClientHalfClosesWhileTheBodyIsHeldIs400AndNothingIsDialled) {
  LoopPeer& client = bed_.connectClient();
  const std::string request = post(origin(), "hello world");
  client.write(request.substr(0, request.size() - 5));
  client.shutdownWrite();
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 400);
  EXPECT_EQ(response->header("sluice-reason"), "bad_request");
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(bed_.dns().queries(), 0);
  EXPECT_EQ(bed_.origin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"reason", "bad_request"}, {"req_bytes", "6"}}));
}

}  // namespace
}  // namespace sluice::test_support
