// npm's versions: SemVer 2.0.0 as node-semver reads the registry's keys (strict, plus a
// leading "v" or "=" and surrounding whitespace), and SemVer's precedence.
#include "proxy/packages/semver.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::packages {
namespace {

struct Parsed {
  std::string_view text;
  std::uint64_t major, minor, patch;
  std::string_view prerelease, build;
};

TEST(SemVer, ParsesWhatTheRegistrySpells) {
  const Parsed cases[] = {
      {"1.2.3", 1, 2, 3, "", ""},
      {"0.0.0", 0, 0, 0, "", ""},
      {"1.2.3-beta.1", 1, 2, 3, "beta.1", ""},
      {"1.2.3+build.5", 1, 2, 3, "", "build.5"},
      {"1.2.3-rc.1+sha.0abc", 1, 2, 3, "rc.1", "sha.0abc"},
      {"1.0.0-0a.--.x-y", 1, 0, 0, "0a.--.x-y", ""},
      {"1.0.0+001", 1, 0, 0, "", "001"},  // build identifiers may have leading zeros
      {"v1.2.3", 1, 2, 3, "", ""},        // node-semver's loose prefixes
      {"=1.2.3", 1, 2, 3, "", ""},
      {" 1.2.3\t", 1, 2, 3, "", ""},  // node-semver trims
      {"9007199254740991.0.0", 9007199254740991ull, 0, 0, "", ""},
      {"1.2.3-99999999999999999999999", 1, 2, 3, "99999999999999999999999", ""},
  };
  for (const Parsed& c : cases) {
    const std::optional<SemVer> v = parseSemVer(c.text);
    ASSERT_TRUE(v.has_value()) << c.text;
    EXPECT_EQ(v->major, c.major) << c.text;
    EXPECT_EQ(v->minor, c.minor) << c.text;
    EXPECT_EQ(v->patch, c.patch) << c.text;
    EXPECT_EQ(v->prerelease, c.prerelease) << c.text;
    EXPECT_EQ(v->build, c.build) << c.text;
  }
}

TEST(SemVer, RefusesWhatIsNoVersion) {
  const std::string too_long = "1.2.3-" + std::string(251, 'a');  // 257 bytes
  const std::string_view cases[] = {
      "",
      "1",
      "1.2",
      "1.2.3.4",
      "01.2.3",  // leading zeros
      "1.02.3",
      "1.2.03",
      "1.2.3-01",  // a numeric prerelease identifier with a leading zero
      "1.2.3-",
      "1.2.3+",
      "1.2.3-a..b",  // empty identifiers
      "1.2.3-a.",
      "1.2.3+a..b",
      "1.2.3-a_b",  // outside [0-9A-Za-z-]
      "1.2.3-é",
      "1.2.3beta",  // loose mode's missing hyphen
      "V1.2.3",
      "vv1.2.3",
      "=v1.2.3",
      "1.2.3 4",
      "-1.2.3",
      "1.2.-3",
      "9007199254740992.0.0",  // above Number.MAX_SAFE_INTEGER
      "1.18446744073709551616.0",
      "1.2.x",
      "*",
      too_long,
      std::string_view("1.2.3\0", 6),
  };
  for (std::string_view text : cases) {
    EXPECT_FALSE(parseSemVer(text).has_value()) << text;
  }
  EXPECT_TRUE(parseSemVer("1.2.3-" + std::string(250, 'a')).has_value());  // 256 bytes
}

int compare(std::string_view a, std::string_view b) {
  const std::optional<SemVer> x = parseSemVer(a);
  const std::optional<SemVer> y = parseSemVer(b);
  EXPECT_TRUE(x && y) << a << " " << b;
  return x && y ? compareSemVer(*x, *y) : 99;
}

// Each strictly above the one before it; every pair checked both ways.
void expectAscending(const std::vector<std::string_view>& chain) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    EXPECT_EQ(compare(chain[i], chain[i]), 0) << chain[i];
    for (std::size_t j = i + 1; j < chain.size(); ++j) {
      EXPECT_EQ(compare(chain[i], chain[j]), -1) << chain[i] << " < " << chain[j];
      EXPECT_EQ(compare(chain[j], chain[i]), 1) << chain[j] << " > " << chain[i];
    }
  }
}

TEST(SemVer, TheSpecsPrecedenceExample) {
  expectAscending({"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
                   "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"});
}

TEST(SemVer, PrecedenceOfTheParts) {
  expectAscending({"0.0.0",      "0.0.1",
                   "0.1.0",      "0.9.9",
                   "0.10.0",     "1.0.0-0",
                   "1.0.0-1",    "1.0.0-2",
                   "1.0.0-10",   "1.0.0-99999999999999999999",
                   "1.0.0--",    "1.0.0-0a",
                   "1.0.0-A",    "1.0.0-a",
                   "1.0.0-a.0",  "1.0.0-a.0.0",
                   "1.0.0",      "1.0.1",
                   "2.0.0-rc.1", "2.0.0",
                   "10.0.0",     "9007199254740991.0.0"});
}

TEST(SemVer, BuildMetadataAndPrefixesDoNotCount) {
  EXPECT_EQ(compare("1.0.0+a", "1.0.0+b"), 0);
  EXPECT_EQ(compare("1.0.0+a", "1.0.0"), 0);
  EXPECT_EQ(compare("1.0.0-rc.1+x", "1.0.0-rc.1"), 0);
  EXPECT_EQ(compare("v1.0.0", "=1.0.0"), 0);
  EXPECT_EQ(compare(" 1.0.0 ", "1.0.0"), 0);
}

}  // namespace
}  // namespace sluice::proxy::packages
