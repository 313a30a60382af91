// head_writer: the exact bytes sluice sends. Hop-by-hop fields (and those a Connection field
// names) never cross; injected credentials replace the client's field of the same name; framing
// is written by sluice from the parsed head, never copied.

#include "proxy/http/head_writer.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"

namespace sluice::proxy::http {
namespace {

struct NoRequestBody : RequestBodySink {
  void onRequestBody(std::span<const char>) override {}
};
struct NoResponseBody : ResponseBodySink {
  void onResponseBody(std::span<const char>) override {}
};

// Parses a request head; the parser owns what head() refers to.
class ParsedRequest {
 public:
  explicit ParsedRequest(std::string_view text) {
    const ParseEvent e = parser_.feed(text, sink_);
    EXPECT_EQ(e.kind, EventKind::HeadComplete) << e.detail;
  }
  const RequestHead& head() const { return parser_.head(); }

 private:
  RequestParser parser_{8192};
  NoRequestBody sink_;
};

class ParsedResponse {
 public:
  explicit ParsedResponse(std::string_view text, std::string_view method = "GET") {
    parser_.expect(method);
    const ParseEvent e = parser_.feed(text, sink_);
    EXPECT_TRUE(e.kind == EventKind::HeadComplete || e.kind == EventKind::InterimHead) << e.detail;
  }
  const ResponseHead& head() const { return parser_.head(); }

