// package_metadata: which registry answers are held and filtered, the form a PyPI client is
// served, and what is served in the origin's place (docs/packages.md#metadata): refused
// versions gone, kept ones as the origin wrote them, and anything sluice cannot filter refused
// (package_metadata_invalid) rather than passed on; the origin's Content-Type is quoted in a
// refusal only when it is a clean token/token.

#include "proxy/runtime/package_metadata.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/package_request.h"
#include "proxy/packages/media_type.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/packages/version_judge.h"
#include "tests/unit/proxy/runtime/package_metadata_test_support.h"

namespace sluice::proxy {
namespace {

using policy::Ecosystem;
using policy::Reason;
using test_support::document;
using test_support::manifest;
using test_support::removedVersions;
using test_support::request;

constexpr std::string_view kMalNpm = "MAL-2025-1";
constexpr std::string_view kGhsaNpm = "GHSA-aaaa-bbbb-cccc";
constexpr std::string_view kMalPypi = "MAL-2025-2";
constexpr std::string_view kPipAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01";

packages::AdvisoryEntry entry(std::string_view id, Ecosystem ecosystem, std::string_view name,
                              std::string_view version) {
  packages::AdvisoryEntry e;
  e.id = std::string(id);
  e.malicious = id.starts_with("MAL-");
  e.ecosystem = ecosystem;
  e.name = std::string(name);
  e.versions = {std::string(version)};
  return e;
}

// left-pad 1.2.0 is malicious, 1.1.0 only vulnerable; foo-bar 2.0 (PyPI) is malicious.
const packages::AdvisoryIndex& advisories() {
  static const packages::AdvisoryIndex index({
      entry(kMalNpm, Ecosystem::Npm, "left-pad", "1.2.0"),
      entry(kGhsaNpm, Ecosystem::Npm, "left-pad", "1.1.0"),
      entry(kMalPypi, Ecosystem::Pypi, "foo-bar", "2.0"),
  });
  return index;
}

std::string packument() {
  std::string doc = R"({"_id":"left-pad","name":"left-pad","dist-tags":{"latest":"1.2.0"},)";
  doc += R"("versions":{"1.0.0":)" + manifest("1.0.0") + R"(,"1.1.0":)" + manifest("1.1.0") +
         R"(,"1.2.0":)" + manifest("1.2.0") + "},";
  doc += R"("time":{"created":"2020-01-01T00:00:00.000Z","1.0.0":"2020-01-01T00:00:00.000Z",)"
         R"("1.1.0":"2021-01-01T00:00:00.000Z","1.2.0":"2022-01-01T00:00:00.000Z"}})";
  return doc;
}

std::string simpleJson() {
  std::string doc = R"({"meta":{"api-version":"1.1"},"name":"foo-bar","files":[)";
  for (std::string_view file :
       {"foo_bar-1.0.tar.gz", "foo_bar-2.0.tar.gz", "foo_bar-2.0-py3-none-any.whl"}) {
    doc += std::string(doc.back() == '[' ? "" : ",") + R"({"filename":")" + std::string(file) +
           R"(","url":"https://files.example/p/)" + std::string(file) +
           R"(","hashes":{"sha256":"abcd"},"upload-time":"2020-01-01T00:00:00.000000Z"})";
  }
  return doc + R"(],"versions":["1.0","2.0"]})";
}

const std::string kSimpleHtml =
    "<!DOCTYPE html>\n<html>\n  <head>\n    <title>Links for foo-bar</title>\n  </head>\n"
    "  <body>\n    <h1>Links for foo-bar</h1>\n"
    "    <a href=\"https://h/p/foo_bar-1.0.tar.gz#sha256=ab12\">foo_bar-1.0.tar.gz</a><br />\n"
    "    <a href=\"https://h/p/foo_bar-2.0.tar.gz#sha256=ef56\">foo_bar-2.0.tar.gz</a><br />\n"
    "  </body>\n</html>\n";

ServedMetadata serve(const policy::PackageRequest& package, std::string_view content_type,
                     std::string_view text, SimplePageForm form = SimplePageForm::Json,
                     policy::AdvisoryBlock block = policy::AdvisoryBlock::Malicious) {
  policy::PackageSettings settings;
  settings.block = block;
  std::string doc = document(text);
  ServedMetadata out;
  out.detail = "stale";  // cleared by the call
  serveFilteredMetadata(settings, MetadataFacts{&advisories(), 0, nullptr}, package, content_type,
                        form, doc, out);
  return out;
}

