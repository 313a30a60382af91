// PublishTimes: the publish times a sandbox's filtered metadata gave, found again for its file
// requests (docs/packages.md#the-age-rule): one entry per ecosystem, normal name and version
// (PyPI's "1.0" and "1.0.0" are one version, npm's are two), and two bounded generations, so
// the newest kGeneration versions are always found and the oldest are forgotten.

#include "proxy/runtime/publish_times.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::proxy {
namespace {

using policy::Ecosystem;
using Times = std::vector<std::pair<std::string, std::int64_t>>;

constexpr std::int64_t kJan2026 = 1767225600000;  // 2026-01-01T00:00:00Z

TEST(PublishTimes, FindsWhatItLearned) {
  PublishTimes times;
  EXPECT_EQ(times.size(), 0u);
  EXPECT_EQ(times.find(Ecosystem::Npm, "left-pad", "1.0.0"), std::nullopt);
  times.learn(Ecosystem::Npm, "left-pad", Times{{"1.0.0", 1000}, {"1.1.0", 2000}});
  times.learn(Ecosystem::Pypi, "foo-bar", Times{{"2.0", kJan2026}});
  times.learn(Ecosystem::Npm, "nothing", Times{});  // an empty document learns nothing
  EXPECT_EQ(times.size(), 3u);

  const struct {
    const char* what;
    Ecosystem ecosystem;
    std::string_view name;
    std::string_view version;
    std::optional<std::int64_t> published;
  } cases[] = {
      {"npm", Ecosystem::Npm, "left-pad", "1.0.0", 1000},
      {"npm, another version", Ecosystem::Npm, "left-pad", "1.1.0", 2000},
      {"npm, a version not learned", Ecosystem::Npm, "left-pad", "1.2.0", std::nullopt},
      {"PyPI", Ecosystem::Pypi, "foo-bar", "2.0", kJan2026},
      // One PyPI version however spelled (versionKey: trailing zeros of the release dropped).
      {"PyPI 2.0.0 is 2.0", Ecosystem::Pypi, "foo-bar", "2.0.0", kJan2026},
      {"PyPI 2 is 2.0", Ecosystem::Pypi, "foo-bar", "2", kJan2026},
      {"PyPI 2.0.1 is another", Ecosystem::Pypi, "foo-bar", "2.0.1", std::nullopt},
      // npm's versions are SemVer's: "1.0" is no spelling of 1.0.0.
      {"npm 1.0 is not 1.0.0", Ecosystem::Npm, "left-pad", "1.0", std::nullopt},
      // Names are apart per ecosystem, and from each other.
      {"npm's foo-bar is not PyPI's", Ecosystem::Npm, "foo-bar", "2.0", std::nullopt},
      {"PyPI's left-pad is not npm's", Ecosystem::Pypi, "left-pad", "1.0.0", std::nullopt},
      {"a longer name", Ecosystem::Npm, "left-pad2", "1.0.0", std::nullopt},
      {"a shorter name", Ecosystem::Npm, "left", "1.0.0", std::nullopt},
      {"no name", Ecosystem::Npm, "", "1.0.0", std::nullopt},
      {"no version", Ecosystem::Npm, "left-pad", "", std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(times.find(c.ecosystem, c.name, c.version), c.published) << c.what;
  }
}

TEST(PublishTimes, PypiSpellingsAreOneEntryNpmsAreTwo) {
  PublishTimes times;
  times.learn(Ecosystem::Pypi, "foo-bar", Times{{"1.0", 1}, {"1.0.0", 2}});
  EXPECT_EQ(times.size(), 1u);
  EXPECT_EQ(times.find(Ecosystem::Pypi, "foo-bar", "1.0"), 2);  // the later one learned
  times.learn(Ecosystem::Npm, "left-pad", Times{{"1.0.0", 1}, {"1.0", 2}});
  EXPECT_EQ(times.size(), 3u);
  EXPECT_EQ(times.find(Ecosystem::Npm, "left-pad", "1.0.0"), 1);
  EXPECT_EQ(times.find(Ecosystem::Npm, "left-pad", "1.0"), 2);
}

// A version text no order reads is not learned: an entry is bounded in bytes too, whatever
// keys an origin's document has.
TEST(PublishTimes, AVersionTextPastTheBoundIsNotLearned) {
  PublishTimes times;
  const std::string longest(PublishTimes::kMaxVersionLength, '1');
  const std::string longer(PublishTimes::kMaxVersionLength + 1, '1');
  times.learn(Ecosystem::Npm, "left-pad", Times{{longest, 1000}, {longer, 2000}});
  EXPECT_EQ(times.find(Ecosystem::Npm, "left-pad", longest), 1000);
  EXPECT_EQ(times.find(Ecosystem::Npm, "left-pad", longer), std::nullopt);
  EXPECT_EQ(times.size(), 1u);
}

// A PyPI file is kept by its exact name, apart from its version's time and from every other
// file of it (docs/packages.md#the-age-rule); a name past the bound is not learned.
TEST(PublishTimes, PypiFilesAreKeptByTheirNames) {
  PublishTimes times;
  times.learn(Ecosystem::Pypi, "foo-bar", Times{{"2.0", 1000}});
  const std::string longest =
      "foo_bar-2.0-" + std::string(PublishTimes::kMaxFileNameLength - 16, 'x') + ".whl";
  const std::string longer =
      "foo_bar-2.0-" + std::string(PublishTimes::kMaxFileNameLength - 15, 'x') + ".whl";
  ASSERT_EQ(longest.size(), PublishTimes::kMaxFileNameLength);
  times.learnPypiFiles("foo-bar", Times{{"foo_bar-2.0.tar.gz", 2000},
                                        {"foo_bar-2.0-py3-none-any.whl", 3000},
                                        {longest, 4000},
                                        {longer, 5000}});
  times.learnPypiFiles("other", Times{});
  EXPECT_EQ(times.size(), 4u);
  EXPECT_EQ(times.findPypiFile("foo-bar", "foo_bar-2.0.tar.gz"), 2000);
  EXPECT_EQ(times.findPypiFile("foo-bar", "foo_bar-2.0-py3-none-any.whl"), 3000);
  EXPECT_EQ(times.findPypiFile("foo-bar", longest), 4000);
  EXPECT_EQ(times.findPypiFile("foo-bar", longer), std::nullopt);
  // Not by another spelling, another project, or the version's time.
  EXPECT_EQ(times.findPypiFile("foo-bar", "foo_bar-2.0.0.tar.gz"), std::nullopt);
  EXPECT_EQ(times.findPypiFile("foo-bar", "Foo_Bar-2.0.tar.gz"), std::nullopt);
  EXPECT_EQ(times.findPypiFile("foo", "foo_bar-2.0.tar.gz"), std::nullopt);
  EXPECT_EQ(times.findPypiFile("foo-bar", "2.0"), std::nullopt);
  EXPECT_EQ(times.find(Ecosystem::Pypi, "foo-bar", "foo_bar-2.0.tar.gz"), std::nullopt);
  EXPECT_EQ(times.find(Ecosystem::Pypi, "foo-bar", "2.0"), 1000);
}

TEST(PublishTimes, ALaterDocumentReplacesATime) {
  PublishTimes times;
  times.learn(Ecosystem::Npm, "left-pad", Times{{"1.0.0", 1000}});
  times.learn(Ecosystem::Npm, "left-pad", Times{{"1.0.0", 5000}});
  EXPECT_EQ(times.size(), 1u);
  EXPECT_EQ(times.find(Ecosystem::Npm, "left-pad", "1.0.0"), 5000);
}

// `count` distinct npm versions of one package, the i-th published at i.
Times numberedVersions(std::size_t count) {
  Times versions;
  versions.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    versions.emplace_back("0.0." + std::to_string(i), static_cast<std::int64_t>(i));
  }
  return versions;
}

std::optional<std::int64_t> findNumbered(const PublishTimes& times, std::size_t i) {
  return times.find(Ecosystem::Npm, "many", "0.0." + std::to_string(i));
}

TEST(PublishTimes, APreviousGenerationIsStillFound) {
  constexpr std::size_t kGeneration = PublishTimes::kGeneration;
  PublishTimes times;
  times.learn(Ecosystem::Npm, "many", numberedVersions(kGeneration + 10));
  EXPECT_EQ(times.size(), kGeneration + 10);
  for (std::size_t i :
       {std::size_t{0}, std::size_t{1}, kGeneration - 1, kGeneration, kGeneration + 9}) {
    EXPECT_EQ(findNumbered(times, i), static_cast<std::int64_t>(i)) << i;
  }
  EXPECT_EQ(findNumbered(times, kGeneration + 10), std::nullopt);
}

TEST(PublishTimes, TheGenerationBeforeIsForgotten) {
  constexpr std::size_t kGeneration = PublishTimes::kGeneration;
  PublishTimes times;
  times.learn(Ecosystem::Npm, "many", numberedVersions(2 * kGeneration + 10));
  // The newest kGeneration + 10 are kept: the full previous generation and the current one.
  EXPECT_EQ(times.size(), kGeneration + 10);
  for (std::size_t i : {std::size_t{0}, std::size_t{9}, kGeneration - 1}) {
    EXPECT_EQ(findNumbered(times, i), std::nullopt) << i;
  }
  for (std::size_t i :
       {kGeneration, kGeneration + 10, 2 * kGeneration - 1, 2 * kGeneration, 2 * kGeneration + 9}) {
    EXPECT_EQ(findNumbered(times, i), static_cast<std::int64_t>(i)) << i;
  }
}

TEST(PublishTimes, GenerationsCountAcrossDocuments) {
  constexpr std::size_t kGeneration = PublishTimes::kGeneration;
  PublishTimes times;
  times.learn(Ecosystem::Pypi, "first", Times{{"1.0", 7}});
  times.learn(Ecosystem::Npm, "many", numberedVersions(kGeneration));
  // The first document's version is in the previous generation now, and still found ...
  EXPECT_EQ(times.find(Ecosystem::Pypi, "first", "1.0"), 7);
  EXPECT_EQ(times.size(), kGeneration + 1);
  // ... until a whole generation more was learned.
  Times more;
  for (std::size_t i = 0; i < kGeneration; ++i) {
    more.emplace_back("1.0." + std::to_string(i), 1);
  }
  times.learn(Ecosystem::Npm, "more", more);
  EXPECT_EQ(times.find(Ecosystem::Pypi, "first", "1.0"), std::nullopt);
  EXPECT_EQ(times.find(Ecosystem::Npm, "more", "1.0.0"), 1);
  EXPECT_EQ(times.size(), kGeneration + 1);
}

TEST(UnixTimeMs, IsTheWallClockInMilliseconds) {
  const auto ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const std::int64_t before = ms();
  const std::int64_t now = unixTimeMs();
  const std::int64_t after = ms();
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

}  // namespace
}  // namespace sluice::proxy
