// Http2ResponseBuilder: the HEADERS blocks an origin sends on one HTTP/2 stream in (their fields
// as nghttp2's client session hands them over), what each block was (1xx, the final head,
// trailers, or out of place) and the ResponseHead an HTTP/1.1 origin's parser would have given
// out: framing None for a HEAD's answer, 204 and 304; ContentLength for a content-length or a
// head that ends the stream (then 0); Chunked otherwise (docs/wire.md#http2-toward-origins).
#include "proxy/http/http2_response.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::proxy::http {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;
using Block = Http2ResponseBuilder::Block;

// One HEADERS block: its fields in, then its end. Every field must be taken (within the bound).
Block block(Http2ResponseBuilder& b, const Fields& fields, bool end_stream) {
  for (const auto& [name, value] : fields) {
    EXPECT_TRUE(b.add(name, value)) << name;
  }
  return b.finish(end_stream);
}

// The regular fields of a block, as HeaderBlock holds them, in order.
Fields fieldsOf(const HeaderBlock& headers) {
  Fields out;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    out.emplace_back(std::string(headers.name(i)), std::string(headers.value(i)));
  }
  return out;
}

// --- the final head: status, fields, framing

TEST(Http2Response, TheFinalHeadIsFramedAsAClientCodecNeedsIt) {
  struct Case {
    const char* name;
    bool head_request;
    Fields fields;
    bool end_stream;
    int status;
    ResponseFraming framing;
    bool has_content_length;
    std::uint64_t content_length;
  };
  const std::vector<Case> cases = {
      {"200 with content-length",
       false,
       {{":status", "200"}, {"content-length", "5"}, {"content-type", "text/plain"}},
       false,
       200,
       ResponseFraming::ContentLength,
       true,
       5},
      {"200 without content-length: the body ends with the stream",
       false,
       {{":status", "200"}, {"content-type", "text/plain"}},
       false,
       200,
       ResponseFraming::Chunked,
       false,
       0},
      {"HEAD's answer keeps its content-length, and has no body",
       true,
       {{":status", "200"}, {"content-length", "100"}},
       true,
       200,
       ResponseFraming::None,
       true,
       100},
      {"HEAD's answer without content-length",
       true,
       {{":status", "200"}, {"etag", "\"x\""}},
       true,
       200,
       ResponseFraming::None,
       false,
       0},
      {"HEAD's answer whose stream stays open",
       true,
       {{":status", "200"}, {"content-length", "7"}},
       false,
       200,
       ResponseFraming::None,
       true,
       7},
      {"204", false, {{":status", "204"}}, true, 204, ResponseFraming::None, false, 0},
      {"204 whose stream stays open",
       false,
       {{":status", "204"}, {"x-a", "1"}},
       false,
       204,
       ResponseFraming::None,
       false,
       0},
      {"304 keeps the content-length of what it validates",
       false,
       {{":status", "304"}, {"content-length", "42"}, {"etag", "\"v1\""}},
       true,
       304,
       ResponseFraming::None,
       true,
       42},
      {"a head that ends the stream: Content-Length 0",
       false,
       {{":status", "200"}, {"x-a", "1"}},
       true,
       200,
       ResponseFraming::ContentLength,
       true,
       0},
      {"gRPC's trailers-only answer is one head that ends the stream",
       false,
       {{":status", "200"},
        {"content-type", "application/grpc"},
        {"grpc-status", "5"},
        {"grpc-message", "not found"}},
       true,
       200,
       ResponseFraming::ContentLength,
       true,
       0},
      {"content-length 0 that ends the stream",
       false,
       {{":status", "200"}, {"content-length", "0"}},
       true,
       200,
       ResponseFraming::ContentLength,
       true,
       0},
      {"a 404 with a body of known length",
       false,
       {{":status", "404"}, {"content-length", "9"}},
       false,
       404,
       ResponseFraming::ContentLength,
       true,
       9},
      {"999, the highest status",
       false,
       {{":status", "999"}},
       false,
       999,
       ResponseFraming::Chunked,
       false,
       0},
  };
  Http2ResponseBuilder b;
  for (const Case& c : cases) {
    b.reset(c.head_request);
    ASSERT_EQ(block(b, c.fields, c.end_stream), Block::Final) << c.name;
    const ResponseHead& h = b.head();
    EXPECT_EQ(h.status, c.status) << c.name;
    EXPECT_EQ(h.framing, c.framing) << c.name;
    EXPECT_EQ(h.has_content_length, c.has_content_length) << c.name;
    EXPECT_EQ(h.content_length, c.content_length) << c.name;
    EXPECT_EQ(h.http_major, 2) << c.name;
    EXPECT_EQ(h.http_minor, 0) << c.name;
    EXPECT_TRUE(h.reason.empty()) << c.name;
    // The regular fields, in order; the pseudo-header is no field.
    const Fields expected(c.fields.begin() + 1, c.fields.end());
    EXPECT_EQ(fieldsOf(h.headers), expected) << c.name;
    EXPECT_FALSE(h.headers.find(":status")) << c.name;
    EXPECT_EQ(b.trailers(), nullptr) << c.name;  // none yet
  }
}