TEST(FiltersMetadata, OnlyAGetOfMetadataOfAPackageAnAdvisoryNames) {
  const struct {
    const char* what;
    bool packages;
    bool advisories;
    Ecosystem ecosystem;
    std::string_view method;
    std::string_view target;
    policy::PackageRequestKind kind;  // what the target is read as (checked first)
    bool filtered;
  } cases[] = {
      {"npm packument", true, true, Ecosystem::Npm, "GET", "/left-pad",
       policy::PackageRequestKind::Metadata, true},
      {"npm version document", true, true, Ecosystem::Npm, "GET", "/left-pad/1.0.0",
       policy::PackageRequestKind::VersionMetadata, true},
      {"npm dist-tag document", true, true, Ecosystem::Npm, "GET", "/left-pad/latest",
       policy::PackageRequestKind::VersionMetadata, true},
      {"npm HEAD", true, true, Ecosystem::Npm, "HEAD", "/left-pad",
       policy::PackageRequestKind::Metadata, false},
      {"no packages", false, true, Ecosystem::Npm, "GET", "/left-pad",
       policy::PackageRequestKind::Metadata, false},
      {"no advisories", true, false, Ecosystem::Npm, "GET", "/left-pad",
       policy::PackageRequestKind::Metadata, false},
      {"npm package no advisory names", true, true, Ecosystem::Npm, "GET", "/right-pad",
       policy::PackageRequestKind::Metadata, false},
      {"npm tarball", true, true, Ecosystem::Npm, "GET", "/left-pad/-/left-pad-1.2.0.tgz",
       policy::PackageRequestKind::File, false},
      {"npm endpoint", true, true, Ecosystem::Npm, "GET", "/-/v1/search?text=left-pad",
       policy::PackageRequestKind::None, false},
      {"PyPI simple page", true, true, Ecosystem::Pypi, "GET", "/simple/foo-bar/",
       policy::PackageRequestKind::Metadata, true},
      {"PyPI simple page, other spelling", true, true, Ecosystem::Pypi, "GET", "/simple/Foo.Bar/",
       policy::PackageRequestKind::Metadata, true},
      {"PyPI simple page HEAD", true, true, Ecosystem::Pypi, "HEAD", "/simple/foo-bar/",
       policy::PackageRequestKind::Metadata, false},
      {"PyPI JSON API", true, true, Ecosystem::Pypi, "GET", "/pypi/foo-bar/json",
       policy::PackageRequestKind::Metadata, true},
      {"PyPI version JSON", true, true, Ecosystem::Pypi, "GET", "/pypi/foo-bar/2.0/json",
       policy::PackageRequestKind::VersionMetadata, true},
      {"PyPI version JSON HEAD", true, true, Ecosystem::Pypi, "HEAD", "/pypi/foo-bar/2.0/json",
       policy::PackageRequestKind::VersionMetadata, false},
      {"PyPI package no advisory names", true, true, Ecosystem::Pypi, "GET", "/simple/other/",
       policy::PackageRequestKind::Metadata, false},
      {"PyPI file", true, true, Ecosystem::Pypi, "GET", "/packages/ab/cd/foo_bar-2.0.tar.gz",
       policy::PackageRequestKind::File, false},
      {"PyPI index of projects", true, true, Ecosystem::Pypi, "GET", "/simple/",
       policy::PackageRequestKind::None, false},
  };
  for (const auto& c : cases) {
    policy::Policy policy;
    if (c.packages) {
      policy.packages.emplace();
    }
    const policy::PackageRequest package = request(c.ecosystem, c.target, c.method);
    EXPECT_EQ(package.kind, c.kind) << c.what;
    EXPECT_EQ(filtersMetadata(policy, c.advisories ? &advisories() : nullptr, package, c.method),
              c.filtered)
        << c.what;
  }
  // The ecosystem is part of the name: an npm "foo-bar" is not PyPI's.
  policy::Policy policy;
  policy.packages.emplace();
  EXPECT_FALSE(filtersMetadata(policy, &advisories(), request(Ecosystem::Npm, "/foo-bar"), "GET"));
}

