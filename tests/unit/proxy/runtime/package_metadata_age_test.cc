// package_metadata with the age rule (docs/packages.md#the-age-rule): the metadata of every
// package `min_age` applies to is filtered, advisories or not; a version younger than the age
// leaves it (package_too_new), and so does one the document gives no time for unless the
// sandbox learned an old enough time before; every time the document gives is handed back to
// be learned. (package_metadata_test.cc has the advisories' side.)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/package_request.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/packages/version_judge.h"
#include "proxy/runtime/package_metadata.h"
#include "tests/unit/proxy/runtime/package_metadata_test_support.h"

namespace sluice::proxy {
namespace {

using policy::Ecosystem;
using policy::Reason;
using test_support::document;
using test_support::manifest;
using test_support::removedVersions;
using test_support::request;
using Published = std::vector<std::pair<std::string, std::int64_t>>;

constexpr std::int64_t kNow = 1767225600000;  // 2026-01-01T00:00:00Z
constexpr std::int64_t kHour = 60LL * 60 * 1000;
constexpr std::int64_t kDay = 24 * kHour;
constexpr std::chrono::milliseconds kWeek{7 * kDay};

// The times the documents below give, as the origin writes them, and what they are.
constexpr std::string_view kMonthAgo = "2025-12-02T00:00:00.000Z";
constexpr std::int64_t kMonthAgoMs = kNow - 30 * kDay;
constexpr std::string_view kWeekAgo = "2025-12-25T00:00:00.000Z";  // exactly min_age: old enough
constexpr std::int64_t kWeekAgoMs = kNow - 7 * kDay;
constexpr std::string_view kJustUnderAWeek = "2025-12-25T00:00:00.001Z";
constexpr std::int64_t kJustUnderAWeekMs = kNow - 7 * kDay + 1;
constexpr std::string_view kHourAgo = "2025-12-31T23:00:00.000Z";
constexpr std::int64_t kHourAgoMs = kNow - kHour;
constexpr std::string_view kTwoHoursAgo = "2025-12-31T22:00:00.000000Z";
constexpr std::int64_t kTwoHoursAgoMs = kNow - 2 * kHour;

policy::PackageSettings ageSettings(std::vector<std::string_view> exempt = {}) {
  policy::PackageSettings settings;
  settings.min_age = kWeek;
  for (std::string_view text : exempt) {
    settings.exempt.push_back(policy::PackagePattern::parse(text).value());
  }
  return settings;
}

// The sandbox learned before: left-pad 1.0.1 is a month old, and so (it once said) is 1.3.0;
// foo-bar 3.0 and 1.0 are a month old, and so are the files foo_bar-3.0.tar.gz and
// foo_bar-1.0.tar.gz (but not foo_bar-3.0-py3-none-any.whl).
const PublishTimes& known() {
  static PublishTimes times;
  static const bool learned = [] {
    times.learn(Ecosystem::Npm, "left-pad", Published{{"1.0.1", kMonthAgoMs}, {"1.3.0", 0}});
    times.learn(Ecosystem::Pypi, "foo-bar", Published{{"3.0", kMonthAgoMs}, {"1.0", kMonthAgoMs}});
    times.learnPypiFiles("foo-bar", Published{{"foo_bar-3.0.tar.gz", kMonthAgoMs},
                                              {"foo_bar-1.0.tar.gz", kMonthAgoMs}});
    return true;
  }();
  EXPECT_TRUE(learned);
  return times;
}

ServedMetadata serve(const policy::PackageSettings& settings, const policy::PackageRequest& package,
                     std::string_view content_type, std::string_view text,
                     SimplePageForm form = SimplePageForm::Json,
                     const packages::AdvisoryIndex* advisories = nullptr) {
  std::string doc = document(text);
  ServedMetadata out;
  serveFilteredMetadata(settings, MetadataFacts{advisories, kNow, &known()}, package, content_type,
                        form, doc, out);
  return out;
}

TEST(FiltersMetadata, EveryPackageTheAgeRuleAppliesTo) {
  const struct {
    const char* what;
    std::vector<std::string_view> exempt;
    bool min_age;
    Ecosystem ecosystem;
    std::string_view method;
    std::string_view target;
    bool filtered;
  } cases[] = {
      {"npm packument", {}, true, Ecosystem::Npm, "GET", "/left-pad", true},
      {"npm version document", {}, true, Ecosystem::Npm, "GET", "/left-pad/1.0.0", true},
      {"npm dist-tag document", {}, true, Ecosystem::Npm, "GET", "/left-pad/latest", true},
      {"npm HEAD", {}, true, Ecosystem::Npm, "HEAD", "/left-pad", false},
      {"npm tarball", {}, true, Ecosystem::Npm, "GET", "/left-pad/-/left-pad-1.0.0.tgz", false},
      {"no min_age", {}, false, Ecosystem::Npm, "GET", "/left-pad", false},
      {"exempt name", {"left-pad"}, true, Ecosystem::Npm, "GET", "/left-pad", false},
      {"exempt scope", {"@myorg/*"}, true, Ecosystem::Npm, "GET", "/@myorg%2futil", false},
      {"exempt elsewhere", {"@myorg/*"}, true, Ecosystem::Npm, "GET", "/left-pad", true},
      {"PyPI simple page", {}, true, Ecosystem::Pypi, "GET", "/simple/foo-bar/", true},
      {"PyPI JSON API", {}, true, Ecosystem::Pypi, "GET", "/pypi/foo-bar/json", true},
      {"PyPI version JSON", {}, true, Ecosystem::Pypi, "GET", "/pypi/foo-bar/2.0/json", true},
      {"PyPI exempt, other spelling",
       {"My_Pkg"},
       true,
       Ecosystem::Pypi,
       "GET",
       "/simple/My.Pkg/",
       false},
      {"PyPI file", {}, true, Ecosystem::Pypi, "GET", "/packages/ab/cd/foo_bar-2.0.tar.gz", false},
  };
  for (const auto& c : cases) {
    policy::Policy policy;
    policy.packages = ageSettings(c.exempt);
    if (!c.min_age) {
      policy.packages->min_age = std::chrono::milliseconds(0);
    }
    EXPECT_EQ(filtersMetadata(policy, nullptr, request(c.ecosystem, c.target, c.method), c.method),
              c.filtered)
        << c.what;
  }
}

// left-pad: 1.0.0 a month old, 1.0.1 and 1.0.2 with no time (the sandbox learned 1.0.1's),
// 1.1.0 exactly a week, 1.2.0 a millisecond less, 1.3.0 an hour (the document's time, not
// what was learned before, is the one judged).
std::string agedPackument() {
  std::string doc = R"({"_id":"left-pad","name":"left-pad","dist-tags":{"latest":"1.3.0"},)";
  doc += R"("versions":{)";
  for (std::string_view version : {"1.0.0", "1.0.1", "1.0.2", "1.1.0", "1.2.0", "1.3.0"}) {
    doc += std::string(doc.back() == '{' ? "" : ",") + '"' + std::string(version) +
           "\":" + manifest(version);
  }
  doc += R"(},"time":{"created":"2020-01-01T00:00:00.000Z","1.0.0":")" + std::string(kMonthAgo) +
         R"(","1.1.0":")" + std::string(kWeekAgo) + R"(","1.2.0":")" +
         std::string(kJustUnderAWeek) + R"(","1.3.0":")" + std::string(kHourAgo) +
         R"(","modified":")" + std::string(kHourAgo) + R"("}})";
  return doc;
}