// --- 1xx heads

TEST(Http2Response, InterimHeadsComeFirstAndLeaveNothingInTheFinalOne) {
  Http2ResponseBuilder b;
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "100"}}, false), Block::Interim);
  EXPECT_EQ(b.head().status, 100);
  EXPECT_TRUE(b.head().headers.empty());
  ASSERT_EQ(block(b, {{":status", "103"}, {"link", "</style.css>; rel=preload"}}, false),
            Block::Interim);
  EXPECT_EQ(b.head().status, 103);  // head() is the 1xx's until the next block begins
  EXPECT_EQ(fieldsOf(b.head().headers), (Fields{{"link", "</style.css>; rel=preload"}}));
  EXPECT_EQ(b.trailers(), nullptr);

  ASSERT_EQ(block(b, {{":status", "200"}, {"content-length", "3"}, {"x-final", "1"}}, false),
            Block::Final);
  const ResponseHead& h = b.head();
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(fieldsOf(h.headers), (Fields{{"content-length", "3"}, {"x-final", "1"}}));
  EXPECT_FALSE(h.headers.find("link"));  // the 103's field is not the answer's
  EXPECT_EQ(h.framing, ResponseFraming::ContentLength);
  EXPECT_EQ(h.content_length, 3u);
}

TEST(Http2Response, AnInterimHeadsContentLengthIsNotTheFinalHeads) {
  Http2ResponseBuilder b;
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "103"}, {"content-length", "10"}}, false), Block::Interim);
  ASSERT_EQ(block(b, {{":status", "200"}}, false), Block::Final);
  EXPECT_EQ(b.head().framing, ResponseFraming::Chunked);
  EXPECT_FALSE(b.head().has_content_length);
  EXPECT_TRUE(b.head().headers.empty());
}

// --- trailers

TEST(Http2Response, TrailersAfterTheBodyAreTrailersOnceTheirBlockEnds) {
  Http2ResponseBuilder b;
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "200"}, {"content-type", "application/grpc"}}, false),
            Block::Final);
  EXPECT_EQ(b.head().framing, ResponseFraming::Chunked);
  EXPECT_EQ(b.trailers(), nullptr);
  // (DATA here.) The trailers' fields arrive; until their block ends there are none.
  ASSERT_TRUE(b.add("grpc-status", "0"));
  ASSERT_TRUE(b.add("grpc-message", "ok"));
  EXPECT_EQ(b.trailers(), nullptr);
  ASSERT_EQ(b.finish(true), Block::Trailers);
  ASSERT_NE(b.trailers(), nullptr);
  EXPECT_EQ(fieldsOf(*b.trailers()), (Fields{{"grpc-status", "0"}, {"grpc-message", "ok"}}));
  // The head is as it was: the trailers are not its fields.
  EXPECT_EQ(b.head().status, 200);
  EXPECT_EQ(fieldsOf(b.head().headers), (Fields{{"content-type", "application/grpc"}}));
  EXPECT_FALSE(b.head().headers.find("grpc-status"));
}

TEST(Http2Response, AnEmptyBlockThatEndsTheStreamIsEmptyTrailers) {
  Http2ResponseBuilder b;
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "200"}, {"content-length", "4"}}, false), Block::Final);
  ASSERT_EQ(b.finish(true), Block::Trailers);
  ASSERT_NE(b.trailers(), nullptr);
  EXPECT_TRUE(b.trailers()->empty());
  EXPECT_EQ(b.head().content_length, 4u);
}

