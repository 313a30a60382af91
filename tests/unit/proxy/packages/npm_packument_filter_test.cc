#include "proxy/packages/npm_packument_filter.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <string>
#include <vector>

#include "tests/unit/proxy/packages/filter_test_support.h"

namespace sluice::proxy::packages {
namespace {

using policy::Reason;
using testing::kSimpleOrder;
using testing::TableJudge;

struct Release {
  std::string version;
  std::string time;  // "" for none in `time`
};

const std::vector<Release> kReleases = {
    {"1.0.0", "2020-01-01T00:00:00.000Z"},        {"1.1.0", "2020-06-01T00:00:00.000Z"},
    {"1.2.0", "2021-01-01T00:00:00.000Z"},        {"2.0.0", "2022-01-01T00:00:00.000Z"},
    {"2.1.0-beta.1", "2022-06-01T00:00:00.000Z"}, {"2.1.0", "2023-01-01T00:00:00.000Z"},
    {"3.0.0-beta.1", "2024-05-01T12:34:56.789Z"},
};
const std::map<std::string, std::string> kTags = {
    {"latest", "2.1.0"}, {"next", "3.0.0-beta.1"}, {"beta", "2.1.0-beta.1"}, {"legacy", "1.2.0"}};

std::string manifest(const std::string& version) {
  return R"({"name":"left-pad","version":")" + version +
         R"(","main":"index.js","dependencies":{"a":"^1.0.0"},"scripts":{"test":"tap"},)"
         R"("dist":{"tarball":"https://registry.npmjs.org/left-pad/-/left-pad-)" +
         version +
         R"(.tgz","integrity":"sha512-AAAA==","fileCount":3,"unpackedSize":1.5e3},)"
         R"("deprecated":false,"_hasShrinkwrap":null})";
}

std::string packument(const std::vector<Release>& releases = kReleases,
                      const std::map<std::string, std::string>& tags = kTags,
                      const std::string& readme = "# left-pad\\n\\u00e9 \\\"quoted\\\"") {
  std::string doc = "{\n  \"_id\": \"left-pad\",\n  \"name\": \"left-pad\",\n  \"dist-tags\": {";
  bool first = true;
  for (const auto& [tag, version] : tags) {
    doc += (first ? "\"" : ", \"") + tag + "\": \"" + version + "\"";
    first = false;
  }
  doc += "},\n  \"versions\": {";
  first = true;
  for (const Release& r : releases) {
    doc += (first ? "\n    \"" : ",\n    \"") + r.version + "\": " + manifest(r.version);
    first = false;
  }
  doc +=
      "},\n  \"time\": {\"created\": \"2019-12-31T00:00:00.000Z\", "
      "\"modified\": \"2024-05-02T00:00:00.000Z\"";
  for (const Release& r : releases) {
    if (!r.time.empty()) {
      doc += ", \"" + r.version + "\": \"" + r.time + "\"";
    }
  }
  doc += "},\n  \"maintainers\": [{\"name\": \"someone\"}],\n  \"readme\": \"" + readme +
         "\",\n  \"license\": \"WTFPL\"\n}\n";
  return doc;
}

// What a client reads of the output.
struct Read {
  std::vector<std::string> versions;
  std::vector<std::string> times;
  std::map<std::string, std::string> tags;
  bool has_tags = false;
  std::string readme;
};

Read readOutput(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  Read read;
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return read;
  }
  for (auto [key, value] : object) {
    if (key == "versions") {
      for (auto [version, body] : value.get_object()) {
        read.versions.emplace_back(version);
        (void)body;
      }
    } else if (key == "time") {
      for (auto [name, time] : value.get_object()) {
        read.times.emplace_back(name);
      }
    } else if (key == "dist-tags") {
      read.has_tags = true;
      for (auto [tag, version] : value.get_object()) {
        read.tags[std::string(tag)] = std::string(version.get_string().value());
      }
    } else if (key == "readme") {
      read.readme = std::string(value.get_string().value());
    }
  }
  return read;
}

std::vector<std::string> without(const std::vector<std::string>& all,
                                 const std::vector<std::string>& gone) {
  std::vector<std::string> out;
  for (const auto& v : all) {
    if (std::find(gone.begin(), gone.end(), v) == gone.end()) {
      out.push_back(v);
    }
  }
  return out;
}

const std::vector<std::string> kAllVersions = {"1.0.0",        "1.1.0", "1.2.0",       "2.0.0",
                                               "2.1.0-beta.1", "2.1.0", "3.0.0-beta.1"};

