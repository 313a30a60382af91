// Package names in their normal form and the patterns of `packages` lists
// (docs/packages.md#names).

#include "policy/package_name.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace sluice::policy {
namespace {

struct NameRow {
  Ecosystem ecosystem;
  std::string_view written;
  std::optional<std::string_view> normal;  // nullopt: no package can have this name
};

const NameRow kNames[] = {
    {Ecosystem::Npm, "left-pad", "left-pad"},
    {Ecosystem::Npm, "JSONStream", "jsonstream"},  // a legacy name: compared lower-cased
    {Ecosystem::Npm, "@MyOrg/Util", "@myorg/util"},
    {Ecosystem::Npm, "@types/node", "@types/node"},
    {Ecosystem::Npm, "lodash.merge", "lodash.merge"},
    {Ecosystem::Npm, "", std::nullopt},
    {Ecosystem::Npm, ".hidden", std::nullopt},
    {Ecosystem::Npm, "_private", std::nullopt},
    {Ecosystem::Npm, "@scope", std::nullopt},
    {Ecosystem::Npm, "@scope/", std::nullopt},
    {Ecosystem::Npm, "@/name", std::nullopt},
    {Ecosystem::Npm, "a/b", std::nullopt},
    {Ecosystem::Npm, "@a/b/c", std::nullopt},
    {Ecosystem::Npm, "sp ace", std::nullopt},
    {Ecosystem::Npm, "star*", std::nullopt},
    {Ecosystem::Npm, "caf\xc3\xa9", std::nullopt},
    {Ecosystem::Npm, "..", std::nullopt},
    {Ecosystem::Pypi, "Requests", "requests"},
    {Ecosystem::Pypi, "zope.interface", "zope-interface"},
    {Ecosystem::Pypi, "Foo__Bar-.baz", "foo-bar-baz"},
    {Ecosystem::Pypi, "typing_extensions", "typing-extensions"},
    {Ecosystem::Pypi, "a", "a"},
    {Ecosystem::Pypi, "-lead", std::nullopt},
    {Ecosystem::Pypi, "trail.", std::nullopt},
    {Ecosystem::Pypi, "@scope/x", std::nullopt},
    {Ecosystem::Pypi, "sp ace", std::nullopt},
    {Ecosystem::Pypi, "", std::nullopt},
};

TEST(PackageName, NormalForms) {
  for (const NameRow& row : kNames) {
    SCOPED_TRACE(std::string(toString(row.ecosystem)) + " " + std::string(row.written));
    const std::optional<std::string> normal = normalizePackageName(row.ecosystem, row.written);
    ASSERT_EQ(normal.has_value(), row.normal.has_value());
    if (normal) {
      EXPECT_EQ(*normal, *row.normal);
      // The normal form is its own normal form.
      EXPECT_EQ(normalizePackageName(row.ecosystem, *normal), normal);
    }
  }
}

TEST(PackageName, LengthBounds) {
  EXPECT_TRUE(normalizePackageName(Ecosystem::Npm, std::string(214, 'a')));
  EXPECT_FALSE(normalizePackageName(Ecosystem::Npm, std::string(215, 'a')));
  EXPECT_TRUE(normalizePackageName(Ecosystem::Pypi, std::string(200, 'a')));
  EXPECT_FALSE(normalizePackageName(Ecosystem::Pypi, std::string(201, 'a')));
}

TEST(PackageName, EcosystemWords) {
  EXPECT_EQ(ecosystemFromWord("npm"), Ecosystem::Npm);
  EXPECT_EQ(ecosystemFromWord("pypi"), Ecosystem::Pypi);
  EXPECT_EQ(ecosystemFromWord("PyPI"), std::nullopt);
  EXPECT_EQ(osvName(Ecosystem::Pypi), "PyPI");
  EXPECT_EQ(osvName(Ecosystem::Npm), "npm");
}

struct PatternRow {
  std::string_view pattern;
  Ecosystem ecosystem;
  std::string_view name;  // normal form
  bool matches;
};

const PatternRow kPatterns[] = {
    {"left-pad", Ecosystem::Npm, "left-pad", true},
    {"left-pad", Ecosystem::Npm, "left-pad2", false},
    {"Left-Pad", Ecosystem::Npm, "left-pad", true},
    {"@myorg/*", Ecosystem::Npm, "@myorg/util", true},
    {"@myorg/*", Ecosystem::Npm, "@myorgx/util", false},
    {"@myorg/*", Ecosystem::Npm, "myorg", false},
    {"@myorg/*", Ecosystem::Pypi, "myorg", false},  // no scope in PyPI: matches nothing there
    {"@types/*", Ecosystem::Npm, "@types/node", true},
    {"types-*", Ecosystem::Pypi, "types-requests", true},
    {"Types_*", Ecosystem::Pypi, "types-requests", true},  // PEP 503 on the pattern too
    {"types-*", Ecosystem::Npm, "types-x", true},
    {"*", Ecosystem::Npm, "anything", true},
    {"*-evil", Ecosystem::Npm, "very-evil", true},
    {"*-evil", Ecosystem::Npm, "evil", false},
    {"a*b*c", Ecosystem::Npm, "acb", false},
    {"a*b*c", Ecosystem::Npm, "axbyc", true},
    {"a*b*c", Ecosystem::Npm, "axbycd", false},
    {"zope.interface", Ecosystem::Pypi, "zope-interface", true},
    {"zope.interface", Ecosystem::Npm, "zope-interface", false},
    {"event-stream", Ecosystem::Npm, "event-stream", true},
};

TEST(PackagePattern, Matching) {
  for (const PatternRow& row : kPatterns) {
    SCOPED_TRACE(std::string(row.pattern) + " ~ " + std::string(row.name));
    auto pattern = PackagePattern::parse(row.pattern);
    ASSERT_TRUE(pattern) << pattern.error();
    EXPECT_EQ(pattern.value().matches(row.ecosystem, row.name), row.matches);
    EXPECT_EQ(pattern.value().text(), row.pattern);
  }
}

TEST(PackagePattern, Refused) {
  for (std::string_view text : {"", "sp ace", "caf\xc3\xa9", "a\"b", "<x>"}) {
    auto pattern = PackagePattern::parse(text);
    EXPECT_FALSE(pattern) << text;
  }
  EXPECT_FALSE(PackagePattern::parse(std::string(215, 'a')));
}

TEST(Glob, Backtracking) {
  EXPECT_TRUE(globMatches("", ""));
  EXPECT_FALSE(globMatches("", "a"));
  EXPECT_TRUE(globMatches("**", ""));
  EXPECT_TRUE(globMatches("*a*a*a*", "aaa"));
  EXPECT_FALSE(globMatches("*a*a*a*b", std::string(2000, 'a')));  // quadratic at worst, no more
}

}  // namespace
}  // namespace sluice::policy