 private:
  ResponseParser parser_{8192};
  NoResponseBody sink_;
};

std::string requestHead(const RequestHead& head, std::string_view host,
                        std::vector<HeaderField> extra = {}) {
  std::string out;
  writeRequestHead(out, head, head.origin_target, host, extra);
  return out;
}

TEST(HeadWriter, SimpleGet) {
  ParsedRequest r("GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(requestHead(r.head(), "pypi.org"),
            "GET /simple/ HTTP/1.1\r\n"
            "Host: pypi.org\r\n"
            "Accept: */*\r\n"
            "\r\n");
}

TEST(HeadWriter, HostIsWrittenFirstFromTheCheckedNameAndTheClientsIsDropped) {
  ParsedRequest r("GET / HTTP/1.1\r\nUser-Agent: x\r\nhost: A.Test\r\n\r\n");
  EXPECT_EQ(requestHead(r.head(), "a.test"),
            "GET / HTTP/1.1\r\nHost: a.test\r\nUser-Agent: x\r\n\r\n");
}

TEST(HeadWriter, AbsoluteFormBecomesOriginForm) {
  ParsedRequest r("GET http://example.test?q=1 HTTP/1.1\r\nHost: example.test\r\n\r\n");
  EXPECT_EQ(requestHead(r.head(), "example.test"),
            "GET /?q=1 HTTP/1.1\r\nHost: example.test\r\n\r\n");
}

TEST(HeadWriter, Http10RequestIsForwardedAsHttp11) {
  ParsedRequest r("GET /x HTTP/1.0\r\nHost: a\r\n\r\n");
  EXPECT_EQ(requestHead(r.head(), "a"), "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
}

TEST(HeadWriter, HopByHopFieldsAreDropped) {
  ParsedRequest r(
      "GET / HTTP/1.1\r\nHost: a\r\n"
      "Connection: keep-alive, X-Hop-One,x-hop-two\r\n"
      "Keep-Alive: timeout=5\r\n"
      "Proxy-Connection: keep-alive\r\n"
      "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
      "Proxy-Authenticate: Basic\r\n"
      "TE: trailers\r\n"
      "Trailer: Expires\r\n"
      "Upgrade: h2c\r\n"
      "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
      "X-Hop-One: 1\r\n"
      "X-HOP-TWO: 2\r\n"
      "X-Kept: 3\r\n"
      "\r\n");
  EXPECT_TRUE(r.head().upgrade_requested);
  EXPECT_EQ(requestHead(r.head(), "a"), "GET / HTTP/1.1\r\nHost: a\r\nX-Kept: 3\r\n\r\n");
}

// The client's upgrade fields never pass as it wrote them: without Upgrade::WebSocket (no rule
// granted it) they are dropped; with it, sluice writes its own two fields, last.
TEST(HeadWriter, WebSocketUpgradeFieldsAreSluicesOwn) {
  ParsedRequest r(
      "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade, X-Hop\r\n"
      "Upgrade: WebSocket, h2c\r\nX-Hop: 1\r\nSec-WebSocket-Version: 13\r\n\r\n");
  EXPECT_EQ(requestHead(r.head(), "a"),
            "GET /ws HTTP/1.1\r\nHost: a\r\nSec-WebSocket-Version: 13\r\n\r\n");
  std::string out;
  writeRequestHead(out, r.head(), r.head().origin_target, "a", {}, Upgrade::WebSocket);
  EXPECT_EQ(out,
            "GET /ws HTTP/1.1\r\nHost: a\r\nSec-WebSocket-Version: 13\r\n"
            "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
}

TEST(HeadWriter, InjectedFieldReplacesTheClientsCaseInsensitively) {
  ParsedRequest r(
      "POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\n"
      "X-Api-Key: sk-sluice-anthropic\r\nContent-Type: application/json\r\n"
      "x-API-key: second copy\r\nContent-Length: 2\r\n\r\n");
  const std::vector<HeaderField> extra = {{"x-api-key", "sk-real-secret"}};
  EXPECT_EQ(requestHead(r.head(), "api.anthropic.com", extra),
            "POST /v1/messages HTTP/1.1\r\n"
            "Host: api.anthropic.com\r\n"
            "Content-Type: application/json\r\n"
            "x-api-key: sk-real-secret\r\n"
            "Content-Length: 2\r\n"
            "\r\n");
}

TEST(HeadWriter, InjectedFieldCannotBeRemovedThroughConnection) {
  ParsedRequest r("GET / HTTP/1.1\r\nHost: a\r\nConnection: authorization\r\n\r\n");
  const std::vector<HeaderField> extra = {{"Authorization", "Bearer real"}};
  EXPECT_EQ(requestHead(r.head(), "a", extra),
            "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer real\r\n\r\n");
}

TEST(HeadWriter, InjectedValuesCannotInjectFields) {
  ParsedRequest r("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  const std::vector<HeaderField> extra = {{"X-Key", "v1\r\nHost: evil.test"},
                                          {"Bad Name", "x"},
                                          {"X-Nul", std::string_view("a\0b", 3)}};
  EXPECT_EQ(requestHead(r.head(), "a\r\nX: y", extra),
            "GET / HTTP/1.1\r\nHost: aX: y\r\nX-Key: v1Host: evil.test\r\nX-Nul: ab\r\n\r\n");
}

TEST(HeadWriter, FramingIsWrittenBySluice) {
  ParsedRequest cl("POST / HTTP/1.1\r\nHost: a\r\ncontent-length:  007\r\n\r\n");
  EXPECT_EQ(requestHead(cl.head(), "a"), "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\n");
  ParsedRequest zero("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(requestHead(zero.head(), "a"),
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  ParsedRequest chunked("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \tCHUNKED\r\n\r\n");
  EXPECT_EQ(requestHead(chunked.head(), "a"),
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
  ParsedRequest none("DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(requestHead(none.head(), "a"), "DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n");
}

TEST(HeadWriter, HandBuiltHead) {
  RequestHead head;
  head.method = "PUT";
  head.headers.add("X-One", "  1 ");
  head.headers.add("Content-Length", "999");  // ignored: framing comes from the fields below
  head.framing = BodyFraming::ContentLength;
  head.content_length = 12;
  std::string out = "prefix|";
  writeRequestHead(out, head, "/up", "h.test", {});
  EXPECT_EQ(out,
            "prefix|PUT /up HTTP/1.1\r\nHost: h.test\r\nX-One: 1\r\nContent-Length: 12\r\n\r\n");
}

TEST(HeadWriter, WrittenHeadParsesBackToTheSameRequest) {
  ParsedRequest original(
      "PATCH http://a.test:8080/p/q?r=s HTTP/1.1\r\nHost: a.test:8080\r\nX-A: 1\r\n"
      "Connection: X-A\r\nX-B: two words\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string written = requestHead(original.head(), "a.test:8080");
  ParsedRequest again(written);
  EXPECT_EQ(again.head().method, "PATCH");
  EXPECT_EQ(again.head().target, "/p/q?r=s");
  EXPECT_EQ(again.head().host, "a.test:8080");
  EXPECT_EQ(again.head().framing, BodyFraming::Chunked);
  EXPECT_EQ(again.head().headers.count("X-A"), 0u);
  EXPECT_EQ(again.head().headers.find("X-B").value_or(""), "two words");
}

// An `extra` field with an empty value only removes the client's field of that name (in any
// spelling the drop table reads as it) and is itself written nowhere; a non-empty one replaces
// it: how registry metadata is asked for whole and readable (docs/packages.md#metadata).
TEST(HeadWriter, AnEmptyExtraValueRemovesTheClientsFieldAndWritesNothing) {
  ParsedRequest r(
      "GET /left-pad HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"abc\"\r\nAccept: */*\r\n"
      "range: bytes=0-9\r\nIf_Modified_Since: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
      "Accept-Encoding: br\r\nX-Kept: 1\r\n\r\n");
  const std::vector<HeaderField> extra = {{"Accept-Encoding", "gzip"},
                                          {"If-None-Match", ""},
                                          {"If-Modified-Since", ""},
                                          {"If-Range", ""},  // the client sent none
                                          {"Range", ""}};
  EXPECT_EQ(requestHead(r.head(), "a", extra),
            "GET /left-pad HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nX-Kept: 1\r\n"
            "Accept-Encoding: gzip\r\n\r\n");

  // HTTP/2 builds its fields from the same visit.
  struct Collected final : ForwardedFieldVisitor {
    void field(std::string_view name, std::string_view value, bool configured) override {
      fields.push_back(std::string(name) + "=" + std::string(value) + (configured ? "!" : ""));
    }
    std::vector<std::string> fields;
  } collected;
  visitForwardedFields(r.head(), extra, collected);
  EXPECT_EQ(collected.fields,
            (std::vector<std::string>{"Accept=*/*", "X-Kept=1", "Accept-Encoding=gzip!"}));

  // Without `extra`, every one of the client's fields passes.
  Collected untouched;
  visitForwardedFields(r.head(), {}, untouched);
  EXPECT_EQ(untouched.fields.size(), 6u);
}

// --- Responses -------------------------------------------------------------------------------

TEST(HeadWriter, ResponseKeepsEndToEndFieldsAndRewritesFraming) {
  ParsedResponse r(
      "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: keep-alive, X-Hop\r\n"
      "Keep-Alive: timeout=5\r\nX-Hop: 1\r\nContent-Length: 42\r\nSet-Cookie: a=b\r\n"
      "Upgrade: h2\r\nProxy-Authenticate: Basic\r\n\r\n");
  std::string out;
  writeResponseHead(out, r.head(), ResponseFraming::ContentLength, false);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: a=b\r\n"
            "Content-Length: 42\r\n\r\n");
}

// A 101 to websocket: the upgrade fields sluice writes, no framing, and never Connection: close
// (the connection is the WebSocket's).
TEST(HeadWriter, SwitchedResponseWritesTheUpgradeFields) {
  ResponseParser parser;
  parser.expect("GET", Upgrade::WebSocket);
  struct : ResponseBodySink {
    void onResponseBody(std::span<const char>) override {}
  } sink;
  ASSERT_EQ(parser
                .feed(std::string_view("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                       "Connection: upgrade, X-Hop\r\nX-Hop: 1\r\n"
                                       "Sec-WebSocket-Accept: abc=\r\n\r\n"),
                      sink)
                .kind,
            EventKind::HeadComplete);
  std::string out;
  writeResponseHead(out, parser.head(), ResponseFraming::Switched, true);
  EXPECT_EQ(out,
            "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: abc=\r\n"
            "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
}

TEST(HeadWriter, UntilCloseBodyIsRechunkedAndCloseIsAnnounced) {
  ParsedResponse r("HTTP/1.0 200 Fine\r\nServer: old\r\n\r\n");
  ASSERT_EQ(r.head().framing, ResponseFraming::UntilClose);
  std::string out;
  writeResponseHead(out, r.head(), r.head().framing, true);
  EXPECT_EQ(out,
            "HTTP/1.1 200 Fine\r\nServer: old\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n");
}

TEST(HeadWriter, ChunkedResponse) {
  ParsedResponse r("HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n");
  std::string out;
  writeResponseHead(out, r.head(), ResponseFraming::Chunked, false);
  EXPECT_EQ(out, "HTTP/1.1 404 Not Found\r\nX: y\r\nTransfer-Encoding: chunked\r\n\r\n");
}

// A head without a phrase (an HTTP/2 origin's, or an HTTP/1.1 origin's empty one) goes to an
// HTTP/1.1 client with the status's registered name; one the origin sent is kept as it came; a
// code with no name keeps the empty phrase, after the space the status line needs.
TEST(HeadWriter, AResponseWithoutAPhraseGetsTheStatussName) {
  struct Row {
    const char* status_line;
    const char* written;
  };
  const Row rows[] = {
      {"HTTP/1.1 200 \r\n", "HTTP/1.1 200 OK\r\n"},
      {"HTTP/1.1 404\r\n", "HTTP/1.1 404 Not Found\r\n"},
      {"HTTP/1.1 503 \r\n", "HTTP/1.1 503 Service Unavailable\r\n"},
      {"HTTP/1.1 200 Fine\r\n", "HTTP/1.1 200 Fine\r\n"},
      {"HTTP/1.1 299 \r\n", "HTTP/1.1 299 \r\n"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.status_line);
    ParsedResponse r(std::string(row.status_line) + "Content-Length: 0\r\n\r\n");
    std::string out;
    writeResponseHead(out, r.head(), ResponseFraming::ContentLength, false);
    EXPECT_EQ(out, std::string(row.written) + "Content-Length: 0\r\n\r\n");
  }
}

TEST(HeadWriter, HeadAnswerKeepsItsContentLengthWithoutABody) {
  ParsedResponse r("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", "HEAD");
  ASSERT_EQ(r.head().framing, ResponseFraming::None);
  std::string out;
  writeResponseHead(out, r.head(), ResponseFraming::ContentLength, false);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
}

TEST(HeadWriter, NoContentAndInterimHaveNoFraming) {
  ParsedResponse nc("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nETag: \"x\"\r\n\r\n");
  std::string out;
  writeResponseHead(out, nc.head(), ResponseFraming::None, false);
  EXPECT_EQ(out, "HTTP/1.1 204 No Content\r\nETag: \"x\"\r\n\r\n");
  ParsedResponse interim("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n");
  out.clear();
  writeResponseHead(out, interim.head(), ResponseFraming::None, false);
  EXPECT_EQ(out, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n");
}

// --- sluice's own answers --------------------------------------------------------------------

TEST(HeadWriter, ErrorResponse) {
  const std::vector<HeaderField> headers = {
      {"Sluice-Reason", "not_allowed_host"},
      {"Proxy-Status", "sluice; error=destination_ip_prohibited"},
  };
  std::string out;
  writeErrorResponse(out, 403, "Forbidden", headers, "sluice: evil.test is not allowed", true);
  const std::string body = "sluice: evil.test is not allowed\n";
  EXPECT_EQ(out,
            "HTTP/1.1 403 Forbidden\r\n"
            "Sluice-Reason: not_allowed_host\r\n"
            "Proxy-Status: sluice; error=destination_ip_prohibited\r\n"
            "Content-Type: text/plain\r\n"
            "Cache-Control: no-store\r\n"
            "Content-Length: " +
                std::to_string(body.size()) +
                "\r\n"
                "Connection: close\r\n"
                "\r\n" +
                body);
}

TEST(HeadWriter, ErrorResponseWithoutBodyOrClose) {
  std::string out;
  writeErrorResponse(out, 504, "Gateway Timeout", {}, "", false);
  EXPECT_EQ(out,
            "HTTP/1.1 504 Gateway Timeout\r\nContent-Type: text/plain\r\n"
            "Cache-Control: no-store\r\nContent-Length: 0\r\n\r\n");
}

TEST(HeadWriter, ErrorResponseCannotBeSplit) {
  std::string out;
  const std::vector<HeaderField> headers = {{"Sluice-Reason", "bad\r\nX: y"}};
  writeErrorResponse(out, 400, "Bad\r\nRequest", headers, "line one\r\nline two", true);
  EXPECT_EQ(out,
            "HTTP/1.1 400 BadRequest\r\nSluice-Reason: badX: y\r\nContent-Type: text/plain\r\n"
            "Cache-Control: no-store\r\nContent-Length: 17\r\nConnection: close\r\n\r\n"
            "line oneline two\n");
}

// --- Chunks ----------------------------------------------------------------------------------

TEST(HeadWriter, ChunkFraming) {
  std::string out;
  appendChunkHeader(out, 1);
  appendChunkHeader(out, 0x1a);
  appendChunkHeader(out, 0x10000);
  EXPECT_EQ(out, "1\r\n1a\r\n10000\r\n");
  out.clear();
  writeChunk(out, std::string_view("hello"));
  writeChunk(out, std::string_view());
  out.append(kLastChunk);
  EXPECT_EQ(out, "5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(kChunkEnd, "\r\n");
}

TEST(HeadWriter, RechunkedBodyParsesBack) {
  std::string wire = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body(70000, 'z');
  writeChunk(wire, std::string_view(body).substr(0, 65536));
  writeChunk(wire, std::string_view(body).substr(65536));
  wire.append(kLastChunk);
  struct Collect : RequestBodySink {
    std::string got;
    void onRequestBody(std::span<const char> d) override { got.append(d.data(), d.size()); }
  } sink;
  RequestParser parser(8192);
  std::string_view rest = wire;
  ParseEvent e = parser.feed(rest, sink);
  ASSERT_EQ(e.kind, EventKind::HeadComplete);
  rest.remove_prefix(e.consumed);
  e = parser.feed(rest, sink);
  EXPECT_EQ(e.kind, EventKind::MessageComplete);
  EXPECT_EQ(sink.got, body);
}

// docs/wire.md#request-trailers: what a trailer may carry to the origin, in the order sent.
TEST(HeadWriter, RequestLastChunkCarriesOnlyTheTrailersAnOriginMayGet) {
  HeaderBlock trailers;
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"x-checksum", "c1"},
                                                        {"X-Forwarded-Host", "evil.test"},
                                                        {"authorization", "Bearer x"},
                                                        {"Content-Type", "text/evil"},
                                                        {"cookie", "a=b"},
                                                        {"proxy-foo", "x"},
                                                        {"if-match", "*"},
                                                        {"transfer-encoding", "chunked"},
                                                        {"host", "evil.test"},
                                                        {"X-Api-Key", "attacker"},
                                                        {"x-note", std::string("a\r\nInjected: 1")},
                                                        {"bad name", "v"},
                                                        {"x-signature", "s2"}}) {
    trailers.add(name, value);
  }
  const std::vector<HeaderField> inject = {{"x-api-key", "secret"}};
  std::string out;
  writeRequestLastChunk(out, trailers, inject);
  EXPECT_EQ(out, "0\r\nx-checksum: c1\r\nx-note: aInjected: 1\r\nx-signature: s2\r\n\r\n");
  out.clear();
  writeRequestLastChunk(out, HeaderBlock(), inject);
  EXPECT_EQ(out, kLastChunk);
}

TEST(HeadWriter, HopByHopNames) {
  for (std::string_view name :
       {"connection", "KEEP-ALIVE", "Proxy-Connection", "proxy-authorization", "Proxy-Authenticate",
        "te", "Trailer", "transfer-encoding", "UPGRADE", "http2-settings"}) {
    EXPECT_TRUE(isHopByHop(name)) << name;
  }
  for (std::string_view name : {"Host", "Content-Length", "Authorization", "Trailers", "TE2"}) {
    EXPECT_FALSE(isHopByHop(name)) << name;
  }
}

}  // namespace
}  // namespace sluice::proxy::http
