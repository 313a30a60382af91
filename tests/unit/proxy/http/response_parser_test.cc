// ResponseParser: framing of upstream answers (Content-Length, chunked, until close, none for
// HEAD/204/304/1xx), interim responses, refusals, and end of stream. Rows run whole, in 5-byte
// pieces and byte by byte.

#include "proxy/http/response_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::http {
namespace {

using namespace std::literals;

constexpr std::size_t kMaxHead = 8192;

template <class Row>
std::string rowName(const ::testing::TestParamInfo<Row>& row) {
  return row.param.name;
}

struct Collector : ResponseBodySink {
  std::string body;
  void onResponseBody(std::span<const char> data) override {
    body.append(data.data(), data.size());
  }
};

struct Seen {
  int status = 0;
  std::string reason;
  ResponseFraming framing = ResponseFraming::None;
  bool has_content_length = false;
  std::uint64_t content_length = 0;
  bool keep_alive = false;
  std::string body;
};

struct Outcome {
  std::string events;  // I H M E, and F for a MessageComplete that finish() returned
  std::vector<Seen> heads;
  ParseError error = ParseError::None;
  std::string detail;
};

// One request method per expected response, in order; `at_eof` calls finish() after the input.
Outcome parse(std::string_view input, std::size_t step, std::vector<std::string> methods,
              bool at_eof = false) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  Outcome out;
  std::size_t next_method = 0;
  auto expectNext = [&] {
    parser.expect(next_method < methods.size() ? methods[next_method] : "GET");
    ++next_method;
  };
  auto record = [&](EventKind kind, char finish_letter) {
    switch (kind) {
      case EventKind::InterimHead:
      case EventKind::HeadComplete: {
        const ResponseHead& h = parser.head();
        out.events += kind == EventKind::InterimHead ? 'I' : 'H';
        out.heads.push_back({h.status, std::string(h.reason), h.framing, h.has_content_length,
                             h.content_length, h.keep_alive, ""});
        sink.body.clear();
        return true;
      }
      case EventKind::MessageComplete:
        out.events += finish_letter;
        out.heads.back().body = sink.body;
        expectNext();
        return true;
      default:
        return false;
    }
  };
  expectNext();
  std::size_t offset = 0;
  bool stopped = false;
  while (!stopped) {
    const std::size_t n = step == 0 ? input.size() - offset : std::min(step, input.size() - offset);
    std::string_view piece = input.substr(offset, n);
    offset += n;
    while (true) {
      const ParseEvent e = parser.feed(piece, sink);
      piece.remove_prefix(e.consumed);
      if (e.kind == EventKind::NeedMore) {
        EXPECT_TRUE(piece.empty());
        break;
      }
      if (e.kind == EventKind::Error) {
        out.events += 'E';
        out.error = e.error;
        out.detail = e.detail;
        return out;
      }
      record(e.kind, 'M');
    }
    stopped = offset >= input.size();
  }
  if (at_eof) {
    const ParseEvent e = parser.finish();
    if (e.kind == EventKind::Error) {
      out.events += 'E';
      out.error = e.error;
      out.detail = e.detail;
    } else {
      record(e.kind, 'F');
    }
  }
  return out;
}

Outcome parseEveryWay(std::string_view input, std::vector<std::string> methods,
                      bool at_eof = false) {
  Outcome whole = parse(input, 0, methods, at_eof);
  for (std::size_t step : {std::size_t{1}, std::size_t{5}}) {
    Outcome split = parse(input, step, methods, at_eof);
    EXPECT_EQ(split.events, whole.events) << "step " << step << ": " << split.detail;
    EXPECT_EQ(split.error, whole.error);
    EXPECT_EQ(split.heads.size(), whole.heads.size());
    for (std::size_t i = 0; i < std::min(split.heads.size(), whole.heads.size()); ++i) {
      EXPECT_EQ(split.heads[i].status, whole.heads[i].status);
      EXPECT_EQ(split.heads[i].body, whole.heads[i].body);
    }
  }
  return whole;
}