TEST(ServeFilteredMetadata, NpmPackumentLosesVersionsYoungerThanMinAge) {
  const ServedMetadata served = serve(ageSettings(), request(Ecosystem::Npm, "/left-pad"),
                                      "application/json", agedPackument());
  ASSERT_EQ(served.reason, Reason::None) << served.detail;
  EXPECT_EQ(removedVersions(served), (std::vector<std::string>{"1.0.2", "1.2.0", "1.3.0"}));
  for (const packages::RemovedVersion& removed : served.removed) {
    EXPECT_EQ(removed.reason, Reason::PackageTooNew) << removed.version;
    EXPECT_TRUE(removed.advisory.empty()) << removed.version;
  }
  for (std::string_view gone : {std::string_view("1.0.2"), std::string_view("1.2.0"),
                                std::string_view("1.3.0"), kJustUnderAWeek}) {
    EXPECT_EQ(served.body.find(gone), std::string::npos) << gone << ": " << served.body;
  }
  for (std::string_view version : {"1.0.0", "1.0.1", "1.1.0"}) {
    EXPECT_NE(served.body.find(manifest(version)), std::string::npos) << version;
  }
  EXPECT_NE(served.body.find(R"("latest":"1.1.0")"), std::string::npos) << served.body;
  // Every time the document gave for a version, kept or not, in its order: for PublishTimes.
  EXPECT_EQ(served.published, (Published{{"1.0.0", kMonthAgoMs},
                                         {"1.1.0", kWeekAgoMs},
                                         {"1.2.0", kJustUnderAWeekMs},
                                         {"1.3.0", kHourAgoMs}}));
}