TEST(NpmPackumentFilter, KeepsEverythingWhenNothingIsRemoved) {
  std::string doc = packument();
  const std::string original = doc;
  TableJudge judge;
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(doc, original);  // the caller's document comes back as it was
  EXPECT_EQ(result->kept, kAllVersions.size());
  EXPECT_TRUE(result->removed.empty());
  EXPECT_EQ(result->tags_moved, 0u);
  const Read read = readOutput(result->json);
  EXPECT_EQ(read.versions, kAllVersions);
  EXPECT_EQ(read.tags, kTags);
  EXPECT_EQ(read.times.size(), kAllVersions.size() + 2);
  EXPECT_EQ(read.readme, "# left-pad\n\u00e9 \"quoted\"");
  EXPECT_NE(result->json.find("\"1.0.0\": " + manifest("1.0.0")), std::string::npos);  // verbatim
  // Each version judged once, with its time from `time`.
  ASSERT_EQ(judge.calls.size(), kAllVersions.size());
  EXPECT_EQ(judge.calls[0].first, "1.0.0");
  EXPECT_EQ(judge.calls[0].second, std::optional<std::int64_t>(1577836800000));
  EXPECT_EQ(judge.calls[6].second, std::optional<std::int64_t>(1714566896789));
}

struct RemovalCase {
  const char* name;
  std::vector<std::string> removed;
  std::map<std::string, std::string> tags;  // expected
  std::map<std::string, std::string> input_tags = kTags;
};

class NpmRemoval : public ::testing::TestWithParam<RemovalCase> {};

TEST_P(NpmRemoval, DropsVersionsAndTimesAndRepointsTags) {
  const RemovalCase& c = GetParam();
  std::string doc = packument(kReleases, c.input_tags);
  TableJudge judge;
  for (const auto& v : c.removed) {
    judge.remove(v, Reason::PackageMalicious, "MAL-2025-1");
  }
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->json);
  EXPECT_EQ(read.versions, without(kAllVersions, c.removed));
  std::vector<std::string> times = {"created", "modified"};
  for (const auto& v : without(kAllVersions, c.removed)) {
    times.push_back(v);
  }
  EXPECT_EQ(read.times, times);
  EXPECT_EQ(read.tags, c.tags);
  EXPECT_EQ(result->kept, kAllVersions.size() - c.removed.size());
  ASSERT_EQ(result->removed.size(), c.removed.size());
  for (const RemovedVersion& r : result->removed) {
    EXPECT_NE(std::find(c.removed.begin(), c.removed.end(), r.version), c.removed.end());
    EXPECT_EQ(r.reason, Reason::PackageMalicious);
    EXPECT_EQ(r.advisory, "MAL-2025-1");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NpmRemoval,
    ::testing::Values(RemovalCase{"latest_falls_to_the_stable_below",
                                  {"2.1.0"},
                                  {{"latest", "2.0.0"},
                                   {"next", "3.0.0-beta.1"},
                                   {"beta", "2.1.0-beta.1"},
                                   {"legacy", "1.2.0"}}},
                      RemovalCase{"prerelease_tag_falls_to_any_kept_below",
                                  {"3.0.0-beta.1"},
                                  {{"latest", "2.1.0"},
                                   {"next", "2.1.0"},
                                   {"beta", "2.1.0-beta.1"},
                                   {"legacy", "1.2.0"}}},
                      RemovalCase{"beta_falls_to_the_release_below",
                                  {"2.1.0-beta.1"},
                                  {{"latest", "2.1.0"},
                                   {"next", "3.0.0-beta.1"},
                                   {"beta", "2.0.0"},
                                   {"legacy", "1.2.0"}}},
                      RemovalCase{"two_stables_gone",
                                  {"2.1.0", "2.0.0"},
                                  {{"latest", "1.2.0"},
                                   {"next", "3.0.0-beta.1"},
                                   {"beta", "2.1.0-beta.1"},
                                   {"legacy", "1.2.0"}}},
                      RemovalCase{"no_stable_left_latest_takes_the_highest_prerelease",
                                  {"1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0"},
                                  {{"latest", "3.0.0-beta.1"},
                                   {"next", "3.0.0-beta.1"},
                                   {"beta", "2.1.0-beta.1"}}},
                      RemovalCase{"everything_gone", kAllVersions, {}},
                      RemovalCase{"latest_below_kept_stables_falls_below_first",
                                  {"1.2.0"},
                                  {{"latest", "1.1.0"}},
                                  {{"latest", "1.2.0"}}},
                      RemovalCase{"nothing_below_latest_takes_the_highest_stable",
                                  {"1.0.0"},
                                  {{"latest", "2.1.0"}},
                                  {{"latest", "1.0.0"}}},
                      RemovalCase{"no_latest_in_the_input_gets_one",
                                  {},
                                  {{"next", "3.0.0-beta.1"}, {"latest", "2.1.0"}},
                                  {{"next", "3.0.0-beta.1"}}},
                      RemovalCase{"a_tag_naming_no_version_goes",
                                  {},
                                  {{"latest", "2.1.0"}},
                                  {{"latest", "2.1.0"}, {"ghost", "9.9.9"}}}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(NpmPackumentFilter, AddsDistTagsWhenTheDocumentHasNone) {
  std::string doc =
      R"({"name":"x","versions":{"1.0.0":{},"1.1.0-rc.1":{}},"time":{"1.0.0":"2020-01-01T00:00:00Z"}})";
  TableJudge judge;
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->json);
  EXPECT_TRUE(read.has_tags);
  EXPECT_EQ(read.tags, (std::map<std::string, std::string>{{"latest", "1.0.0"}}));
  EXPECT_EQ(read.times, std::vector<std::string>{"1.0.0"});
  EXPECT_EQ(result->tags_moved, 1u);
}

TEST(NpmPackumentFilter, AbbreviatedFormJudgesWithoutTimes) {
  std::string doc =
      R"({"name":"left-pad","modified":"2024-05-02T00:00:00.000Z","dist-tags":{"latest":"1.1.0"},)"
      R"("versions":{"1.0.0":{"name":"left-pad","version":"1.0.0","dist":{"tarball":"t1"}},)"
      R"("1.1.0":{"name":"left-pad","version":"1.1.0","dist":{"tarball":"t2"}}}})";
  TableJudge judge;
  judge.remove("1.1.0");
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  ASSERT_EQ(judge.calls.size(), 2u);
  EXPECT_FALSE(judge.calls[0].second.has_value());
  EXPECT_FALSE(judge.calls[1].second.has_value());
  EXPECT_EQ(
      result->json,
      R"({"name":"left-pad","modified":"2024-05-02T00:00:00.000Z","dist-tags":{"latest":"1.0.0"},)"
      R"("versions":{"1.0.0":{"name":"left-pad","version":"1.0.0","dist":{"tarball":"t1"}}}})");
}

TEST(NpmPackumentFilter, MinimumAgeStyleJudgeSeesTimesAndMissingTimes) {
  std::vector<Release> releases = kReleases;
  releases[1].time = "";                          // 1.1.0: no time at all
  releases[2].time = "2021-02-30T00:00:00.000Z";  // 1.2.0: no such day
  std::string doc = packument(releases);
  TableJudge judge;
  judge.max_published = 1672531200000;  // 2023-01-01T00:00:00Z: 2.1.0 is exactly that old
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->json);
  EXPECT_EQ(read.versions, (std::vector<std::string>{"1.0.0", "2.0.0", "2.1.0-beta.1", "2.1.0"}));
  EXPECT_EQ(read.tags.at("legacy"), "1.0.0");
  EXPECT_EQ(read.tags.at("next"), "2.1.0");
}