TEST(SimplePageFormFor, JsonOnlyToAClientThatListsIt) {
  const struct {
    std::string_view accept;
    SimplePageForm form;
  } cases[] = {
      {kPipAccept, SimplePageForm::Json},
      {"application/vnd.pypi.simple.v1+json", SimplePageForm::Json},
      {"text/html", SimplePageForm::Html},
      {"application/vnd.pypi.simple.v1+html", SimplePageForm::HtmlV1},
      {"application/vnd.pypi.simple.v1+html, text/html;q=0.5", SimplePageForm::HtmlV1},
      {"", SimplePageForm::Html},
      {"*/*", SimplePageForm::Html},
      {"application/vnd.pypi.simple.v1+json;q=0", SimplePageForm::Html},
      {"application/vnd.pypi.simple.v1+json;q=0, application/vnd.pypi.simple.v1+html",
       SimplePageForm::HtmlV1},
      // PEP 691's alias for the newest JSON version, which v1 is.
      {"application/vnd.pypi.simple.latest+json", SimplePageForm::Json},
      {"application/vnd.pypi.simple.latest+json;q=0", SimplePageForm::Html},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(simplePageFormFor(c.accept), c.form) << '"' << c.accept << '"';
  }
}

TEST(ServeFilteredMetadata, NpmPackumentLosesTheMaliciousVersionUnderEitherType) {
  const policy::PackageRequest package = request(Ecosystem::Npm, "/left-pad");
  for (std::string_view type : {"application/json", "application/vnd.npm.install-v1+json"}) {
    const ServedMetadata served = serve(package, type, packument());
    ASSERT_EQ(served.reason, Reason::None) << type << ": " << served.detail;
    EXPECT_TRUE(served.detail.empty());
    EXPECT_EQ(served.content_type, type);
    ASSERT_EQ(served.removed.size(), 1u) << type;
    EXPECT_EQ(served.removed[0].version, "1.2.0");
    EXPECT_EQ(served.removed[0].reason, Reason::PackageMalicious);
    EXPECT_EQ(served.removed[0].advisory, kMalNpm);
    EXPECT_EQ(served.body.find("1.2.0"), std::string::npos) << served.body;
    EXPECT_NE(served.body.find(manifest("1.1.0")), std::string::npos);  // kept as written
    EXPECT_NE(served.body.find(R"("latest":"1.1.0")"), std::string::npos) << served.body;
  }
  // The origin's Content-Type as it was, parameters included: only versions were cut.
  EXPECT_EQ(serve(package, "Application/JSON; charset=utf-8", packument()).content_type,
            "Application/JSON; charset=utf-8");
}

TEST(ServeFilteredMetadata, BlockAllRemovesEveryAdvisorysVersion) {
  const policy::PackageRequest package = request(Ecosystem::Npm, "/left-pad");
  const ServedMetadata malicious = serve(package, "application/json", packument());
  EXPECT_EQ(removedVersions(malicious), std::vector<std::string>{"1.2.0"});
  EXPECT_NE(malicious.body.find(manifest("1.1.0")), std::string::npos);

  const ServedMetadata all = serve(package, "application/json", packument(), SimplePageForm::Json,
                                   policy::AdvisoryBlock::All);
  ASSERT_EQ(all.reason, Reason::None) << all.detail;
  EXPECT_EQ(removedVersions(all), (std::vector<std::string>{"1.1.0", "1.2.0"}));
  EXPECT_EQ(all.removed[0].reason, Reason::PackageMalicious);
  EXPECT_EQ(all.removed[0].advisory, kGhsaNpm);
  EXPECT_EQ(all.body.find("1.1.0"), std::string::npos) << all.body;
  EXPECT_NE(all.body.find(R"("latest":"1.0.0")"), std::string::npos) << all.body;
}

TEST(ServeFilteredMetadata, WithoutAdvisoriesNothingIsRemoved) {
  policy::PackageSettings settings;
  std::string doc = document(packument());
  ServedMetadata out;
  serveFilteredMetadata(settings, MetadataFacts{}, request(Ecosystem::Npm, "/left-pad"),
                        "application/json", SimplePageForm::Json, doc, out);
  ASSERT_EQ(out.reason, Reason::None) << out.detail;
  EXPECT_TRUE(out.removed.empty());
  EXPECT_NE(out.body.find(manifest("1.2.0")), std::string::npos);
}

