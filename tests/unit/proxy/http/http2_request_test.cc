// Http2RequestBuilder: an HTTP/2 stream's fields in, the RequestHead sluice decides and writes
// upstream out; RFC 9113 §8.1-8.3 malformations (stream errors, never translated) and the
// well-formed requests sluice refuses on the stream (docs/wire.md#http2).
#include "proxy/http/http2_request.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sluice::proxy::http {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;
using Outcome = Http2RequestBuilder::Outcome;

const Fields kGet = {{":method", "GET"},
                     {":scheme", "https"},
                     {":authority", "pkg.test"},
                     {":path", "/simple/?q=1"}};

Fields with(Fields base, const Fields& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

Outcome build(Http2RequestBuilder& b, const Fields& fields, bool end_stream = true) {
  b.reset();
  for (const auto& [name, value] : fields) {
    if (!b.add(name, value)) {
      break;
    }
  }
  return b.finish(end_stream);
}

TEST(Http2Request, AWellFormedGetBecomesTheHeadSluiceDecides) {
  Http2RequestBuilder b;
  ASSERT_EQ(build(b, with(kGet, {{"accept", "*/*"}, {"user-agent", "pip/23"}})), Outcome::Ready);
  const RequestHead& h = b.head();
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/simple/?q=1");
  EXPECT_EQ(h.origin_target, "/simple/?q=1");
  EXPECT_EQ(h.host, "pkg.test");  // :authority is the Host
  EXPECT_EQ(h.host_count, 1u);
  EXPECT_EQ(h.framing, BodyFraming::None);
  EXPECT_FALSE(h.absolute_form);
  ASSERT_EQ(h.headers.size(), 2u);
  EXPECT_EQ(h.headers.name(0), "accept");
  EXPECT_EQ(h.headers.value(1), "pip/23");
}

TEST(Http2Request, FramingFollowsContentLengthOrTheStream) {
  Http2RequestBuilder b;
  ASSERT_EQ(build(b, with(kGet, {{"content-length", "12"}}), false), Outcome::Ready);
  EXPECT_EQ(b.head().framing, BodyFraming::ContentLength);
  EXPECT_EQ(b.head().content_length, 12u);
  EXPECT_FALSE(b.head().headers.find("content-length"));  // written by sluice from the framing
  ASSERT_EQ(build(b, kGet, false), Outcome::Ready);
  EXPECT_EQ(b.head().framing, BodyFraming::Chunked);  // no length: chunked toward HTTP/1.1
  ASSERT_EQ(build(b, with(kGet, {{"content-length", "0"}}), true), Outcome::Ready);
  EXPECT_EQ(b.head().framing, BodyFraming::ContentLength);
  EXPECT_EQ(b.head().content_length, 0u);
}

TEST(Http2Request, CookiesAreJoinedForHttp11) {
  Http2RequestBuilder b;
  ASSERT_EQ(build(b, with(kGet, {{"cookie", "a=1"}, {"accept", "x"}, {"cookie", "b=2"}})),
            Outcome::Ready);
  EXPECT_EQ(b.head().headers.count("cookie"), 1u);
  EXPECT_EQ(b.head().headers.find("cookie"), "a=1; b=2");
}

TEST(Http2Request, ExpectContinueAndGrpcAreRecognised) {
  Http2RequestBuilder b;
  ASSERT_EQ(
      build(b, with(kGet, {{"expect", "100-continue"}, {"content-type", "application/grpc+proto"}}),
            false),
      Outcome::Ready);
  EXPECT_TRUE(b.head().expect_continue);
  EXPECT_TRUE(b.grpc());
  ASSERT_EQ(build(b, kGet), Outcome::Ready);
  EXPECT_FALSE(b.head().expect_continue);
  EXPECT_FALSE(b.grpc());
}

// gRPC's content-type is "application/grpc", alone or followed by "+" and a format or by
// parameters; a media type is case-insensitive (RFC 9110 §8.3.1), so a refusal of
// `Application/GRPC` is a gRPC status too (docs/wire.md#grpc). Other media types are not gRPC,
// whatever they start with.
TEST(Http2Request, GrpcIsTheMediaTypeInAnyCase) {
  const std::pair<const char*, bool> rows[] = {
      {"application/grpc", true},
      {"application/grpc+proto", true},
      {"application/grpc+json", true},
      {"application/grpc+custom-format", true},
      {"application/grpc;charset=utf-8", true},
      {"application/grpc ; x=y", true},
      {"Application/GRPC", true},
      {"APPLICATION/GRPC+PROTO", true},
      {"application/GRPC;q=1", true},
      {"application/grpcx", false},
      {"application/grpc-web", false},
      {"application/grpc-web+proto", false},
      {"application/grpc x", false},
      {"application/grp", false},
      {"application/json", false},
      {"text/plain", false},
      {"xapplication/grpc", false},
      {"", false},
  };
  Http2RequestBuilder b;
  for (const auto& [content_type, grpc] : rows) {
    SCOPED_TRACE(content_type);
    ASSERT_EQ(build(b, with(kGet, {{"content-type", content_type}}), false), Outcome::Ready);
    EXPECT_EQ(b.grpc(), grpc);
  }
}

TEST(Http2Request, AHostFieldBesideAuthorityMustAgree) {
  Http2RequestBuilder b;
  ASSERT_EQ(build(b, with(kGet, {{"host", "PKG.test"}})), Outcome::Ready);  // same name
  EXPECT_EQ(b.head().host, "pkg.test");
  EXPECT_FALSE(b.head().headers.find("host"));  // checked, then dropped: Host is H
  ASSERT_EQ(build(b, with(kGet, {{"host", "evil.test"}})), Outcome::Refused);
  EXPECT_EQ(b.refusal().reason, policy::Reason::HostMismatch);
}

// :authority and host agree when they name one authority as the policy reads names
// (docs/policy.md#names): the host canonicalised, an absent port https's 443. What does not
// parse agrees with nothing (fails safe: 403 host_mismatch).
TEST(Http2Request, AuthorityAndHostAreComparedCanonically) {
  struct Row {
    const char* authority;
    const char* host;
    bool agree;
  };
  const Row rows[] = {
      {"pkg.test", "pkg.test", true},
      {"pkg.test", "PKG.Test", true},
      {"pkg.test:443", "pkg.test", true},  // the default port, on either side
      {"pkg.test", "pkg.test:443", true},
      {"pkg.test", "PKG.TEST.", true},  // one trailing dot is the same name
      {"PKG.test.:443", "pkg.test", true},
      {"pkg.test:8443", "pkg.test.:8443", true},
      {"[2001:db8::1]", "[2001:DB8:0::1]:443", true},
      {"pkg.test", "evil.test", false},
      {"pkg.test", "api.pkg.test", false},
      {"pkg.test:8443", "pkg.test", false},  // host alone means 443
      {"pkg.test", "pkg.test:8443", false},
      {"pkg.test", "pkg.test..", false},
      {"pkg.test", "pkg.test:", false},
      {"pkg.test", "pkg.test:0443", false},
      {"pkg.test", "user@pkg.test", false},
      {"pkg.test", "pkg_test", false},
      {"a b", "a b", false},  // garbage names nothing, not even itself
  };
  Http2RequestBuilder b;
  for (const Row& row : rows) {
    SCOPED_TRACE(std::string(row.authority) + " | " + row.host);
    const Fields fields = {{":method", "GET"},
                           {":scheme", "https"},
                           {":authority", row.authority},
                           {":path", "/"},
                           {"host", row.host}};
    if (row.agree) {
      ASSERT_EQ(build(b, fields), Outcome::Ready);
      EXPECT_EQ(b.head().host, row.authority);  // :authority is the Host
      EXPECT_FALSE(b.head().headers.find("host"));
    } else {
      ASSERT_EQ(build(b, fields), Outcome::Refused);
      EXPECT_EQ(b.refusal().reason, policy::Reason::HostMismatch);
    }
  }
}

// Two host fields are one when they name one authority (the first is kept); else malformed.
TEST(Http2Request, TwoHostFieldsAreComparedCanonically) {
  Http2RequestBuilder b;
  const Fields bare = {{":method", "GET"}, {":scheme", "https"}, {":path", "/"}};
  ASSERT_EQ(build(b, with(bare, {{"host", "pkg.test"}, {"host", "PKG.test.:443"}})),
            Outcome::Ready);
  EXPECT_EQ(b.head().host, "pkg.test");
  ASSERT_EQ(build(b, with(kGet, {{"host", "pkg.test:443"}, {"host", "pkg.test"}})), Outcome::Ready);
  EXPECT_EQ(b.head().host, "pkg.test");
  for (const char* second : {"evil.test", "pkg.test:8443", "pkg.test..", "a b"}) {
    SCOPED_TRACE(second);
    ASSERT_EQ(build(b, with(bare, {{"host", "pkg.test"}, {"host", second}})), Outcome::Malformed);
    EXPECT_EQ(b.malformation(), "two host fields that differ");
  }
}

TEST(Http2Request, AHostFieldAloneIsTheHost) {
  Http2RequestBuilder b;
  const Fields fields = {
      {":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {"host", "pkg.test"}};
  ASSERT_EQ(build(b, fields), Outcome::Ready);
  EXPECT_EQ(b.head().host, "pkg.test");
}

// RFC 8441: an extended CONNECT for websocket is the HTTP/1.1 form's GET with Upgrade, so the
// policy decides both alike (docs/wire.md#websocket); its DATA are no body.
TEST(Http2Request, AnExtendedConnectForWebSocketIsTheUpgradeAGetAsks) {
  Http2RequestBuilder b;
  const Fields fields = {{":method", "CONNECT"},    {":protocol", "websocket"},
                         {":scheme", "https"},      {":authority", "ws.test:8443"},
                         {":path", "/chat?room=1"}, {"sec-websocket-version", "13"}};
  ASSERT_EQ(build(b, fields, false), Outcome::Ready);
  const RequestHead& h = b.head();
  EXPECT_TRUE(b.extendedConnect());
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.origin_target, "/chat?room=1");
  EXPECT_EQ(h.host, "ws.test:8443");
  EXPECT_TRUE(h.websocket_upgrade);
  EXPECT_TRUE(h.upgrade_requested);
  EXPECT_EQ(h.framing, BodyFraming::None);
  EXPECT_FALSE(h.is_connect);
  ASSERT_EQ(build(b, kGet, false), Outcome::Ready);  // the next stream is no upgrade
  EXPECT_FALSE(b.extendedConnect());
  ASSERT_EQ(build(b, fields, false), Outcome::Ready);
  b.setMaxListBytes(64);  // nor is the next one, refused before its head is looked at
  ASSERT_EQ(build(b, with(kGet, {{"x-long", std::string(100, 'a')}})), Outcome::Refused);
  EXPECT_FALSE(b.extendedConnect());
}

TEST(Http2Request, WellFormedButNotForwardedIsRefusedOnTheStream) {
  struct Case {
    const char* name;
    Fields fields;
    policy::Reason reason;
  };
  const std::vector<Case> cases = {
      {"scheme http",
       {{":method", "GET"}, {":scheme", "http"}, {":authority", "a"}, {":path", "/"}},
       policy::Reason::BadRequest},
      {"no authority, no host",
       {{":method", "GET"}, {":scheme", "https"}, {":path", "/"}},
       policy::Reason::HostMissing},
      {"CONNECT",
       {{":method", "CONNECT"}, {":authority", "evil.test:443"}},
       policy::Reason::BadRequest},
      {"extended CONNECT for another protocol",
       {{":method", "CONNECT"},
        {":protocol", "connect-udp"},
        {":scheme", "https"},
        {":authority", "a"},
        {":path", "/"}},
       policy::Reason::BadRequest},
  };
  Http2RequestBuilder b;
  for (const Case& c : cases) {
    EXPECT_EQ(build(b, c.fields), Outcome::Refused) << c.name;
    EXPECT_EQ(b.refusal().reason, c.reason) << c.name;
  }
}

// RFC 9113 §8.1.1: each is a stream error; none may be translated into an HTTP/1.1 request.
TEST(Http2Request, MalformedStreamsAreNeverTranslated) {
  struct Case {
    const char* name;
    Fields fields;
  };
  const std::vector<Case> cases = {
      {"upper-case name", with(kGet, {{"X-Test", "1"}})},
      {"name with a space", with(kGet, {{"x test", "1"}})},
      {"empty name", with(kGet, {{"", "1"}})},
      {"CR in a value", with(kGet, {{"x-test", "a\rb"}})},
      {"LF in a value", with(kGet, {{"x-test", "a\nInjected: 1"}})},
      {"NUL in a value", with(kGet, {{"x-test", std::string("a\0b", 3)}})},
      {"leading space", with(kGet, {{"x-test", " a"}})},
      {"trailing tab", with(kGet, {{"x-test", "a\t"}})},
      {"connection", with(kGet, {{"connection", "keep-alive"}})},
      {"keep-alive", with(kGet, {{"keep-alive", "5"}})},
      {"proxy-connection", with(kGet, {{"proxy-connection", "x"}})},
      {"transfer-encoding", with(kGet, {{"transfer-encoding", "chunked"}})},
      {"upgrade", with(kGet, {{"upgrade", "websocket"}})},
      {"te gzip", with(kGet, {{"te", "gzip"}})},
      {"pseudo after regular", with({{"accept", "*/*"}}, kGet)},
      {"repeated :path", with(kGet, {{":path", "/other"}})},
      {"unknown pseudo", with(kGet, {{":evil", "1"}})},
      {"response pseudo", with(kGet, {{":status", "200"}})},
      {"no :method", {{":scheme", "https"}, {":authority", "a"}, {":path", "/"}}},
      {"no :path", {{":method", "GET"}, {":scheme", "https"}, {":authority", "a"}}},
      {"empty :path",
       {{":method", "GET"}, {":scheme", "https"}, {":authority", "a"}, {":path", ""}}},
      {"no :scheme", {{":method", "GET"}, {":authority", "a"}, {":path", "/"}}},
      {":protocol on GET", with(kGet, {{":protocol", "websocket"}})},
      {"CONNECT with :path", {{":method", "CONNECT"}, {":authority", "a:443"}, {":path", "/"}}},
      {"content-length not a number", with(kGet, {{"content-length", "1x"}})},
      {"content-length signed", with(kGet, {{"content-length", "+5"}})},
      {"content-lengths that differ",
       with(kGet, {{"content-length", "5"}, {"content-length", "6"}})},
      {"two host fields that differ", with(kGet, {{"host", "pkg.test"}, {"host", "evil.test"}})},
  };
  Http2RequestBuilder b;
  for (const Case& c : cases) {
    EXPECT_EQ(build(b, c.fields), Outcome::Malformed) << c.name;
    EXPECT_FALSE(b.malformation().empty()) << c.name;
  }
  // te: trailers is the one te allowed (gRPC sends it); it is hop-by-hop upstream.
  EXPECT_EQ(build(b, with(kGet, {{"te", "trailers"}})), Outcome::Ready);
}

// RFC 9113 §6.5.2's measure: names, values and 32 bytes a field, bounded by max_header_bytes.
TEST(Http2Request, AHeaderListOverTheBoundIsRefused431) {
  Http2RequestBuilder b;
  b.setMaxListBytes(300);
  // The four pseudo-headers are 57 bytes of text and 128 of overhead: 185; x-a adds 35 + v.
  ASSERT_EQ(build(b, with(kGet, {{"x-a", std::string(80, 'a')}})), Outcome::Ready);    // 300
  ASSERT_EQ(build(b, with(kGet, {{"x-a", std::string(81, 'a')}})), Outcome::Refused);  // 301
  EXPECT_EQ(b.refusal().reason, policy::Reason::HeaderTooLarge);
  EXPECT_EQ(b.method(), "GET");  // what it showed, for the record
  // An HPACK bomb's many copies of one large field stop counting past the bound, and are not
  // kept.
  Fields bomb = kGet;
  for (int i = 0; i < 1000; ++i) {
    bomb.emplace_back("x-bomb", std::string(4000, 'b'));
  }
  ASSERT_EQ(build(b, bomb), Outcome::Refused);
  EXPECT_EQ(b.head().headers.size(), 0u);
}

// docs/wire.md#request-trailers: a trailer section is checked like a head and bounded alike.
TEST(Http2Request, TrailersAreCheckedAndBoundedLikeAHead) {
  using Trailers = Http2RequestBuilder::Trailers;
  Http2RequestBuilder b;
  b.setMaxListBytes(300);
  ASSERT_EQ(build(b, kGet, false), Outcome::Ready);
  EXPECT_EQ(b.trailersState(), Trailers::None);
  EXPECT_TRUE(b.addTrailer("x-checksum", "c1"));
  EXPECT_TRUE(b.addTrailer("grpc-foo", "1"));
  EXPECT_EQ(b.trailersState(), Trailers::Ready);
  ASSERT_EQ(b.trailers().size(), 2u);
  EXPECT_EQ(b.trailers().name(1), "grpc-foo");

  for (const auto& [name, value] : Fields{{":path", "/admin"},
                                          {":status", "200"},
                                          {"X-Upper", "v"},
                                          {"x-nl", "a\nb"},
                                          {"x-sp", " v"},
                                          {"connection", "close"},
                                          {"te", "gzip"},
                                          {"", "v"}}) {
    ASSERT_EQ(build(b, kGet, false), Outcome::Ready);
    EXPECT_TRUE(b.addTrailer("x-ok", "1"));
    EXPECT_FALSE(b.addTrailer(name, value)) << name;
    EXPECT_EQ(b.trailersState(), Trailers::Malformed) << name;
    EXPECT_FALSE(b.malformation().empty()) << name;
    EXPECT_FALSE(b.addTrailer("x-later", "1"));  // stop feeding
  }

  // 300 bytes: 268 of x-a's value and name plus 32; one more is over, and nothing is kept.
  ASSERT_EQ(build(b, kGet, false), Outcome::Ready);
  EXPECT_TRUE(b.addTrailer("x-a", std::string(265, 'a')));
  EXPECT_EQ(b.trailersState(), Trailers::Ready);
  ASSERT_EQ(build(b, kGet, false), Outcome::Ready);
  EXPECT_TRUE(b.addTrailer("x-a", std::string(266, 'a')));
  EXPECT_EQ(b.trailersState(), Trailers::TooLarge);
  EXPECT_TRUE(b.addTrailer("X-Upper", "v"));  // past the bound nothing more is looked at
  EXPECT_EQ(b.trailersState(), Trailers::TooLarge);
  EXPECT_EQ(b.trailers().size(), 0u);

  // The next stream forgets them.
  ASSERT_EQ(build(b, kGet, false), Outcome::Ready);
  EXPECT_EQ(b.trailersState(), Trailers::None);
  EXPECT_EQ(b.trailers().size(), 0u);
}

TEST(Http2Request, ReuseForgetsThePreviousRequest) {
  Http2RequestBuilder b;
  ASSERT_EQ(build(b, with(kGet, {{"x-test", " bad"}})), Outcome::Malformed);
  ASSERT_EQ(build(b, with(kGet, {{"cookie", "c=3"}})), Outcome::Ready);
  EXPECT_EQ(b.head().headers.size(), 1u);
  EXPECT_EQ(b.head().headers.find("cookie"), "c=3");
}

}  // namespace
}  // namespace sluice::proxy::http