struct TimeCase {
  const char* text;
  std::optional<std::int64_t> millis;
};

class IsoTimes : public ::testing::TestWithParam<TimeCase> {};

TEST_P(IsoTimes, ParseStrictly) { EXPECT_EQ(parseIsoTime(GetParam().text), GetParam().millis); }

INSTANTIATE_TEST_SUITE_P(
    Table, IsoTimes,
    ::testing::Values(TimeCase{"2024-05-01T12:34:56.789Z", 1714566896789},
                      TimeCase{"2024-05-01T12:34:56Z", 1714566896000},
                      TimeCase{"2024-05-01T12:34:56.7Z", 1714566896700},
                      TimeCase{"2024-05-01T12:34:56.123456Z", 1714566896123},
                      TimeCase{"2024-05-01T14:34:56.789+02:00", 1714566896789},
                      TimeCase{"2024-05-01T10:34:56.789-02:00", 1714566896789},
                      TimeCase{"1970-01-01T00:00:00Z", 0}, TimeCase{"1969-12-31T23:59:59.999Z", -1},
                      TimeCase{"2000-02-29T00:00:00Z", 951782400000},
                      TimeCase{"1900-02-29T00:00:00Z", std::nullopt},
                      TimeCase{"2023-02-29T00:00:00Z", std::nullopt},
                      TimeCase{"2024-13-01T00:00:00Z", std::nullopt},
                      TimeCase{"2024-00-01T00:00:00Z", std::nullopt},
                      TimeCase{"2024-04-31T00:00:00Z", std::nullopt},
                      TimeCase{"2024-05-01T24:00:00Z", std::nullopt},
                      TimeCase{"2024-05-01T12:60:00Z", std::nullopt},
                      TimeCase{"2024-05-01T12:34:60Z", std::nullopt},
                      TimeCase{"2024-05-01 12:34:56Z", std::nullopt},
                      TimeCase{"2024-05-01T12:34:56", std::nullopt},
                      TimeCase{"2024-05-01T12:34:56.Z", std::nullopt},
                      TimeCase{"2024-05-01T12:34:56.1234567891Z", std::nullopt},
                      TimeCase{"2024-05-01T12:34:56Zjunk", std::nullopt},
                      TimeCase{"2024-05-01T12:34:56z", std::nullopt},
                      TimeCase{"2024-05-01T12:34:56+0200", std::nullopt},
                      TimeCase{"2024-5-01T12:34:56Z", std::nullopt},
                      TimeCase{"+2024-05-01T12:34:56Z", std::nullopt}, TimeCase{"", std::nullopt}));