// A document under a type it is not is refused; the origin's type is quoted only when it is a
// clean token/token of at most 64 bytes, so no origin can write into the refusal's body or log.
TEST(ServeFilteredMetadata, AWrongTypeIsRefusedAndQuotedOnlyWhenClean) {
  const std::string long_clean = "application/" + std::string(64 - 12, 'x');  // 64 bytes
  const std::string too_long = long_clean + "x";
  const struct {
    std::string content_type;
    std::optional<std::string> quoted;  // nullopt: not quoted
  } cases[] = {
      {"text/html", "text/html"},
      {"text/html; charset=utf-8", "text/html"},
      {"TEXT/Plain", "TEXT/Plain"},
      {long_clean, long_clean},
      {too_long, std::nullopt},
      {"", std::nullopt},
      {"json", std::nullopt},
      {"text/", std::nullopt},
      {"/html", std::nullopt},
      {"text/html/x", std::nullopt},
      {"text/ht ml", std::nullopt},
      {"text/html\x01\r\nX-Evil: 1", std::nullopt},
      {"text/\x7f" + std::string(300, 'a'), std::nullopt},
  };
  const policy::PackageRequest package = request(Ecosystem::Npm, "/left-pad");
  for (const auto& c : cases) {
    const ServedMetadata served = serve(package, c.content_type, packument());
    EXPECT_EQ(served.reason, Reason::PackageMetadataInvalid) << c.content_type;
    EXPECT_TRUE(served.body.empty());
    EXPECT_NE(served.detail.find("packument of npm package 'left-pad'"), std::string::npos)
        << served.detail;
    EXPECT_NE(served.detail.find("docs/packages.md#metadata"), std::string::npos);
    if (c.quoted) {
      EXPECT_NE(served.detail.find("it came as '" + *c.quoted + "', not a type"), std::string::npos)
          << served.detail;
    } else {
      EXPECT_NE(served.detail.find("its Content-Type is not a type of that document"),
                std::string::npos)
          << served.detail;
      EXPECT_EQ(served.detail.find("Evil"), std::string::npos);
      EXPECT_EQ(served.detail.find("aaaa"), std::string::npos);
    }
    for (char ch : served.detail) {
      EXPECT_GE(static_cast<unsigned char>(ch), 0x20) << served.detail;
      EXPECT_NE(ch, '\x7f');
    }
  }
  // The other readers refuse a wrong type alike.
  EXPECT_EQ(
      serve(request(Ecosystem::Npm, "/left-pad/latest"), "text/html", manifest("1.0.0")).reason,
      Reason::PackageMetadataInvalid);
  const ServedMetadata page =
      serve(request(Ecosystem::Pypi, "/simple/foo-bar/"), "application/json", simpleJson());
  EXPECT_EQ(page.reason, Reason::PackageMetadataInvalid);
  EXPECT_NE(page.detail.find("simple page of pypi package 'foo-bar'"), std::string::npos)
      << page.detail;
}

TEST(ServeFilteredMetadata, NpmVersionDocumentIsRefusedOrServedUnchanged) {
  // The tag names the malicious version: refused with its reason and advisory.
  const ServedMetadata refused =
      serve(request(Ecosystem::Npm, "/left-pad/latest"), "application/json", manifest("1.2.0"));
  EXPECT_EQ(refused.reason, Reason::PackageMalicious);
  EXPECT_EQ(refused.advisory, kMalNpm);
  EXPECT_TRUE(refused.body.empty());
  EXPECT_NE(refused.detail.find("'left-pad' 1.2.0"), std::string::npos) << refused.detail;
  EXPECT_NE(refused.detail.find("'latest'"), std::string::npos) << refused.detail;
  EXPECT_NE(refused.detail.find(kMalNpm), std::string::npos) << refused.detail;

  // The document names the version, whatever the URL did: an origin that answers a request
  // for 1.0.0 with 1.2.0's manifest is refused too.
  const ServedMetadata swapped =
      serve(request(Ecosystem::Npm, "/left-pad/1.0.0"), "application/json", manifest("1.2.0"));
  EXPECT_EQ(swapped.reason, Reason::PackageMalicious);
  EXPECT_NE(swapped.detail.find("1.2.0 (the version '1.0.0' names)"), std::string::npos)
      << swapped.detail;

  // A kept version (1.1.0 is only vulnerable, and `block` is `malicious`): as the origin sent it.
  const std::string kept = manifest("1.1.0");
  const ServedMetadata served =
      serve(request(Ecosystem::Npm, "/left-pad/latest"), "application/json; charset=utf-8", kept);
  ASSERT_EQ(served.reason, Reason::None) << served.detail;
  EXPECT_EQ(served.body, kept);
  EXPECT_EQ(served.content_type, "application/json; charset=utf-8");
  EXPECT_TRUE(served.removed.empty());
  EXPECT_TRUE(served.advisory.empty());

  // ... and refused under `block: all`.
  const ServedMetadata all = serve(request(Ecosystem::Npm, "/left-pad/1.1.0"), "application/json",
                                   kept, SimplePageForm::Json, policy::AdvisoryBlock::All);
  EXPECT_EQ(all.reason, Reason::PackageMalicious);
  EXPECT_EQ(all.advisory, kGhsaNpm);
}