TEST(ServeFilteredMetadata, AgeRuleWithAdvisoriesAndExemptions) {
  // An advisory is judged first: its reason and id, not the age.
  const packages::AdvisoryIndex advisories({[] {
    packages::AdvisoryEntry e;
    e.id = "MAL-2025-1";
    e.malicious = true;
    e.ecosystem = Ecosystem::Npm;
    e.name = "left-pad";
    e.versions = {"1.3.0"};
    return e;
  }()});
  const ServedMetadata both =
      serve(ageSettings(), request(Ecosystem::Npm, "/left-pad"), "application/json",
            agedPackument(), SimplePageForm::Json, &advisories);
  ASSERT_EQ(both.reason, Reason::None) << both.detail;
  ASSERT_EQ(removedVersions(both), (std::vector<std::string>{"1.0.2", "1.2.0", "1.3.0"}));
  EXPECT_EQ(both.removed[2].reason, Reason::PackageMalicious);
  EXPECT_EQ(both.removed[2].advisory, "MAL-2025-1");
  EXPECT_EQ(both.published.size(), 4u);

  // An exempt name loses no version to the age, and its times are still handed back.
  const ServedMetadata exempt =
      serve(ageSettings({"left-pad"}), request(Ecosystem::Npm, "/left-pad"), "application/json",
            agedPackument());
  ASSERT_EQ(exempt.reason, Reason::None) << exempt.detail;
  EXPECT_TRUE(exempt.removed.empty());
  EXPECT_NE(exempt.body.find(R"("latest":"1.3.0")"), std::string::npos) << exempt.body;
  EXPECT_EQ(exempt.published.size(), 4u);
}

TEST(ServeFilteredMetadata, NpmVersionDocumentIsJudgedByTheTimeLearned) {
  const struct {
    const char* what;
    std::string_view target;
    std::string version;  // the one the document names
    Reason reason;
  } cases[] = {
      {"a tag naming a version learned an hour old", "/left-pad/latest", "1.2.0",
       Reason::PackageTooNew},
      {"a tag naming a version learned a month old", "/left-pad/latest", "1.0.1", Reason::None},
      {"a version never learned", "/left-pad/9.0.0", "9.0.0", Reason::PackageTooNew},
  };
  // The sandbox learned 1.2.0's time from a packument an hour ago.
  PublishTimes times;
  times.learn(Ecosystem::Npm, "left-pad", Published{{"1.2.0", kHourAgoMs}, {"1.0.1", kMonthAgoMs}});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string text = manifest(c.version);
    std::string doc = document(text);
    ServedMetadata out;
    serveFilteredMetadata(ageSettings(), MetadataFacts{nullptr, kNow, &times},
                          request(Ecosystem::Npm, c.target), "application/json",
                          SimplePageForm::Json, doc, out);
    EXPECT_EQ(out.reason, c.reason) << out.detail;
    EXPECT_TRUE(out.published.empty());  // a version document gives no time
    EXPECT_TRUE(out.advisory.empty());
    if (c.reason == Reason::None) {
      EXPECT_EQ(out.body, text);
      continue;
    }
    EXPECT_TRUE(out.body.empty());
    const std::string named(c.target.substr(c.target.rfind('/') + 1));
    EXPECT_EQ(out.detail, "npm package 'left-pad' " + c.version + " (the version '" + named +
                              "' names) is younger than packages.min_age, or sluice does not "
                              "know its age");
  }
}

std::string simpleFile(std::string_view file, std::optional<std::string_view> uploaded) {
  std::string out = R"({"filename":")" + std::string(file) +
                    R"(","url":"https://files.example/p/)" + std::string(file) +
                    R"(","hashes":{"sha256":"abcd"})";
  if (uploaded) {
    out += R"(,"upload-time":")" + std::string(*uploaded) + '"';
  }
  return out + "}";
}

