// Each ecosystem's order over any text: valid versions by their order, texts that are no
// version before them all and by bytes among themselves, so any list can be sorted.
#include "proxy/packages/version_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::proxy::packages {
namespace {

using policy::Ecosystem;

struct Case {
  Ecosystem ecosystem;
  std::string_view a;
  std::string_view b;
  int expected;
};

TEST(VersionOrder, ComparesByTheEcosystemsOrder) {
  const Case cases[] = {
      {Ecosystem::Npm, "1.0.0", "1.0.0", 0},
      {Ecosystem::Npm, "1.0.0-rc.1", "1.0.0", -1},
      {Ecosystem::Npm, "1.10.0", "1.9.0", 1},
      {Ecosystem::Npm, "1.0.0+build", "1.0.0", 0},
      {Ecosystem::Npm, "1.0", "1.0.0", -1},  // "1.0" is no SemVer: before every version
      {Ecosystem::Npm, "latest", "0.0.0", -1},
      {Ecosystem::Npm, "abc", "abd", -1},  // neither a version: by bytes
      {Ecosystem::Npm, "abc", "abc", 0},
      {Ecosystem::Pypi, "1.0", "1.0.0", 0},
      {Ecosystem::Pypi, "1.0.dev1", "1.0a1", -1},
      {Ecosystem::Pypi, "1.0+local", "1.0", 1},
      {Ecosystem::Pypi, "1.0.0-rc.1", "1.0.0", -1},
      {Ecosystem::Pypi, "not a version", "0.dev0", -1},
      {Ecosystem::Pypi, "1.0 x", "1.0 y", -1},
      {Ecosystem::Pypi, "2.0", "10.0", -1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(compareVersions(c.ecosystem, c.a, c.b), c.expected) << c.a << " vs " << c.b;
    EXPECT_EQ(compareVersions(c.ecosystem, c.b, c.a), -c.expected) << c.b << " vs " << c.a;
  }
}

TEST(VersionOrder, SortsAnything) {
  std::vector<std::string_view> npm = {"2.0.0", "zzz", "1.0.0-beta", "", "1.0.0", "1.0", "0.1.0"};
  std::sort(npm.begin(), npm.end(), [](std::string_view a, std::string_view b) {
    return compareVersions(Ecosystem::Npm, a, b) < 0;
  });
  EXPECT_EQ(npm, (std::vector<std::string_view>{"", "1.0", "zzz", "0.1.0", "1.0.0-beta", "1.0.0",
                                                "2.0.0"}));
  std::vector<std::string_view> pypi = {"1.0.post1", "x", "1.0", "1.0rc1", "0.9", "1.0.dev0"};
  std::sort(pypi.begin(), pypi.end(), [](std::string_view a, std::string_view b) {
    return compareVersions(Ecosystem::Pypi, a, b) < 0;
  });
  EXPECT_EQ(pypi,
            (std::vector<std::string_view>{"x", "0.9", "1.0.dev0", "1.0rc1", "1.0", "1.0.post1"}));
}

TEST(VersionOrder, ValidityAndPrereleases) {
  struct Row {
    Ecosystem ecosystem;
    std::string_view version;
    bool valid;
    bool prerelease;
  };
  const Row rows[] = {
      {Ecosystem::Npm, "1.2.3", true, false},       {Ecosystem::Npm, "1.2.3-rc.1", true, true},
      {Ecosystem::Npm, "1.2.3+build", true, false}, {Ecosystem::Npm, "1.2", false, false},
      {Ecosystem::Pypi, "1.2", true, false},        {Ecosystem::Pypi, "1.2a1", true, true},
      {Ecosystem::Pypi, "1.2.dev0", true, true},    {Ecosystem::Pypi, "1.2.post1", true, false},
      {Ecosystem::Pypi, "1.2.3-rc.1", true, true},  {Ecosystem::Pypi, "1.2.3+build", true, false},
      {Ecosystem::Pypi, "one", false, false},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(isValidVersion(row.ecosystem, row.version), row.valid) << row.version;
    EXPECT_EQ(isPrerelease(row.ecosystem, row.version), row.prerelease) << row.version;
  }
  EXPECT_EQ(schemeOf(Ecosystem::Npm), VersionScheme::SemVer);
  EXPECT_EQ(schemeOf(Ecosystem::Pypi), VersionScheme::Pep440);
  EXPECT_EQ(compareVersions(VersionScheme::SemVer, "1.0", "1.0.0"), -1);
  EXPECT_EQ(compareVersions(VersionScheme::Pep440, "1.0", "1.0.0"), 0);
}

// versionKey() is equal exactly when compareVersions() is 0, over versions and non-versions.
TEST(VersionOrder, KeysAreEqualExactlyForEqualVersions) {
  const std::vector<std::string_view> npm = {
      "1.0.0",       "v1.0.0", "=1.0.0", " 1.0.0", "1.0.0+b", "1.0.0-rc.1", "1.0.0-rc.1+b",
      "1.0.0-rc.01", "1.0",    "",       "junk",   "0.0.0",   "10.0.0"};
  const std::vector<std::string_view> pypi = {
      "1.0",      "1.0.0",   "1",       "v1.0",      "01.0",      "1.0+a", "1.0+A",    "1.0+a.0",
      "1.0+a.00", "1.0+a-0", "1.0a1",   "1.0alpha1", "1.0.post0", "1.0-0", "1.0.dev0", "1.0dev",
      "0!1.0",    "1!1.0",   "1.0.0.1", "",          "junk",      "1.0 x", "0"};
  for (const auto& [ecosystem, texts] :
       {std::pair{Ecosystem::Npm, npm}, std::pair{Ecosystem::Pypi, pypi}}) {
    for (std::string_view a : texts) {
      for (std::string_view b : texts) {
        EXPECT_EQ(versionKey(ecosystem, a) == versionKey(ecosystem, b),
                  compareVersions(ecosystem, a, b) == 0)
            << a << " / " << b;
      }
    }
  }
  EXPECT_EQ(versionKey(Ecosystem::Npm, "v1.2.3-rc.1+b"), "1.2.3-rc.1");
  EXPECT_EQ(versionKey(Ecosystem::Pypi, "1.0.0+A-1"), "1+a.1");
  EXPECT_EQ(versionKey(Ecosystem::Pypi, "junk"), std::string("\0junk", 5));
}

}  // namespace
}  // namespace sluice::proxy::packages