TEST(ServeFilteredMetadata, PypiJsonIsServedInTheFormTheClientAskedFor) {
  const struct {
    SimplePageForm form;
    std::string_view content_type;
    std::string_view starts_with;
  } cases[] = {
      {SimplePageForm::Json, "application/vnd.pypi.simple.v1+json", "{"},
      {SimplePageForm::HtmlV1, "application/vnd.pypi.simple.v1+html", "<!DOCTYPE html>"},
      {SimplePageForm::Html, "text/html; charset=utf-8", "<!DOCTYPE html>"},
  };
  const policy::PackageRequest package = request(Ecosystem::Pypi, "/simple/Foo.Bar/");
  for (const auto& c : cases) {
    const ServedMetadata served =
        serve(package, "application/vnd.pypi.simple.v1+json", simpleJson(), c.form);
    ASSERT_EQ(served.reason, Reason::None) << c.content_type << ": " << served.detail;
    EXPECT_EQ(served.content_type, c.content_type);
    EXPECT_TRUE(served.body.starts_with(c.starts_with)) << served.body;
    EXPECT_EQ(served.body.find("foo_bar-2.0"), std::string::npos) << served.body;
    EXPECT_NE(served.body.find("foo_bar-1.0.tar.gz"), std::string::npos) << served.body;
    ASSERT_EQ(served.removed.size(), 1u);
    EXPECT_EQ(served.removed[0].version, "2.0");
    EXPECT_EQ(served.removed[0].reason, Reason::PackageMalicious);
    EXPECT_EQ(served.removed[0].advisory, kMalPypi);
  }
}

TEST(ServeFilteredMetadata, PypiHtmlFromTheOriginIsFilteredAsHtml) {
  const policy::PackageRequest package = request(Ecosystem::Pypi, "/simple/foo-bar/");
  for (std::string_view type :
       {"text/html", "text/html; charset=utf-8", "application/vnd.pypi.simple.v1+html"}) {
    // Whatever the client asked for: an origin without JSON has only its HTML to give.
    for (SimplePageForm form : {SimplePageForm::Json, SimplePageForm::Html}) {
      const ServedMetadata served = serve(package, type, kSimpleHtml, form);
      ASSERT_EQ(served.reason, Reason::None) << type << ": " << served.detail;
      EXPECT_EQ(served.content_type, type);  // the origin's, as it was
      EXPECT_EQ(served.body.find("foo_bar-2.0"), std::string::npos) << served.body;
      EXPECT_NE(served.body.find("foo_bar-1.0.tar.gz</a>"), std::string::npos) << served.body;
      EXPECT_EQ(removedVersions(served), std::vector<std::string>{"2.0"});
    }
  }
}

