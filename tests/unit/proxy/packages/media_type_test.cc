// media_type: the type of a Content-Type and whether an Accept list asks for a type, as the
// metadata path negotiates them (docs/packages.md#metadata): the filter picks its reader by the
// origin's type, and serves PEP 691 JSON only to a client that lists that type itself.
// Also: the Accept-Encoding readers of gzip_codec, whose list helpers now live in
// proxy/packages/field_lists.h (gzip_codec_test has their full table).

#include "proxy/packages/media_type.h"

#include <gtest/gtest.h>

#include <string_view>

#include "proxy/packages/field_lists.h"
#include "proxy/packages/gzip_codec.h"

namespace sluice::proxy::packages {
namespace {

// pip 23's Accept for a simple page (pip/_internal/index/collector.py).
constexpr std::string_view kPipAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01";
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kSimpleJson = "application/vnd.pypi.simple.v1+json";
constexpr std::string_view kSimpleHtml = "application/vnd.pypi.simple.v1+html";

TEST(MediaTypeOf, IsTheTypeWithoutParametersOrWhitespace) {
  const struct {
    std::string_view content_type;
    std::string_view type;
  } cases[] = {
      {"application/json", "application/json"},
      {"application/json; charset=utf-8", "application/json"},
      {"application/json;charset=utf-8;q=1", "application/json"},
      {"  text/html ;charset=utf-8", "text/html"},
      {"\ttext/html\t", "text/html"},
      {"text/html;", "text/html"},
      {"Application/JSON", "Application/JSON"},  // case kept: compared with iequals
      {"application/vnd.npm.install-v1+json; q=1.0", "application/vnd.npm.install-v1+json"},
      {"texthtml", ""},                            // no slash: no type
      {"texthtml; boundary=a/b", ""},              // a slash in a parameter is none of the type's
      {";charset=utf-8", ""},                      // parameters only
      {"   ", ""},                                 // whitespace only
      {"", ""},                                    // no Content-Type at all
      {"text/html\x01junk", "text/html\x01junk"},  // returned as is; callers check tokens
  };
  for (const auto& c : cases) {
    EXPECT_EQ(mediaTypeOf(c.content_type), c.type) << '"' << c.content_type << '"';
  }
}

TEST(AcceptListsMediaType, OnlyTheTypeItselfWithAWeightAboveZeroCounts) {
  const struct {
    std::string_view accept;
    std::string_view type;
    bool listed;
  } cases[] = {
      // Listed exactly, in any case, among others.
      {"application/json", kJson, true},
      {"APPLICATION/JSON", kJson, true},
      {"application/json", "Application/Json", true},
      {"text/html, application/json", kJson, true},
      {" text/html ,\tapplication/json\t", kJson, true},
      {",,application/json,,", kJson, true},
      // Weights: q=0 excludes, whatever else the list says; any weight above 0 counts.
      {"application/json;q=0", kJson, false},
      {"application/json; q=0", kJson, false},
      {"application/json ; Q=0", kJson, false},
      {"application/json;q=0.000", kJson, false},
      {"application/json, application/json;q=0", kJson, false},  // listed twice, once q=0
      {"application/json;q=0, application/json", kJson, false},
      {"application/json;q=0, application/json;q=1", kJson, false},
      {"application/json;q=0.001", kJson, true},
      {"application/json;q=0.5", kJson, true},
      {"application/json;q=1", kJson, true},
      {"application/json;q=1.000", kJson, true},
      // A malformed weight: the element is ignored, not read as q=0 nor as q=1.
      {"application/json;q=abc", kJson, false},
      {"application/json;q=", kJson, false},
      {"application/json;q=1.5", kJson, false},
      {"application/json;q=2", kJson, false},
      {"application/json;q=0.0001", kJson, false},
      {"application/json;q=-0", kJson, false},
      {"application/json;q=abc, application/json", kJson, true},  // the other element counts
      {"application/json;q=abc, application/json;q=0", kJson, false},
      // Wildcards name no type: a client that takes anything did not ask for this one.
      {"*/*", kJson, false},
      {"application/*", kJson, false},
      {"*/*;q=1, application/*;q=1", kSimpleJson, false},
      // Other parameters are ignored, before or after the weight.
      {"application/json;charset=utf-8", kJson, true},
      {"application/json; charset=utf-8; q=0", kJson, false},
      {"application/json;q=0.5;charset=utf-8", kJson, true},
      {"application/json;level=1", kJson, true},
      // A quoted parameter value is one value, whatever commas, semicolons or quotes it holds
      // (RFC 9110 §5.6.4): no type hides in it, and no weight.
      {"text/html;x=\"a,application/json\"", kJson, false},
      {"text/html;x=\"a\\\",application/json\"", kJson, false},
      {"text/html;x=\"a\", application/json", kJson, true},
      {"application/json;x=\"a;q=0\"", kJson, true},
      {"application/json;x=\"a,b\";q=0", kJson, false},
      {"text/html;x=\"unclosed, application/json", kJson, false},
      // Another type is not this one, however alike.
      {"application/jsonx", kJson, false},
      {"application/vnd.npm.install-v1+json", kJson, false},
      {"json", kJson, false},
      {"application/json", kSimpleJson, false},
      // Nothing listed.
      {"", kJson, false},
      {",, ,", kJson, false},
      {";q=1", kJson, false},
      // pip's own Accept: the three types it lists, nothing else.
      {kPipAccept, kSimpleJson, true},
      {kPipAccept, kSimpleHtml, true},
      {kPipAccept, "text/html", true},
      {kPipAccept, kJson, false},
      {kPipAccept, "text/plain", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(acceptListsMediaType(c.accept, c.type), c.listed)
        << '"' << c.accept << "\" for " << c.type;
  }
}

// The list helpers the two readers share (field_lists.h): whitespace, empty elements, quoted
// strings, weights.
TEST(FieldLists, ElementsAndWeights) {
  std::string elements;
  field_lists::forEachListElement(" a ,, b\t,c;q=0 ,", [&](std::string_view element) {
    elements += "[" + std::string(element) + "]";
    return true;
  });
  EXPECT_EQ(elements, "[a][b][c;q=0]");
  int seen = 0;
  field_lists::forEachListElement("a, b, c", [&](std::string_view) { return ++seen < 2; });
  EXPECT_EQ(seen, 2);  // stops when told
  elements.clear();
  field_lists::forEachListElement(R"(a;x="1,2", b;y="\",", c)", [&](std::string_view element) {
    elements += "[" + std::string(element) + "]";
    return true;
  });
  EXPECT_EQ(elements, R"x([a;x="1,2"][b;y="\","][c])x");  // quoted commas split nothing