TEST(ResponseParser, ContentLength) {
  Outcome o = parseEveryWay("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello", {"GET"});
  ASSERT_EQ(o.events, "HM");
  EXPECT_EQ(o.heads[0].status, 200);
  EXPECT_EQ(o.heads[0].reason, "OK");
  EXPECT_EQ(o.heads[0].framing, ResponseFraming::ContentLength);
  EXPECT_EQ(o.heads[0].content_length, 5u);
  EXPECT_TRUE(o.heads[0].keep_alive);
  EXPECT_EQ(o.heads[0].body, "hello");
}

TEST(ResponseParser, HeadCompleteComesBeforeAnyBodyByte) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("GET");
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
  const std::string input = head + "abc";
  ParseEvent e = parser.feed(input, sink);
  ASSERT_EQ(e.kind, EventKind::HeadComplete);
  EXPECT_EQ(e.consumed, head.size());
  EXPECT_EQ(sink.body, "");
  e = parser.feed(std::string_view(input).substr(head.size()), sink);
  EXPECT_EQ(e.kind, EventKind::MessageComplete);
  EXPECT_EQ(sink.body, "abc");
}

TEST(ResponseParser, ChunkedIsDechunked) {
  Outcome o = parseEveryWay(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n",
      {"GET"});
  ASSERT_EQ(o.events, "HM");
  EXPECT_EQ(o.heads[0].framing, ResponseFraming::Chunked);
  EXPECT_EQ(o.heads[0].body, "Wikipedia in \r\n\r\nchunks.");
}

TEST(ResponseParser, UntilCloseCompletesAtFinish) {
  Outcome o =
      parseEveryWay("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it", {"GET"}, true);
  ASSERT_EQ(o.events, "HF");
  EXPECT_EQ(o.heads[0].framing, ResponseFraming::UntilClose);
  EXPECT_FALSE(o.heads[0].keep_alive);
  EXPECT_EQ(o.heads[0].body, "all of it");
}

TEST(ResponseParser, UntilCloseWithNoBodyByteCompletesAtFinish) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("GET");
  ASSERT_EQ(parser.feed("HTTP/1.0 200 OK\r\n\r\n"sv, sink).kind, EventKind::HeadComplete);
  EXPECT_EQ(parser.head().framing, ResponseFraming::UntilClose);
  EXPECT_EQ(parser.finish().kind, EventKind::MessageComplete);
}

TEST(ResponseParser, HeadAnswerHasNoBodyWhateverItsContentLength) {
  const std::string input =
      "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"
      "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno";
  Outcome o = parseEveryWay(input, {"HEAD", "GET"});
  ASSERT_EQ(o.events, "HMHM") << o.detail;
  EXPECT_EQ(o.heads[0].framing, ResponseFraming::None);
  EXPECT_TRUE(o.heads[0].has_content_length);
  EXPECT_EQ(o.heads[0].content_length, 1234u);
  EXPECT_EQ(o.heads[0].body, "");
  EXPECT_EQ(o.heads[1].status, 404);
  EXPECT_EQ(o.heads[1].body, "no");
}

TEST(ResponseParser, HeadAnswerMessageCompleteConsumesNothing) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("HEAD");
  const std::string first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string input = first + "HTTP/1.1 204 No Content\r\n\r\n";
  ParseEvent e = parser.feed(input, sink);
  ASSERT_EQ(e.kind, EventKind::HeadComplete);
  EXPECT_EQ(e.consumed, first.size());
  e = parser.feed(std::string_view(input).substr(first.size()), sink);
  EXPECT_EQ(e.kind, EventKind::MessageComplete);
  EXPECT_EQ(e.consumed, 0u);
}

// llhttp 8.1 reads a body after 204/304 when Content-Length or chunked says so; sluice does not.
TEST(ResponseParser, NoContentAndNotModifiedHaveNoBody) {
  Outcome o = parseEveryWay(
      "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"
      "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
      {"GET", "GET", "GET", "GET"});
  ASSERT_EQ(o.events, "HMHMHMHM") << o.detail;
  EXPECT_EQ(o.heads[0].framing, ResponseFraming::None);
  EXPECT_EQ(o.heads[1].framing, ResponseFraming::None);
  EXPECT_EQ(o.heads[1].content_length, 50u);
  EXPECT_EQ(o.heads[2].framing, ResponseFraming::None);
  EXPECT_EQ(o.heads[3].body, "ok");
}