// PyPI's JSON API (docs/packages.md#metadata): the package's document loses the release an
// advisory names, `info` kept as it was; a version's document is served, or refused with the
// reason of the version it describes; another type is refused.
TEST(ServeFilteredMetadata, PypiJsonApiLosesWhatAnAdvisoryNames) {
  const std::vector<test_support::JsonApiRelease> releases = {
      {"1.0", {{"foo_bar-1.0.tar.gz", "2020-01-01T00:00:00.000000Z"}}},
      {"2.0",
       {{"foo_bar-2.0.tar.gz", "2021-01-01T00:00:00.000000Z"},
        {"foo_bar-2.0-py3-none-any.whl", "2021-01-01T00:00:00.000000Z"}}}};
  const ServedMetadata package =
      serve(request(Ecosystem::Pypi, "/pypi/foo-bar/json"), "application/json",
            test_support::pypiJsonApi("2.0", releases, true));
  ASSERT_EQ(package.reason, Reason::None) << package.detail;
  EXPECT_EQ(package.content_type, "application/json");
  EXPECT_EQ(removedVersions(package), std::vector<std::string>{"2.0"});
  EXPECT_EQ(package.removed[0].advisory, kMalPypi);
  EXPECT_EQ(package.body.find("foo_bar-2.0"), std::string::npos) << package.body;
  EXPECT_NE(package.body.find(R"("releases":{"1.0":[{"filename":"foo_bar-1.0.tar.gz")"),
            std::string::npos)
      << package.body;
  EXPECT_NE(package.body.find(R"("info":{"name":"foo-bar","version":"2.0","summary":"s"})"),
            std::string::npos)
      << package.body;
  EXPECT_NE(package.body.find(R"("urls":[])"), std::string::npos) << package.body;

  const ServedMetadata kept =
      serve(request(Ecosystem::Pypi, "/pypi/foo-bar/1.0/json"), "application/json; charset=utf-8",
            test_support::pypiJsonApi("1.0", releases, false));
  ASSERT_EQ(kept.reason, Reason::None) << kept.detail;
  EXPECT_EQ(kept.content_type, "application/json; charset=utf-8");
  EXPECT_NE(kept.body.find("foo_bar-1.0.tar.gz"), std::string::npos) << kept.body;
  EXPECT_TRUE(kept.removed.empty());

  const ServedMetadata refused =
      serve(request(Ecosystem::Pypi, "/pypi/foo-bar/2.0.0/json"), "application/json",
            test_support::pypiJsonApi("2.0", releases, false));
  EXPECT_EQ(refused.reason, Reason::PackageMalicious);
  EXPECT_EQ(refused.advisory, kMalPypi);
  EXPECT_TRUE(refused.body.empty());
  EXPECT_EQ(refused.detail,
            "pypi package 'foo-bar' 2.0 (the version '2.0.0' names) is named by "
            "advisory MAL-2025-2");

  const ServedMetadata html = serve(request(Ecosystem::Pypi, "/pypi/foo-bar/json"), "text/html",
                                    test_support::pypiJsonApi("2.0", releases, true));
  EXPECT_EQ(html.reason, Reason::PackageMetadataInvalid);
  EXPECT_NE(html.detail.find("JSON API document"), std::string::npos) << html.detail;
  EXPECT_NE(html.detail.find("'foo-bar'"), std::string::npos) << html.detail;
}

TEST(ServeFilteredMetadata, AMalformedDocumentIsRefusedWithWhereItBroke) {
  const struct {
    Ecosystem ecosystem;
    std::string_view target;
    std::string_view content_type;
    std::string text;
  } cases[] = {
      {Ecosystem::Npm, "/left-pad", "application/json", R"({"versions":{"1.0.0":)"},
      {Ecosystem::Npm, "/left-pad", "application/json", "not json"},
      {Ecosystem::Npm, "/left-pad", "application/json", R"({"versions":{},"versions":{}})"},
      {Ecosystem::Npm, "/left-pad/latest", "application/json", R"({"version":)"},
      {Ecosystem::Pypi, "/simple/foo-bar/", "application/vnd.pypi.simple.v1+json",
       simpleJson().substr(0, 40)},
      {Ecosystem::Pypi, "/simple/foo-bar/", "text/html", "<html><script>x</script></html>"},
  };
  for (const auto& c : cases) {
    const policy::PackageRequest package = request(c.ecosystem, c.target);
    policy::PackageSettings settings;
    std::string doc = document(c.text);
    ServedMetadata out;
    serveFilteredMetadata(settings, MetadataFacts{&advisories(), 0, nullptr}, package,
                          c.content_type, SimplePageForm::Json, doc, out);
    EXPECT_EQ(out.reason, Reason::PackageMetadataInvalid) << c.text;
    EXPECT_NE(out.detail.find("at byte"), std::string::npos) << out.detail;
    EXPECT_NE(out.detail.find("cannot be filtered"), std::string::npos) << out.detail;
    EXPECT_TRUE(out.body.empty());
    EXPECT_EQ(doc, c.text);  // the padding is taken off again
  }
}

TEST(ServeFilteredMetadata, EachCallStartsFromNothing) {
  ServedMetadata out;
  policy::PackageSettings settings;
  std::string doc = document(packument());
  serveFilteredMetadata(settings, MetadataFacts{&advisories(), 0, nullptr},
                        request(Ecosystem::Npm, "/left-pad"), "application/json",
                        SimplePageForm::Json, doc, out);
  ASSERT_EQ(out.removed.size(), 1u);
  std::string refused = document(manifest("1.2.0"));
  serveFilteredMetadata(settings, MetadataFacts{&advisories(), 0, nullptr},
                        request(Ecosystem::Npm, "/left-pad/latest"), "application/json",
                        SimplePageForm::Json, refused, out);
  EXPECT_EQ(out.reason, Reason::PackageMalicious);
  EXPECT_TRUE(out.removed.empty());
  EXPECT_TRUE(out.body.empty());
  EXPECT_TRUE(out.content_type.empty());
}

}  // namespace
}  // namespace sluice::proxy
