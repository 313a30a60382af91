// judgePackageAge: the age rule on a request that names one version and carries no time of its
// own (docs/packages.md#the-age-rule): served when the sandbox learned the version is old
// enough, package_too_new when it is younger or its time is unknown; exempt names and policies
// without min_age are not held to it. The refusal's words name the package, its age in hours
// and the rule.

#include "proxy/runtime/package_judgement.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/package_verdict.h"

namespace sluice::proxy {
namespace {

using policy::Ecosystem;
using policy::Reason;

constexpr std::int64_t kNow = 1767225600000;  // 2026-01-01T00:00:00Z
constexpr std::int64_t kHour = 60LL * 60 * 1000;
constexpr std::int64_t kDay = 24 * kHour;
constexpr std::chrono::milliseconds kWeek{7 * kDay};

policy::PackageSettings ageSettings(std::chrono::milliseconds min_age,
                                    std::vector<std::string_view> exempt = {}) {
  policy::PackageSettings settings;
  settings.min_age = min_age;
  for (std::string_view text : exempt) {
    settings.exempt.push_back(policy::PackagePattern::parse(text).value());
  }
  return settings;
}

PackageJudgement fileRequest(Ecosystem ecosystem, std::string_view target) {
  PackageJudgement judgement;
  judgement.package =
      policy::recognizePackageRequest(policy::RegistrySettings{ecosystem, "/"}, "GET", target);
  return judgement;
}

// left-pad 1.0.0 is 30 days old, 1.1.0 an hour, 1.2.0 exactly a week, 2.0.0 from a clock
// ahead; PyPI's foo-bar 2.0 is 30 days old and 3.0 an hour, and so are their files the page
// listed, but for a wheel added to 2.0 an hour ago.
const PublishTimes& known() {
  static PublishTimes times;
  static const bool learned = [] {
    const std::vector<std::pair<std::string, std::int64_t>> npm = {{"1.0.0", kNow - 30 * kDay},
                                                                   {"1.1.0", kNow - kHour},
                                                                   {"1.2.0", kNow - 7 * kDay},
                                                                   {"2.0.0", kNow + kHour}};
    times.learn(Ecosystem::Npm, "left-pad", npm);
    const std::vector<std::pair<std::string, std::int64_t>> pypi = {{"2.0", kNow - 30 * kDay},
                                                                    {"3.0", kNow - kHour}};
    times.learn(Ecosystem::Pypi, "foo-bar", pypi);
    times.learn(Ecosystem::Pypi, "my-pkg", pypi);
    const std::vector<std::pair<std::string, std::int64_t>> files = {
        {"foo_bar-2.0.tar.gz", kNow - 30 * kDay},
        {"foo_bar-2.0-py3-none-any.whl", kNow - 30 * kDay},
        {"foo_bar-2.0-cp312-cp312-manylinux_2_17_x86_64.whl", kNow - kHour},
        {"foo_bar-3.0-py3-none-any.whl", kNow - kHour}};
    times.learnPypiFiles("foo-bar", files);
    return true;
  }();
  EXPECT_TRUE(learned);
  return times;
}

TEST(JudgePackageAge, Table) {
  const std::string kUnknown =
      " has no publish time sluice knows (its metadata was not fetched through sluice first), "
      "and packages.min_age (7d) applies to it";
  const struct {
    const char* what;
    policy::PackageSettings settings;
    bool with_known;
    Ecosystem ecosystem;
    std::string_view target;
    Reason reason;
    std::string detail;  // exactly
  } cases[] = {
      {"30 days old", ageSettings(kWeek), true, Ecosystem::Npm, "/left-pad/-/left-pad-1.0.0.tgz",
       Reason::None, ""},
      {"an hour old", ageSettings(kWeek), true, Ecosystem::Npm, "/left-pad/-/left-pad-1.1.0.tgz",
       Reason::PackageTooNew,
       "npm package 'left-pad' 1.1.0 was published 1 hours ago, less than packages.min_age (7d)"},
      {"exactly min_age old", ageSettings(kWeek), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-1.2.0.tgz", Reason::None, ""},
      {"published in the future", ageSettings(kWeek), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-2.0.0.tgz", Reason::PackageTooNew,
       "npm package 'left-pad' 2.0.0 was published 0 hours ago, less than packages.min_age (7d)"},
      {"unknown version", ageSettings(kWeek), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-9.9.9.tgz", Reason::PackageTooNew,
       "npm package 'left-pad' 9.9.9" + kUnknown},
      {"unknown package", ageSettings(kWeek), true, Ecosystem::Npm, "/lodash/-/lodash-1.0.0.tgz",
       Reason::PackageTooNew, "npm package 'lodash' 1.0.0" + kUnknown},
      {"nothing known", ageSettings(kWeek), false, Ecosystem::Npm, "/left-pad/-/left-pad-1.0.0.tgz",
       Reason::PackageTooNew, "npm package 'left-pad' 1.0.0" + kUnknown},
      {"exempt name", ageSettings(kWeek, {"left-pad"}), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-1.1.0.tgz", Reason::None, ""},
      {"exempt scope", ageSettings(kWeek, {"@myorg/*"}), false, Ecosystem::Npm,
       "/@myorg/util/-/util-2.0.0.tgz", Reason::None, ""},
      {"exempt elsewhere", ageSettings(kWeek, {"@myorg/*"}), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-1.1.0.tgz", Reason::PackageTooNew,
       "npm package 'left-pad' 1.1.0 was published 1 hours ago, less than packages.min_age (7d)"},
      {"no min_age", ageSettings(std::chrono::milliseconds(0)), false, Ecosystem::Npm,
       "/left-pad/-/left-pad-1.1.0.tgz", Reason::None, ""},
      {"no version: a packument", ageSettings(kWeek), false, Ecosystem::Npm, "/left-pad",
       Reason::None, ""},
      // A PyPI file is as old as its own upload (docs/packages.md#the-age-rule).
      {"PyPI sdist, 30 days old", ageSettings(kWeek), true, Ecosystem::Pypi,
       "/packages/ab/cd/foo_bar-2.0.tar.gz", Reason::None, ""},
      {"PyPI wheel, 30 days old, and its PEP 658 metadata", ageSettings(kWeek), true,
       Ecosystem::Pypi, "/packages/ab/cd/foo_bar-2.0-py3-none-any.whl.metadata", Reason::None, ""},
      {"PyPI wheel, an hour old", ageSettings(kWeek), true, Ecosystem::Pypi,
       "/packages/ab/cd/foo_bar-3.0-py3-none-any.whl", Reason::PackageTooNew,
       "pypi package 'foo-bar' 3.0: this file was uploaded 1 hours ago, less than "
       "packages.min_age (7d)"},
      {"PyPI wheel added an hour ago to a release 30 days old", ageSettings(kWeek), true,
       Ecosystem::Pypi, "/packages/ab/cd/foo_bar-2.0-cp312-cp312-manylinux_2_17_x86_64.whl",
       Reason::PackageTooNew,
       "pypi package 'foo-bar' 2.0: this file was uploaded 1 hours ago, less than "
       "packages.min_age (7d)"},
      {"PyPI file of a known version the page never listed", ageSettings(kWeek), true,
       Ecosystem::Pypi, "/packages/ab/cd/foo_bar-2.0-py2-none-any.whl", Reason::PackageTooNew,
       "pypi package 'foo-bar' 2.0: this file" + kUnknown},
      {"PyPI file in another spelling of its version", ageSettings(kWeek), true, Ecosystem::Pypi,
       "/packages/ab/cd/foo_bar-2.0.0.tar.gz", Reason::PackageTooNew,
       "pypi package 'foo-bar' 2.0.0: this file" + kUnknown},
      {"PyPI exempt in another spelling", ageSettings(kWeek, {"My_Pkg"}), true, Ecosystem::Pypi,
       "/packages/ab/cd/my_pkg-3.0.tar.gz", Reason::None, ""},
      {"PyPI unknown", ageSettings(kWeek), true, Ecosystem::Pypi,
       "/packages/ab/cd/foo_bar-4.0.tar.gz", Reason::PackageTooNew,
       "pypi package 'foo-bar' 4.0: this file" + kUnknown},
      // A PyPI version document is as old as the version: its earliest file.
      {"PyPI version document, 30 days old", ageSettings(kWeek), true, Ecosystem::Pypi,
       "/pypi/foo-bar/2.0/json", Reason::None, ""},
      {"PyPI version document, an hour old", ageSettings(kWeek), true, Ecosystem::Pypi,
       "/pypi/foo-bar/3.0/json", Reason::PackageTooNew,
       "pypi package 'foo-bar' 3.0 was published 1 hours ago, less than packages.min_age (7d)"},
      {"the age in days", ageSettings(std::chrono::milliseconds(2 * kDay)), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-1.1.0.tgz", Reason::PackageTooNew,
       "npm package 'left-pad' 1.1.0 was published 1 hours ago, less than packages.min_age (2d)"},
      // An age is shown in the largest unit that divides it.
      {"the age in hours", ageSettings(std::chrono::milliseconds(12 * kHour)), true, Ecosystem::Npm,
       "/left-pad/-/left-pad-1.1.0.tgz", Reason::PackageTooNew,
       "npm package 'left-pad' 1.1.0 was published 1 hours ago, less than packages.min_age "
       "(12h)"},
      {"the age in ms", ageSettings(std::chrono::milliseconds(90 * 60 * 1000 + 1)), true,
       Ecosystem::Npm, "/left-pad/-/left-pad-1.1.0.tgz", Reason::PackageTooNew,
       "npm package 'left-pad' 1.1.0 was published 1 hours ago, less than packages.min_age "
       "(5400001ms)"},
      {"an hour is older than 30 minutes", ageSettings(std::chrono::milliseconds(kHour / 2)), true,
       Ecosystem::Npm, "/left-pad/-/left-pad-1.1.0.tgz", Reason::None, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    PackageJudgement judgement = fileRequest(c.ecosystem, c.target);
    ASSERT_NE(judgement.package.kind, policy::PackageRequestKind::Unrecognized);
    judgePackageAge(c.settings, c.with_known ? &known() : nullptr, kNow, judgement);
    EXPECT_EQ(judgement.reason, c.reason) << judgement.detail;
    EXPECT_EQ(judgement.detail, c.detail);
    EXPECT_TRUE(judgement.advisory.empty());
    // Unknown, not young: learning the time may serve it.
    EXPECT_EQ(judgement.age_unknown, c.detail.find("has no publish time") != std::string::npos);
  }
}

TEST(JudgePackageAge, AgeUnknownOnlyForAnUnknownTimeAndClearedWithTheRest) {
  PackageJudgement judgement = fileRequest(Ecosystem::Npm, "/left-pad/-/left-pad-9.9.9.tgz");
  judgePackageAge(ageSettings(kWeek), &known(), kNow, judgement);
  EXPECT_EQ(judgement.reason, Reason::PackageTooNew);
  EXPECT_TRUE(judgement.age_unknown);
  judgement.clear();
  EXPECT_FALSE(judgement.age_unknown);
  EXPECT_EQ(judgement.reason, Reason::None);
  EXPECT_TRUE(judgement.detail.empty());

  // Learned since (as the packument fetched for the file teaches it): judged again, served.
  PublishTimes times;
  times.learn(Ecosystem::Npm, "left-pad",
              std::vector<std::pair<std::string, std::int64_t>>{{"9.9.9", kNow - 30 * kDay}});
  judgement = fileRequest(Ecosystem::Npm, "/left-pad/-/left-pad-9.9.9.tgz");
  judgePackageAge(ageSettings(kWeek), &times, kNow, judgement);
  EXPECT_EQ(judgement.reason, Reason::None) << judgement.detail;
  EXPECT_FALSE(judgement.age_unknown);

  // A young version is too new but its age is known.
  judgement = fileRequest(Ecosystem::Npm, "/left-pad/-/left-pad-1.1.0.tgz");
  judgePackageAge(ageSettings(kWeek), &known(), kNow, judgement);
  EXPECT_EQ(judgement.reason, Reason::PackageTooNew);
  EXPECT_FALSE(judgement.age_unknown);
}

// As the gateway does: judgePackageRequest serves the file (its name and advisories), then the
// age rule judges it.
TEST(JudgePackageAge, AfterJudgePackageRequest) {
  policy::Rule rule;
  rule.name = "npm";
  rule.registry = policy::RegistrySettings{Ecosystem::Npm, "/"};
  policy::Policy policy;
  policy.packages = ageSettings(kWeek);
  const struct {
    std::string_view target;
    Reason reason;
  } cases[] = {
      {"/left-pad/-/left-pad-1.0.0.tgz", Reason::None},
      {"/left-pad/-/left-pad-1.1.0.tgz", Reason::PackageTooNew},
      {"/left-pad/-/left-pad-3.0.0.tgz", Reason::PackageTooNew},
      {"/left-pad/1.1.0", Reason::PackageTooNew},  // a version document names one too
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.target);
    PackageJudgement judgement;
    judgePackageRequest(policy, rule, nullptr, "GET", c.target, judgement);
    ASSERT_EQ(judgement.reason, Reason::None) << judgement.detail;
    judgePackageAge(*policy.packages, &known(), kNow, judgement);
    EXPECT_EQ(judgement.reason, c.reason) << judgement.detail;
    EXPECT_EQ(judgement.detail.empty(), c.reason == Reason::None) << judgement.detail;
  }
}

}  // namespace
}  // namespace sluice::proxy
