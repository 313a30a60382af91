// The moves of the HTTP/2 machines (proxy/session/http2/http2_state.h) that the other in-process
// tests do not take, each taken here by what makes it, on a real loop: a body that ends on its
// last DATA, a body cut short by its stream's answer, a response head without a body, and a
// client that says GOAWAY with no stream open. Each test watches its edge (EdgeWatch) and
// checks what the client and the origin saw with it.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/transition_log.h"
#include "tests/unit/proxy/session/session_h2_fixture.h"

namespace sluice::test_support {
namespace {

TEST_F(SessionH2Test, ABodyEndsOnItsLastDataAndReachesTheOriginWhole) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  EdgeWatch ended("h2 request", "Receiving", "Ended");
  EdgeWatch delivered("h2 request", "Ended", "Delivered");
  const std::int32_t id =
      client->request("POST", "/upload", {{"content-length", "10"}}, /*end_stream=*/false);
  client->data(id, "hello", false);
  ASSERT_TRUE(bed_.runUntil([&] { return originReceived().ends_with("hello"); }))
      << originReceived();
  client->data(id, "world", true);
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EXPECT_EQ(client->stream(id).status, 200);
  EXPECT_TRUE(ended.seen()) << ended.name();
  EXPECT_TRUE(delivered.seen()) << delivered.name();
  ASSERT_EQ(bed_.tlsOrigin().requests().size(), 1u);
  EXPECT_EQ(bed_.tlsOrigin().requests()[0].message.body, "helloworld");
}

// A stream refused on its head (another :authority than the tunnel's) while its body is still
// coming: the answer ends the stream's exchange, and the rest of its body is read and dropped
// (RFC 9113 §8.1), never forwarded.
TEST_F(SessionH2Test, ABodyCutShortByItsStreamsAnswerIsDroppedAndGoesNowhere) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  EdgeWatch discarding("h2 request", "Receiving", "Discarding");
  const std::int32_t id = client->takeStreamId();
  client->headers(id,
                  {{":method", "POST"},
                   {":scheme", "https"},
                   {":authority", "elsewhere.test"},
                   {":path", "/denied"},
                   {"content-length", "10"}},
                  false);
  client->data(id, "hello", false);
  ASSERT_TRUE(bed_.runUntil([&] { return client->stream(id).status != 0; }))
      << client->describe();
  EXPECT_EQ(client->stream(id).status, 403);
  EXPECT_EQ(client->stream(id).header("sluice-reason"), "host_mismatch");
  EXPECT_TRUE(discarding.seen()) << discarding.name();
  client->data(id, "world", true);  // (the rest, after the answer)
  const std::int32_t next = client->request("GET", "/after");
  ASSERT_TRUE(client->awaitStream(next)) << client->describe();
  EXPECT_EQ(client->stream(next).status, 200);
  EXPECT_EQ(originReceived().find("hello"), std::string::npos) << originReceived();
  EXPECT_EQ(originReceived().find("world"), std::string::npos) << originReceived();
  EXPECT_FALSE(client->goAway());
}

// HEAD: the origin's head says a length and sends no body; the stream's response is its head
// alone (END_STREAM on HEADERS), complete at once.
TEST_F(SessionH2Test, AHeadWithoutABodyCompletesTheResponseAtOnce) {
  configure();
  bed_.tlsOrigin().on_request = [](LoopPeer& connection, const OriginServer::Request&) {
    connection.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
  };
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  EdgeWatch complete("h2 response", "NotBegun", "Complete");
  const std::int32_t id = client->request("HEAD", "/head");
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EXPECT_EQ(client->stream(id).status, 200);
  EXPECT_TRUE(client->stream(id).ended);
  EXPECT_TRUE(client->stream(id).body.empty());
  EXPECT_EQ(client->stream(id).header("content-length"), "5");
  EXPECT_TRUE(complete.seen()) << complete.name();
}

// The client says GOAWAY with no stream open: nghttp2 has nothing more to read or write, the
// session is over at once (no GOAWAY of sluice's first) and the connection finishes.
TEST_F(SessionH2Test, AClientsGoAwayWithNoStreamOpenEndsTheSessionAtOnce) {
  configure();
  Http2Client* client = openClient();
  ASSERT_NE(client, nullptr);
  const std::int32_t id = client->request("GET", "/one");
  ASSERT_TRUE(client->awaitStream(id)) << client->describe();
  EdgeWatch done("h2 connection", "Open", "Done");
  EdgeWatch going_away("h2 connection", "Open", "GoingAway");
  // GOAWAY (type 7) on stream 0: last stream id 0, NO_ERROR.
  client->write(std::string("\x00\x00\x08\x07\x00\x00\x00\x00\x00", 9) +
                std::string(8, '\0'));
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_TRUE(done.seen()) << done.name();
  EXPECT_FALSE(going_away.seen()) << going_away.name();
  EXPECT_TRUE(client->ended());
}

}  // namespace
}  // namespace sluice::test_support