// foo-bar: 1.0 a month old; 1.5's wheel a month and its sdist an hour (added to the release
// since); 2.0's an hour and two; 3.0 and 4.0 without upload-time (the sandbox learned 3.0's
// sdist is a month old, and nothing of its wheel).
std::string agedSimpleJson() {
  std::string doc = R"({"meta":{"api-version":"1.1"},"name":"foo-bar","files":[)";
  doc += simpleFile("foo_bar-1.0.tar.gz", kMonthAgo) + ",";
  doc += simpleFile("foo_bar-1.5.tar.gz", kHourAgo) + ",";
  doc += simpleFile("foo_bar-1.5-py3-none-any.whl", "2025-12-02T00:00:00.000000Z") + ",";
  doc += simpleFile("foo_bar-2.0.tar.gz", kHourAgo) + ",";
  doc += simpleFile("foo_bar-2.0-py3-none-any.whl", kTwoHoursAgo) + ",";
  doc += simpleFile("foo_bar-3.0.tar.gz", std::nullopt) + ",";
  doc += simpleFile("foo_bar-3.0-py3-none-any.whl", std::nullopt) + ",";
  doc += simpleFile("foo_bar-4.0.tar.gz", std::nullopt);
  return doc + R"(],"versions":["1.0","1.5","2.0","3.0","4.0"]})";
}

TEST(ServeFilteredMetadata, PypiPageLosesFilesUploadedWithinMinAge) {
  for (SimplePageForm form : {SimplePageForm::Json, SimplePageForm::Html}) {
    const ServedMetadata served =
        serve(ageSettings(), request(Ecosystem::Pypi, "/simple/Foo_Bar/"),
              "application/vnd.pypi.simple.v1+json", agedSimpleJson(), form);
    ASSERT_EQ(served.reason, Reason::None) << served.detail;
    EXPECT_EQ(removedVersions(served), (std::vector<std::string>{"1.5", "2.0", "3.0", "4.0"}));
    for (const packages::RemovedVersion& removed : served.removed) {
      EXPECT_EQ(removed.reason, Reason::PackageTooNew) << removed.version;
      EXPECT_TRUE(removed.advisory.empty());
      // 1.5 and 3.0 keep a file each: they stay listed.
      EXPECT_EQ(removed.whole, removed.version == "2.0" || removed.version == "4.0")
          << removed.version;
    }
    for (std::string_view gone :
         {"foo_bar-1.5.tar.gz", "foo_bar-2.0", "foo_bar-3.0-py3", "foo_bar-4.0"}) {
      EXPECT_EQ(served.body.find(gone), std::string::npos) << gone << ": " << served.body;
    }
    for (std::string_view file :
         {"foo_bar-1.0.tar.gz", "foo_bar-1.5-py3-none-any.whl", "foo_bar-3.0.tar.gz"}) {
      EXPECT_NE(served.body.find(file), std::string::npos) << file << ": " << served.body;
    }
    if (form == SimplePageForm::Json) {
      EXPECT_NE(served.body.find(R"("versions":["1.0","1.5","3.0"])"), std::string::npos)
          << served.body;
    }
    // One time per version, the earliest of its files; and each file's own.
    EXPECT_EQ(served.published,
              (Published{{"1.0", kMonthAgoMs}, {"1.5", kMonthAgoMs}, {"2.0", kTwoHoursAgoMs}}));
    EXPECT_EQ(served.uploaded, (Published{{"foo_bar-1.0.tar.gz", kMonthAgoMs},
                                          {"foo_bar-1.5.tar.gz", kHourAgoMs},
                                          {"foo_bar-1.5-py3-none-any.whl", kMonthAgoMs},
                                          {"foo_bar-2.0.tar.gz", kHourAgoMs},
                                          {"foo_bar-2.0-py3-none-any.whl", kTwoHoursAgoMs}}));
  }
}

