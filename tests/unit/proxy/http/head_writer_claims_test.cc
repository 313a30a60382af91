// head_writer and the headers the origin may not get from the sandbox:
// every name of the family, in every spelling, is missing from the head sluice writes; the
// near-misses are forwarded; a rule's injected fields follow the same table.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "proxy/http/head_writer.h"
#include "proxy/http/request_parser.h"
#include "tests/unit/policy/request_header_cases.h"

namespace sluice::proxy::http {
namespace {

using policy::RequestHeaderClass;
using policy::request_header_cases::kFamily;
using policy::request_header_cases::kNearMisses;

struct NoRequestBody : RequestBodySink {
  void onRequestBody(std::span<const char>) override {}
};

std::string writtenHead(std::string_view text, std::vector<HeaderField> extra = {}) {
  RequestParser parser(64 * 1024);
  NoRequestBody sink;
  const ParseEvent e = parser.feed(text, sink);
  EXPECT_EQ(e.kind, EventKind::HeadComplete) << e.detail;
  std::string out;
  writeRequestHead(out, parser.head(), parser.head().origin_target, "a.test", extra);
  return out;
}

std::string spelled(std::string_view name, int how) {
  std::string out(name);
  for (char& c : out) {
    if (how == 1 && c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    } else if (how == 2 && c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    } else if (how == 3 && c == '-') {
      c = '_';
    }
  }
  return out;
}

// Framing and hop-by-hop fields change how the request is parsed (a second Host, a
// Transfer-Encoding): their dropping is head_writer_test's. The rest ride one request.
bool ridesAlong(RequestHeaderClass cls) {
  return cls != RequestHeaderClass::Framing && cls != RequestHeaderClass::HopByHop;
}

TEST(HeadWriterClaims, NoClaimOrProxyHeaderReachesTheOriginInAnySpelling) {
  for (int how = 0; how < 4; ++how) {
    std::string request = "GET /x HTTP/1.1\r\nHost: a.test\r\n";
    std::string kept;
    for (std::size_t i = 0; i < std::size(kFamily); ++i) {
      if (ridesAlong(kFamily[i].cls)) {
        request += spelled(kFamily[i].name, how) + ": claim-" + std::to_string(i) + "\r\n";
      }
      if (i < std::size(kNearMisses)) {
        const std::string field = std::string(kNearMisses[i]) + ": kept-" + std::to_string(i);
        request += field + "\r\n";
        kept += field + "\r\n";
      }
    }
    request += "\r\n";
    EXPECT_EQ(writtenHead(request), "GET /x HTTP/1.1\r\nHost: a.test\r\n" + kept + "\r\n")
        << "spelling " << how;
  }
}

TEST(HeadWriterClaims, UnderscoreSpellingsOfFramingAndHopByHopAreDropped) {
  EXPECT_EQ(writtenHead("GET / HTTP/1.1\r\nHost: a\r\nContent_Length: 5\r\n"
                        "Transfer_Encoding: chunked\r\nKeep_Alive: 1\r\nProxy_Connection: x\r\n"
                        "http2_settings: x\r\nX-Kept: 1\r\n\r\n"),
            "GET / HTTP/1.1\r\nHost: a.test\r\nX-Kept: 1\r\n\r\n");
}

TEST(HeadWriterClaims, InjectedNamesTheWriterDropsAreNotWritten) {
  // The loader refuses these; the writer holds to the same table if one ever got through.
  const std::vector<HeaderField> extra = {{"X-Forwarded-Host", "evil.test"},
                                          {"Proxy-Authorization", "Basic eA=="},
                                          {"Host", "evil.test"},
                                          {"x-api-key", "sk-real"}};
  EXPECT_EQ(writtenHead("GET / HTTP/1.1\r\nHost: a\r\n\r\n", extra),
            "GET / HTTP/1.1\r\nHost: a.test\r\nx-api-key: sk-real\r\n\r\n");
}

TEST(HeadWriterClaims, InjectedFieldReplacesTheUnderscoreSpellingToo) {
  // An origin behind CGI reads X_Api_Key as x-api-key: the sandbox's copy must not ride along.
  EXPECT_EQ(writtenHead("GET / HTTP/1.1\r\nHost: a\r\nX_Api_Key: placeholder\r\n"
                        "x-api_KEY: other\r\n\r\n",
                        {{"x-api-key", "sk-real"}}),
            "GET / HTTP/1.1\r\nHost: a.test\r\nx-api-key: sk-real\r\n\r\n");
}

TEST(HeadWriterClaims, ResponsesKeepTheirOwnHeaders) {
  // The family is about what a request claims; an origin's response may carry such names.
  ResponseParser parser(8192);
  parser.expect("GET");
  struct NoBody : ResponseBodySink {
    void onResponseBody(std::span<const char>) override {}
  } sink;
  const ParseEvent e = parser.feed(std::string_view("HTTP/1.1 200 OK\r\nX-Forwarded-Host: o\r\n"
                                                    "Proxy-Status: cdn\r\nContent-Length: 0\r\n"
                                                    "\r\n"),
                                   sink);
  ASSERT_EQ(e.kind, EventKind::HeadComplete) << e.detail;
  std::string out;
  writeResponseHead(out, parser.head(), ResponseFraming::ContentLength, false);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nX-Forwarded-Host: o\r\nProxy-Status: cdn\r\n"
            "Content-Length: 0\r\n\r\n");
}

}  // namespace
}  // namespace sluice::proxy::http
