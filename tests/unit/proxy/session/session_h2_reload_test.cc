// A reload under an open HTTP/2 connection (docs/cli.md#reloads, docs/wire.md#http2 "Endings"):
// each stream is judged by the configuration in force when it begins, so a stream opened after
// the reload, on the same connection and while an earlier one is still in flight, is judged by
// the new policy (and recorded in the new audit file), never refused for the reload; the stream
// in flight finishes under the one it began with, its record in its own file. A reload that
// gives the sandbox another CA leaves the connection nothing to take up: a new stream is refused
// unprocessed (REFUSED_STREAM) with GOAWAY, as one after a drain's GOAWAY would be.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_h2_fixture.h"

namespace sluice::test_support {
namespace {

class SessionH2ReloadTest : public SessionH2Test {};

TEST_F(SessionH2ReloadTest, StreamsAfterAReloadAreJudgedByItWhileTheStreamInFlightFinishes) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t held = client->request("GET", "/held");
  ASSERT_TRUE(awaitHeld());

  // The new policy allows only /held and /allowed of the TLS origin, and writes to another file.
  BedConfig reloaded;
  reloaded.tls_rule_keys = ", paths: [/held, /allowed]";
  reloaded.audit_file = "after-reload.jsonl";
  bed_.reload(reloaded);

  const std::int32_t allowed = client->request("GET", "/allowed");
  ASSERT_TRUE(client->awaitStream(allowed)) << client->describe();
  EXPECT_EQ(client->stream(allowed).status, 200) << client->describe();
  EXPECT_EQ(client->stream(allowed).body, "answer /allowed");
  const std::int32_t other = client->request("GET", "/other");
  ASSERT_TRUE(client->awaitStream(other)) << client->describe();
  EXPECT_EQ(client->stream(other).status, 403) << "judged by the policy before the reload";
  EXPECT_EQ(client->stream(other).header("sluice-reason"), "not_allowed_path");
  EXPECT_TRUE(bed_.tlsOrigin().requestsFor("/other").empty());

  held_->write(okResponse("finished"));
  ASSERT_TRUE(client->awaitStream(held)) << client->describe();
  EXPECT_EQ(client->stream(held).status, 200);
  EXPECT_EQ(client->stream(held).body, "finished");
  EXPECT_EQ(client->resets(), 0u) << "a stream was refused for the reload: " << client->describe();
  EXPECT_FALSE(client->goAway()) << "the reload sent the client away: " << client->describe();

  // The streams that began after the reload are in the new file; the one in flight across it,
  // in the file in force when it began.
  std::vector<AuditLine> after;
  bed_.runUntil([&] {
    after = readAuditLines(bed_.dir() + "/after-reload.jsonl");
    return after.size() >= 2;
  });
  ASSERT_EQ(after.size(), 2u);
  EXPECT_TRUE(isOneRecord(recordsWith(after, {{"url", url("/allowed")}}),
                          {{"decision", "allow"}, {"rule", "tls"}, {"status", "200"}}));
  EXPECT_TRUE(isOneRecord(recordsWith(after, {{"url", url("/other")}}),
                          {{"decision", "deny"}, {"reason", "not_allowed_path"}, {"status", "403"}}));
  const std::vector<AuditLine> before = awaitAudit(bed_, 1);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_TRUE(isOneRecord(before, {{"url", url("/held")},
                                   {"decision", "allow"},
                                   {"status", "200"},
                                   {"resp_bytes", "8"}}));
}

TEST_F(SessionH2ReloadTest, AReloadThatChangesTheCaRefusesNewStreamsUnprocessedWithGoAway) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t held = client->request("GET", "/held");
  ASSERT_TRUE(awaitHeld());

  BedConfig reloaded;
  reloaded.ca_dir = "another-ca";  // the client trusts the old CA: nothing to take up
  bed_.reload(reloaded);

  const std::int32_t late = client->request("GET", "/late");
  ASSERT_TRUE(client->awaitStream(late)) << client->describe();
  EXPECT_EQ(client->stream(late).reset, static_cast<std::uint32_t>(NGHTTP2_REFUSED_STREAM))
      << client->describe();
  ASSERT_TRUE(client->awaitGoAway()) << client->describe();
  EXPECT_EQ(client->goAway()->error_code, static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_TRUE(bed_.tlsOrigin().requestsFor("/late").empty()) << "a refused stream went upstream";

  held_->write(okResponse("finished"));
  ASSERT_TRUE(client->awaitStream(held)) << client->describe();
  EXPECT_EQ(client->stream(held).status, 200);
  ASSERT_TRUE(client->awaitEnd()) << "the connection outlived its last stream";
  client->peer().close();
  ASSERT_TRUE(bed_.allSessionsFinished());

  const std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 1u) << "the refused stream, unprocessed, has no record";
  EXPECT_TRUE(isOneRecord(lines, {{"url", url("/held")}, {"decision", "allow"}}));
}

}  // namespace
}  // namespace sluice::test_support