TEST(ResponseParser, ContinueThenFinalResponse) {
  Outcome o = parseEveryWay(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nid", {"PUT"});
  ASSERT_EQ(o.events, "IHM");
  EXPECT_EQ(o.heads[0].status, 100);
  EXPECT_EQ(o.heads[1].status, 201);
  EXPECT_EQ(o.heads[1].body, "id");
}

TEST(ResponseParser, EarlyHintsThenFinalResponse) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("GET");
  const std::string interim = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";
  const std::string input = interim + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  ParseEvent e = parser.feed(input, sink);
  ASSERT_EQ(e.kind, EventKind::InterimHead);
  EXPECT_EQ(e.consumed, interim.size());
  EXPECT_EQ(parser.head().status, 103);
  EXPECT_EQ(parser.head().headers.find("link").value_or(""), "</style.css>; rel=preload");
  e = parser.feed(std::string_view(input).substr(e.consumed), sink);
  ASSERT_EQ(e.kind, EventKind::HeadComplete);
  EXPECT_EQ(parser.head().status, 200);
  EXPECT_EQ(parser.head().headers.count("Link"), 0u);
  EXPECT_EQ(parser.feed({}, sink).kind, EventKind::MessageComplete);
}

TEST(ResponseParser, KeepAlive) {
  auto keepAlive = [](const std::string& input) {
    Outcome o = parse(input, 0, {"GET"});
    EXPECT_EQ(o.events.substr(0, 1), "H") << o.detail;
    return !o.heads.empty() && o.heads[0].keep_alive;
  };
  EXPECT_TRUE(keepAlive("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_FALSE(keepAlive("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_FALSE(keepAlive("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_TRUE(keepAlive("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_FALSE(keepAlive("HTTP/1.1 200 OK\r\n\r\n"));  // until close
}

TEST(ResponseParser, EmptyReasonPhrase) {
  Outcome o = parseEveryWay("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", {"GET"});
  ASSERT_EQ(o.events, "HM");
  EXPECT_EQ(o.heads[0].reason, "");
  Outcome none = parseEveryWay("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", {"GET"});
  ASSERT_EQ(none.events, "HM");
}

// --- Refused ---------------------------------------------------------------------------------

struct BadRow {
  const char* name;
  std::string input;
  std::string events;
  bool at_eof = false;
  ParseError error = ParseError::BadRequest;
};

class BadResponse : public ::testing::TestWithParam<BadRow> {};

TEST_P(BadResponse, IsRefusedHoweverSplit) {
  const BadRow& row = GetParam();
  Outcome o = parseEveryWay(row.input, {"GET", "GET"}, row.at_eof);
  RecordProperty("detail", o.detail);
  EXPECT_EQ(o.events, row.events) << o.detail;
  EXPECT_EQ(o.error, row.error) << o.detail;
}

const std::string kOk = "HTTP/1.1 200 OK\r\n";

// A 200 head of `n` fields, one past the limit of 256 when n is 257.
std::string manyFields(int n) {
  std::string s = kOk;
  for (int i = 0; i < n; ++i) {
    s += "X" + std::to_string(i) + ": y\r\n";
  }
  return s;
}

const BadRow kBadRows[] = {
    {"SwitchingProtocols",
     "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nxyz",
     "E"},
    {"SwitchingProtocolsAfterContinue",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "IE"},
    {"ContentLengthAndChunked",
     kOk + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "E"},
    {"DuplicateContentLength", kOk + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx", "E"},
    {"ContentLengthList", kOk + "Content-Length: 1, 1\r\n\r\nx", "E"},
    {"ContentLengthOver2To63", kOk + "Content-Length: 9223372036854775808\r\n\r\n", "E"},
    {"TransferEncodingGzip", kOk + "Transfer-Encoding: gzip\r\n\r\nabc", "E"},
    {"TransferEncodingGzipChunked", kOk + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "E"},
    {"TransferEncodingTwice",
     kOk + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "E"},
    {"ChunkedOnHttp10", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "E"},
    {"ObsFold", kOk + "X-A: b\r\n c\r\nContent-Length: 0\r\n\r\n", "E"},
    {"BareLfLine", kOk + "Content-Length: 0\n\r\n", "E"},
    {"BareLfLastLine", kOk + "Content-Length: 0\r\n\n", "E"},
    {"BareCr", kOk + "X: a\rb\r\nContent-Length: 0\r\n\r\n", "E"},
    {"NulInValue", kOk + "X: a\0b\r\nContent-Length: 0\r\n\r\n"s, "E"},
    {"SpaceBeforeColon", kOk + "Content-Length : 0\r\n\r\n", "E"},
    {"EmptyFieldName", kOk + ": x\r\nContent-Length: 0\r\n\r\n", "E"},
    {"StatusBelow100", "HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n", "E"},
    {"StatusTwoDigits", "HTTP/1.1 99 Low\r\nContent-Length: 0\r\n\r\n", "E"},
    {"StatusAbove599", "HTTP/1.1 600 High\r\nContent-Length: 0\r\n\r\n", "E"},
    {"StatusOverflow", "HTTP/1.1 1000 Big\r\nContent-Length: 0\r\n\r\n", "E"},
    {"Http20", "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", "E"},
    {"Http12", "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n", "E"},
    {"NotHttp", "ICY 200 OK\r\nContent-Length: 0\r\n\r\n", "E"},
    {"CtlInReason", "HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n", "E"},
    {"ChunkSizeGarbage", kOk + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", "HE"},
    {"ChunkedEndsWithBareLf", kOk + "Transfer-Encoding: chunked\r\n\r\n0\r\n\n", "HE"},
    // End of stream.
    {"TruncatedContentLength", kOk + "Content-Length: 10\r\n\r\nabcdef", "HE", true},
    {"TruncatedChunked", kOk + "Transfer-Encoding: chunked\r\n\r\n5\r\nab", "HE", true},
    {"TruncatedHead", kOk + "Content-Le", "E", true},
    {"NoResponseAtAll", "", "E", true},
    {"ClosedAfterCompleteResponse", kOk + "Content-Length: 0\r\n\r\n", "HME", true},
    {"TooLarge", kOk + "X: " + std::string(kMaxHead, 'x') + "\r\n\r\n", "E", false,
     ParseError::HeaderTooLarge},
    // Two faults: the first in byte order decides, however the bytes are cut (read at once,
    // the field limit used to win over an obs-fold that came before it).
    {"ObsFoldThenTooManyFields", kOk + "X: a\r\n b\r\n" + manyFields(257).substr(kOk.size()), "E"},
    {"TooManyFieldsThenBareLf", manyFields(257) + "X: a\n\r\n", "E", false,
     ParseError::HeaderTooLarge},
};

INSTANTIATE_TEST_SUITE_P(Table, BadResponse, ::testing::ValuesIn(kBadRows), rowName<BadRow>);

TEST(ResponseParser, FinishAfterHeadAnswerReturnsThePendingMessageComplete) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("HEAD");
  ASSERT_EQ(parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"sv, sink).kind,
            EventKind::HeadComplete);
  EXPECT_EQ(parser.finish().kind, EventKind::MessageComplete);
}

TEST(ResponseParser, ResetStartsANewConnection) {
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("GET");
  ASSERT_EQ(parser.feed("HTTP/1.1 200 OK\r\nX : y\r\n\r\n"sv, sink).kind, EventKind::Error);
  parser.reset();
  parser.expect("GET");
  EXPECT_EQ(parser.feed("HTTP/1.1 204 No Content\r\n\r\n"sv, sink).kind, EventKind::HeadComplete);
  EXPECT_EQ(parser.feed({}, sink).kind, EventKind::MessageComplete);
}

TEST(ResponseParser, ManyResponsesByteByByte) {
  std::string input;
  std::vector<std::string> methods;
  std::string expected;
  for (int i = 0; i < 50; ++i) {
    const std::string n = std::to_string(i);
    switch (i % 4) {
      case 0:
        input += "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(n.size()) + "\r\n\r\n" + n;
        methods.push_back("GET");
        expected += "HM";
        break;
      case 1:
        input += "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                 std::to_string(n.size()) + "\r\n" + n + "\r\n0\r\n\r\n";
        methods.push_back("POST");
        expected += "HM";
        break;
      case 2:
        input += "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        methods.push_back("PUT");
        expected += "IHM";
        break;
      default:
        input += "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
        methods.push_back("HEAD");
        expected += "HM";
        break;
    }
  }
  Outcome o = parseEveryWay(input, methods);
  EXPECT_EQ(o.events, expected) << o.detail;
}

}  // namespace
}  // namespace sluice::proxy::http

namespace sluice::proxy::http {
namespace {

// Feeds `input` in pieces of `step` bytes (0: at once) to a parser that expects a 101 to the
// WebSocket a GET asked for, up to the first event that is not NeedMore; returns it and the
// bytes consumed in all.
std::pair<ParseEvent, std::size_t> feedUpgrade(ResponseParser& parser, std::string_view input,
                                               std::size_t step, Collector& sink) {
  parser.expect("GET", Upgrade::WebSocket);
  std::size_t offset = 0;
  while (true) {
    const std::size_t n = step == 0 ? input.size() - offset : std::min(step, input.size() - offset);
    const ParseEvent e = parser.feed(input.substr(offset, n), sink);
    offset += e.consumed;
    if (e.kind != EventKind::NeedMore || offset >= input.size()) {
      return {e, offset};
    }
  }
}

constexpr std::string_view kSwitchHead =
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

// A 101 to the WebSocket the request asked for ends the HTTP: HeadComplete with Switched, and
// the bytes after the head (the origin's first frame) are left to the caller, however the input
// is split. Nothing is parsed after it.
TEST(ResponseParser, SwitchToTheWebSocketAskedFor) {
  const std::string input = std::string(kSwitchHead) + "\x81\x02hi";
  for (std::size_t step : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    SCOPED_TRACE(step);
    ResponseParser parser(kMaxHead);
    Collector sink;
    auto [event, consumed] = feedUpgrade(parser, input, step, sink);
    ASSERT_EQ(event.kind, EventKind::HeadComplete) << event.detail;
    EXPECT_EQ(consumed, kSwitchHead.size());
    EXPECT_EQ(parser.head().status, 101);
    EXPECT_EQ(parser.head().framing, ResponseFraming::Switched);
    EXPECT_FALSE(parser.head().keep_alive);
    EXPECT_EQ(sink.body, "");
    EXPECT_EQ(parser.feed(std::string_view("\x81\x02hi"), sink).kind, EventKind::Error);
  }
}

// Only that switch: the origin must name websocket as the one protocol, and frame nothing.
TEST(ResponseParser, OtherSwitchesAreRefusedEvenWhenAWebSocketWasAskedFor) {
  const std::string_view status = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n";
  for (std::string_view fields : {"Upgrade: h2c\r\n", "Upgrade: websocket, h2c\r\n", "",
                                  "Upgrade: websocket\r\nUpgrade: websocket\r\n",
                                  "Upgrade: websocket\r\nContent-Length: 0\r\n",
                                  "Upgrade: websocket\r\nTransfer-Encoding: chunked\r\n"}) {
    SCOPED_TRACE(fields);
    ResponseParser parser(kMaxHead);
    Collector sink;
    const std::string input = std::string(status) + std::string(fields) + "\r\n";
    EXPECT_EQ(feedUpgrade(parser, input, 0, sink).first.kind, EventKind::Error);
  }
  // Asked for nothing (expect() without an upgrade): no 101 is an answer.
  ResponseParser parser(kMaxHead);
  Collector sink;
  parser.expect("GET");
  EXPECT_EQ(parser.feed(kSwitchHead, sink).kind, EventKind::Error);
}

}  // namespace
}  // namespace sluice::proxy::http