  constexpr std::size_t kNone = std::string_view::npos;
  const struct {
    std::string_view text;
    std::size_t at;
  } delimiters[] = {
      {"a;b", 1},          {R"("a;b";c)", 5},
      {R"("a\";b";c)", 7},                // an escaped quote does not close
      {R"("a;b)", kNone},                 // unclosed: the rest is quoted
      {"", kNone},         {R"(\;)", 1},  // a backslash quotes only inside quotes
  };
  for (const auto& d : delimiters) {
    EXPECT_EQ(field_lists::findOutsideQuotes(d.text, ';'), d.at) << d.text;
  }

  const struct {
    std::string_view text;
    int thousandths;
  } weights[] = {
      {"0", 0},     {"0.", 0},       {"0.5", 500},  {"0.001", 1},   {"0.123", 123}, {"1", 1000},
      {"1.", 1000}, {"1.000", 1000}, {"1.001", -1}, {"0.0001", -1}, {"2", -1},      {"", -1},
      {".5", -1},   {"0,5", -1},     {"0.5a", -1},  {"01", -1},     {"-0", -1},     {" 0", -1},
  };
  for (const auto& w : weights) {
    EXPECT_EQ(field_lists::parseQvalue(w.text), w.thousandths) << '"' << w.text << '"';
  }
}

// gzip_codec's Accept-Encoding readers, on the helpers they now share (their full table is
// gzip_codec_test's AcceptEncoding.IdentityAndGzip).
TEST(AcceptEncodingAfterTheMove, IdentityAndGzipStillRead) {
  const struct {
    std::string_view value;
    bool identity;
    bool gzip;
  } cases[] = {
      {"", true, false},
      {"gzip, deflate, br", true, true},
      {" gzip ,\t*;q=0 ", false, true},
      {"identity;q=0, gzip;q=0.5", false, true},
      {"gzip;q=0, x-gzip", true, false},
      {"gzip;q=1.001", true, false},
      {"*;q=0", false, false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(acceptsIdentity(c.value), c.identity) << '"' << c.value << '"';
    EXPECT_EQ(acceptsGzip(c.value), c.gzip) << '"' << c.value << '"';
  }
}

}  // namespace
}  // namespace sluice::proxy::packages