struct RefusalCase {
  const char* name;
  std::string document;
};

class NpmRefusal : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(NpmRefusal, RefusesTheWholeDocument) {
  std::string doc = GetParam().document;
  const std::string original = doc;
  TableJudge judge;
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(doc, original);
}

const std::string kV = R"("versions":{"1.0.0":{"a":1}})";

INSTANTIATE_TEST_SUITE_P(
    Cases, NpmRefusal,
    ::testing::Values(
        RefusalCase{"empty", ""}, RefusalCase{"spaces", "  \n"}, RefusalCase{"not_json", "hello"},
        RefusalCase{"array", "[1,2]"}, RefusalCase{"string", R"("x")"},
        RefusalCase{"trailing_bytes", "{" + kV + "} x"},
        RefusalCase{"second_document", "{" + kV + "}{}"},
        RefusalCase{"extra_close", "{" + kV + "}}"},
        RefusalCase{"versions_array", R"({"versions":["1.0.0"]})"},
        RefusalCase{"version_not_object", R"({"versions":{"1.0.0":"x"}})"},
        RefusalCase{"time_number", R"({"versions":{},"time":{"1.0.0":5}})"},
        RefusalCase{"time_not_object", R"({"versions":{},"time":[]})"},
        RefusalCase{"dist_tag_number", R"({"versions":{},"dist-tags":{"latest":1}})"},
        RefusalCase{"repeated_version", R"({"versions":{"1.0.0":{},"1.0.0":{"evil":1}}})"},
        RefusalCase{"repeated_versions_member", R"({"versions":{},"versions":{"1.0.0":{}}})"},
        RefusalCase{"escaped_versions_key", R"({"versions":{},"vers\u0069ons":{"1.0.0":{}}})"},
        RefusalCase{"escaped_version_key", R"({"versions":{"1.0.\u0030":{}}})"},
        RefusalCase{"repeated_time", R"({"versions":{},"time":{"a":"x","a":"y"}})"},
        RefusalCase{"repeated_tag", R"({"versions":{},"dist-tags":{"a":"1","a":"2"}})"},
        RefusalCase{"repeated_other_key", R"({"name":"a","name":"b"})"},
        RefusalCase{"invalid_utf8", "{\"readme\":\"\xff\xfe\"}"},
        RefusalCase{"overlong_utf8", "{\"readme\":\"\xc0\xaf\"}"},
        RefusalCase{"bad_escape", R"({"readme":"\q"})"},
        RefusalCase{"short_unicode_escape", R"({"readme":"\u12"})"},
        RefusalCase{"lone_low_surrogate", R"({"readme":"\udc00"})"},
        RefusalCase{"lone_high_surrogate", R"({"readme":"\ud800x"})"},
        RefusalCase{"control_in_string", "{\"readme\":\"a\tb\"}"},
        RefusalCase{"nul_in_string", std::string("{\"readme\":\"a\0b\"}", 15)},
        RefusalCase{"bad_atom_in_manifest", R"({"versions":{"1.0.0":{"a":tru}}})"},
        RefusalCase{"leading_zero", R"({"versions":{"1.0.0":{"a":01}}})"},
        RefusalCase{"bare_minus", R"({"x":-})"}, RefusalCase{"dot_number", R"({"x":1.})"},
        RefusalCase{"missing_comma", R"({"versions":{"1.0.0":{"a":1 "b":2}}})"},
        RefusalCase{"trailing_comma", R"({"versions":{"1.0.0":{"a":1,}}})"},
        RefusalCase{"missing_colon", R"({"x" 1})"}, RefusalCase{"single_quotes", R"({'x':1})"},
        RefusalCase{"too_deep", "{\"x\":" + std::string(2000, '[') + std::string(2000, ']') + "}"},
        RefusalCase{"unclosed", R"({"versions":{"1.0.0":{})"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(NpmPackumentFilter, EveryTruncationIsAnError) {
  const std::string full = packument({kReleases[0], kReleases[6]}, {{"latest", "1.0.0"}}, "r");
  TableJudge judge;
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    std::string doc = full.substr(0, cut);
    auto result = filterNpmPackument(doc, judge, kSimpleOrder);
    // Only whitespace after the closing brace may go.
    const bool complete = full.find_first_not_of(" \n", cut) == std::string::npos;
    EXPECT_EQ(result.ok(), complete) << "cut at " << cut;
    EXPECT_EQ(doc, full.substr(0, cut));
  }
}

TEST(NpmPackumentFilter, HugeReadmeIsCopiedAsItIs) {
  std::string readme;
  while (readme.size() < (8u << 20)) {
    readme += "Lorem ipsum dolor sit amet, \\\"consectetur\\\" adipiscing elit \\u00e9\\n";
  }
  std::string doc = packument(kReleases, kTags, readme);
  doc.reserve(doc.size() + kMetadataPadding);
  const char* before = doc.data();
  TableJudge judge;
  judge.remove("3.0.0-beta.1");
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(doc.data(), before);  // reserved: padded in place, no copy
  EXPECT_NE(result->json.find("\"readme\": \"" + readme + "\""), std::string::npos);
  EXPECT_EQ(result->json.capacity(), result->json.size());  // reserved once, to the byte
}

TEST(NpmPackumentFilter, EscapedTagTargetsAreReadAsTheClientReadsThem) {
  std::string doc =
      R"({"versions":{"1.0.0":{},"2.0.0":{}},"dist-tags":{"latest":"2.0.\u0030","old":"1.0.\u0030"}})";
  TableJudge judge;
  judge.remove("2.0.0");
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(readOutput(result->json).tags,
            (std::map<std::string, std::string>{{"latest", "1.0.0"}, {"old", "1.0.0"}}));
}

TEST(NpmPackumentFilter, UnpublishedPackageKeepsItsTimeRecord) {
  std::string doc =
      R"({"name":"gone","time":{"created":"2020-01-01T00:00:00Z","modified":"2021-01-01T00:00:00Z",)"
      R"("1.0.0":"2020-01-01T00:00:00Z","unpublished":{"time":"2021-01-01T00:00:00Z","versions":["1.0.0"]}}})";
  TableJudge judge;
  auto result = filterNpmPackument(doc, judge, kSimpleOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->kept, 0u);
  EXPECT_EQ(readOutput(result->json).times,
            (std::vector<std::string>{"created", "modified", "unpublished"}));
}

struct VersionDocCase {
  const char* name;
  std::string document;
  bool ok;
  std::string version;
};

class NpmVersionDocument : public ::testing::TestWithParam<VersionDocCase> {};

TEST_P(NpmVersionDocument, JudgesTheOneVersion) {
  const VersionDocCase& c = GetParam();
  std::string doc = c.document;
  TableJudge judge;
  judge.remove("6.6.6", Reason::PackageMalicious, "MAL-1");
  auto result = judgeNpmVersionDocument(doc, judge, 1234);
  ASSERT_EQ(result.ok(), c.ok);
  EXPECT_EQ(doc, c.document);
  if (c.ok) {
    EXPECT_EQ(result->version, c.version);
    EXPECT_EQ(result->verdict.keeps(), c.version != "6.6.6");
    ASSERT_EQ(judge.calls.size(), 1u);
    EXPECT_EQ(judge.calls[0].second, std::optional<std::int64_t>(1234));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NpmVersionDocument,
    ::testing::Values(
        VersionDocCase{"kept", manifest("1.0.0"), true, "1.0.0"},
        VersionDocCase{"removed", manifest("6.6.6"), true, "6.6.6"},
        VersionDocCase{"escaped_version", R"({"version":"6.6.\u0036"})", true, "6.6.6"},
        VersionDocCase{"no_version", R"({"name":"x"})", false, ""},
        VersionDocCase{"version_number", R"({"version":1})", false, ""},
        VersionDocCase{"repeated_version", R"({"version":"1.0.0","version":"6.6.6"})", false, ""},
        VersionDocCase{"bad_json_elsewhere", R"({"version":"1.0.0","x":[1,]})", false, ""},
        VersionDocCase{"trailing", R"({"version":"1.0.0"}])", false, ""}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace sluice::proxy::packages