TEST(ServeFilteredMetadata, PypiHtmlHasNoTimesOnlyLearnedOnes) {
  const std::string html =
      "<!DOCTYPE html>\n<html>\n  <body>\n"
      "    <a href=\"https://h/p/foo_bar-1.0.tar.gz#sha256=ab12\">foo_bar-1.0.tar.gz</a><br />\n"
      "    <a href=\"https://h/p/foo_bar-2.0.tar.gz#sha256=ef56\">foo_bar-2.0.tar.gz</a><br />\n"
      "    <a href=\"https://h/p/foo_bar-3.0-py3-none-any.whl\">foo_bar-3.0-py3-none-any.whl</a>"
      "<br />\n"
      "  </body>\n</html>\n";
  const ServedMetadata served =
      serve(ageSettings(), request(Ecosystem::Pypi, "/simple/foo-bar/"), "text/html", html);
  ASSERT_EQ(served.reason, Reason::None) << served.detail;
  // 3.0 is known a month old, but not this file of it: the file goes, and so the version.
  EXPECT_EQ(removedVersions(served), (std::vector<std::string>{"2.0", "3.0"}));
  EXPECT_EQ(served.removed[0].reason, Reason::PackageTooNew);
  EXPECT_NE(served.body.find("foo_bar-1.0.tar.gz</a>"), std::string::npos) << served.body;
  EXPECT_EQ(served.body.find("foo_bar-2.0"), std::string::npos) << served.body;
  EXPECT_EQ(served.body.find("foo_bar-3.0"), std::string::npos) << served.body;
  EXPECT_TRUE(served.published.empty());
  EXPECT_TRUE(served.uploaded.empty());
}

// PyPI's JSON API under the age rule (docs/packages.md#the-age-rule): a release too new goes,
// a late file of an old release goes alone, every upload time is handed back to be learned; a
// version's document of a release too new is refused.
TEST(ServeFilteredMetadata, PypiJsonApiLosesWhatIsTooNew) {
  const std::vector<test_support::JsonApiRelease> releases = {
      {"1.0", {{"foo_bar-1.0.tar.gz", kMonthAgo}, {"foo_bar-1.0-cp312-none-any.whl", kHourAgo}}},
      {"2.0", {{"foo_bar-2.0.tar.gz", kTwoHoursAgo}}}};
  const ServedMetadata package =
      serve(ageSettings(), request(Ecosystem::Pypi, "/pypi/foo-bar/json"), "application/json",
            test_support::pypiJsonApi("2.0", releases, true));
  ASSERT_EQ(package.reason, Reason::None) << package.detail;
  EXPECT_EQ(removedVersions(package), (std::vector<std::string>{"1.0", "2.0"}));
  EXPECT_FALSE(package.removed[0].whole);  // 1.0 kept its sdist
  EXPECT_TRUE(package.removed[1].whole);
  EXPECT_NE(package.body.find(R"("releases":{"1.0":[{"filename":"foo_bar-1.0.tar.gz")"),
            std::string::npos)
      << package.body;
  EXPECT_EQ(package.body.find("cp312"), std::string::npos) << package.body;
  EXPECT_EQ(package.body.find("foo_bar-2.0"), std::string::npos) << package.body;
  EXPECT_EQ(package.uploaded, (Published{{"foo_bar-1.0.tar.gz", kMonthAgoMs},
                                         {"foo_bar-1.0-cp312-none-any.whl", kHourAgoMs},
                                         {"foo_bar-2.0.tar.gz", kTwoHoursAgoMs}}));

  const ServedMetadata old_release =
      serve(ageSettings(), request(Ecosystem::Pypi, "/pypi/foo-bar/1.0/json"), "application/json",
            test_support::pypiJsonApi("1.0", releases, false));
  ASSERT_EQ(old_release.reason, Reason::None) << old_release.detail;
  EXPECT_NE(old_release.body.find("foo_bar-1.0.tar.gz"), std::string::npos);
  EXPECT_EQ(old_release.body.find("cp312"), std::string::npos) << old_release.body;

  const ServedMetadata too_new =
      serve(ageSettings(), request(Ecosystem::Pypi, "/pypi/foo-bar/2.0/json"), "application/json",
            test_support::pypiJsonApi("2.0", releases, false));
  EXPECT_EQ(too_new.reason, Reason::PackageTooNew);
  EXPECT_TRUE(too_new.body.empty());
  EXPECT_EQ(too_new.detail,
            "pypi package 'foo-bar' 2.0 (the version '2.0' names) is younger than "
            "packages.min_age, or sluice does not know its age");
}

}  // namespace
}  // namespace sluice::proxy