// --- blocks out of place: the stream fails

TEST(Http2Response, BlocksOutOfPlaceAreInvalid) {
  struct Case {
    const char* name;
    bool head_request;
    std::vector<std::pair<Fields, bool>> before;  // blocks that precede, each with its end
    Fields fields;
    bool end_stream;
  };
  const Fields k200 = {{":status", "200"}};
  const Fields kTrailers = {{"x-checksum", "abc"}};
  const std::vector<Case> cases = {
      {"a head without :status", false, {}, {{"content-type", "text/plain"}}, false},
      {"an empty first block", false, {}, {}, true},
      {"a status below 100", false, {}, {{":status", "099"}}, false},
      {"a status that is no number", false, {}, {{":status", "2x0"}}, false},
      {"a status over 999", false, {}, {{":status", "1000"}}, false},
      {"a 1xx that ends the stream", false, {}, {{":status", "100"}}, true},
      {"a 103 that ends the stream", false, {}, {{":status", "103"}, {"link", "</a>"}}, true},
      {"a 1xx that ends the stream after another 1xx",
       false,
       {{{{":status", "100"}}, false}},
       {{":status", "103"}},
       true},
      {"a final head without :status after a 1xx",
       false,
       {{{{":status", "100"}}, false}},
       {{"x-a", "1"}},
       false},
      {"trailers that do not end the stream", false, {{k200, false}}, kTrailers, false},
      {"a block after the trailers", false, {{k200, false}, {kTrailers, true}}, kTrailers, true},
      {"an empty block after the trailers", false, {{k200, false}, {kTrailers, true}}, {}, true},
      {"a second head after the trailers",
       false,
       {{k200, false}, {kTrailers, true}},
       {{":status", "200"}},
       true},
      {"a block after an empty trailers block",
       false,
       {{k200, false}, {{}, true}},
       kTrailers,
       true},
  };
  Http2ResponseBuilder b;
  for (const Case& c : cases) {
    b.reset(c.head_request);
    for (const auto& [fields, end_stream] : c.before) {
      ASSERT_NE(block(b, fields, end_stream), Block::Invalid) << c.name;
    }
    EXPECT_EQ(block(b, c.fields, c.end_stream), Block::Invalid) << c.name;
  }
}

TEST(Http2Response, ABlockAfterTheTrailersChangesNeitherTrailersNorHead) {
  Http2ResponseBuilder b;
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "200"}, {"x-head", "h"}}, false), Block::Final);
  ASSERT_EQ(block(b, {{"x-trailer", "t"}}, true), Block::Trailers);
  EXPECT_EQ(block(b, {{"x-late", "l"}}, true), Block::Invalid);
  ASSERT_NE(b.trailers(), nullptr);
  EXPECT_EQ(fieldsOf(*b.trailers()), (Fields{{"x-trailer", "t"}}));
  EXPECT_EQ(fieldsOf(b.head().headers), (Fields{{"x-head", "h"}}));
  EXPECT_EQ(b.head().status, 200);
}

// --- the bound: RFC 9113 §6.5.2's measure, names, values and 32 bytes a field

TEST(Http2Response, ABlockOverTheBoundIsRefusedByAdd) {
  Http2ResponseBuilder b;
  b.setMaxListBytes(100);
  // :status 200 is 7 + 3 + 32 = 42; x-a and its value are 3 + 32 = 35 more: 77 + the value.
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "200"));
  EXPECT_TRUE(b.add("x-a", std::string(23, 'a')));  // 100: at the bound
  EXPECT_EQ(b.finish(false), Block::Final);
  // Each block has the whole bound: the trailers too.
  EXPECT_TRUE(b.add("x-t", std::string(65, 't')));  // 100
  EXPECT_FALSE(b.add("x-u", ""));                   // 135
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "200"));
  EXPECT_FALSE(b.add("x-a", std::string(24, 'a')));  // 101
  // A field alone over the bound, in the first block and in a 1xx.
  b.reset(false);
  EXPECT_FALSE(b.add("x-big", std::string(1000, 'b')));
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "103"));
  ASSERT_EQ(b.finish(false), Block::Interim);
  ASSERT_TRUE(b.add(":status", "200"));  // the 1xx's bytes do not count against the final head
  EXPECT_TRUE(b.add("x-a", std::string(23, 'a')));
  EXPECT_FALSE(b.add("x-b", ""));
}

TEST(Http2Response, AnHpackBombStopsAtTheBoundAndIsNotKept) {
  Http2ResponseBuilder b;
  b.setMaxListBytes(16 * 1024);
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "200"));
  std::size_t taken = 0;
  for (int i = 0; i < 1000; ++i) {
    if (!b.add("x-bomb", std::string(4000, 'b'))) {
      break;
    }
    ++taken;
  }
  EXPECT_EQ(taken, 4u);  // 42 + 4 * 4038 = 16194; a fifth is over 16384
  EXPECT_LE(b.head().headers.size(), 4u);
}

// --- reuse

TEST(Http2Response, ResetForgetsThePreviousResponse) {
  Http2ResponseBuilder b;
  b.setMaxListBytes(200);
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "103"}, {"link", "</a>"}}, false), Block::Interim);
  ASSERT_EQ(block(b, {{":status", "200"}, {"content-length", "7"}, {"x-one", "1"}}, false),
            Block::Final);
  ASSERT_EQ(block(b, {{"x-trailer", "1"}}, true), Block::Trailers);
  ASSERT_NE(b.trailers(), nullptr);

  // A HEAD on the same builder: nothing of the GET's answer is left.
  b.reset(true);
  EXPECT_EQ(b.trailers(), nullptr);
  EXPECT_EQ(b.head().status, 0);
  EXPECT_TRUE(b.head().headers.empty());
  EXPECT_FALSE(b.head().has_content_length);
  EXPECT_EQ(b.head().content_length, 0u);
  EXPECT_EQ(b.head().framing, ResponseFraming::None);
  ASSERT_EQ(block(b, {{":status", "200"}, {"x-two", "2"}}, true), Block::Final);
  EXPECT_EQ(b.head().framing, ResponseFraming::None);  // HEAD's answer
  EXPECT_FALSE(b.head().has_content_length);
  EXPECT_EQ(b.head().content_length, 0u);
  EXPECT_EQ(fieldsOf(b.head().headers), (Fields{{"x-two", "2"}}));
  EXPECT_EQ(b.trailers(), nullptr);

  // A GET again: no longer a HEAD's answer; trailers start empty.
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "200"}}, false), Block::Final);
  EXPECT_EQ(b.head().framing, ResponseFraming::Chunked);
  EXPECT_TRUE(b.head().headers.empty());
  ASSERT_EQ(block(b, {{"x-three", "3"}}, true), Block::Trailers);
  EXPECT_EQ(fieldsOf(*b.trailers()), (Fields{{"x-three", "3"}}));
}

TEST(Http2Response, ResetInsideABlockForgetsItsBytesAndFields) {
  Http2ResponseBuilder b;
  b.setMaxListBytes(100);
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "200"));
  ASSERT_TRUE(b.add("x-a", std::string(23, 'a')));  // 100, no finish: the stream was reset
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "200"));
  EXPECT_TRUE(b.add("x-b", std::string(23, 'b')));  // 100 again: the count began afresh
  ASSERT_EQ(b.finish(false), Block::Final);
  EXPECT_EQ(fieldsOf(b.head().headers), (Fields{{"x-b", std::string(23, 'b')}}));

  // Over the bound, then reset: the next response is taken whole.
  b.reset(false);
  ASSERT_TRUE(b.add(":status", "200"));
  ASSERT_FALSE(b.add("x-c", std::string(500, 'c')));
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "204"}}, true), Block::Final);
  EXPECT_TRUE(b.head().headers.empty());
  EXPECT_EQ(b.head().status, 204);

  // Reset after the final head, inside a trailers block: the next response's head is a head.
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "200"}}, false), Block::Final);
  ASSERT_TRUE(b.add("x-trailer", "t"));
  b.reset(false);
  ASSERT_EQ(block(b, {{":status", "201"}, {"x-d", "d"}}, false), Block::Final);
  EXPECT_EQ(b.head().status, 201);
  EXPECT_EQ(fieldsOf(b.head().headers), (Fields{{"x-d", "d"}}));
  EXPECT_EQ(b.trailers(), nullptr);
}

}  // namespace
}  // namespace sluice::proxy::http
