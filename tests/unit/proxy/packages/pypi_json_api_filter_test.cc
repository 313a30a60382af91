#include "proxy/packages/pypi_json_api_filter.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <string>
#include <vector>

#include "tests/unit/proxy/packages/filter_test_support.h"

namespace sluice::proxy::packages {
namespace {

using policy::Reason;
using testing::TableJudge;
using Millis = std::optional<std::int64_t>;

using testing::kPypiOrder;

constexpr std::int64_t k2019 = 1546300800000;     // 2019-01-01T00:00:00Z
constexpr std::int64_t k2020 = 1577836800000;     // 2020-01-01
constexpr std::int64_t k2021 = 1609459200000;     // 2021-01-01
constexpr std::int64_t kDay = 86400000;           // 2021-01-02 is k2021 + kDay
constexpr std::int64_t k2022 = 1640995200000;     // 2022-01-01
constexpr std::int64_t k2023 = 1672531200000;     // 2023-01-01
constexpr std::int64_t k2024_06 = 1717200000000;  // 2024-06-01

struct File {
  std::string filename;
  std::string uploaded;  // upload_time_iso_8601; upload_time is its first 19 bytes
  std::string url = {};  // "" for the usual one
};

// A file as PyPI writes it (members in its order).
std::string fileJson(const File& f) {
  const std::string url =
      f.url.empty() ? "https://files.example/packages/ab/cd/" + f.filename : f.url;
  return R"({"comment_text":"","digests":{"md5":"d41d","sha256":"0123abcd"},"downloads":-1,)"
         R"("filename":")" +
         f.filename +
         R"(","has_sig":false,"packagetype":"sdist","requires_python":">=3.8",)"
         R"("size":1234,"upload_time":")" +
         f.uploaded.substr(0, 19) + R"(","upload_time_iso_8601":")" + f.uploaded + R"(","url":")" +
         url + R"(","yanked":false,"yanked_reason":null})";
}

std::string filesJson(const std::vector<File>& files) {
  std::string json = "[";
  for (std::size_t i = 0; i < files.size(); ++i) {
    json += (i ? "," : "") + fileJson(files[i]);
  }
  return json + "]";
}

std::string infoJson(const std::string& version) {
  return R"({"author":"A. Person","name":"Foo.Bar","project_urls":{"Home":"https://x/"},)"
         R"("requires_dist":null,"summary":"caf\u00e9 \"foo\"","version":")" +
         version + R"(","yanked":false})";
}

using Releases = std::vector<std::pair<std::string, std::vector<File>>>;

std::string packageDoc(const std::string& version, const Releases& releases,
                       const std::vector<File>& urls) {
  std::string json = R"({"info":)" + infoJson(version) + R"(,"last_serial":42,"releases":{)";
  for (std::size_t i = 0; i < releases.size(); ++i) {
    json += (i ? ",\"" : "\"") + releases[i].first + "\":" + filesJson(releases[i].second);
  }
  return json + R"(},"urls":)" + filesJson(urls) + R"(,"vulnerabilities":[]})";
}

std::string versionDoc(const std::string& version, const std::vector<File>& urls) {
  return R"({"info":)" + infoJson(version) + R"(,"last_serial":42,"urls":)" + filesJson(urls) +
         R"(,"vulnerabilities":[]})";
}

struct Read {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<std::string>> releases;  // key: file names
  std::vector<std::string> urls;
};

Read readOutput(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  Read read;
  simdjson::dom::object releases;
  if (root["releases"].get_object().get(releases) == simdjson::SUCCESS) {
    for (auto [key, files] : releases) {
      read.keys.emplace_back(key);
      auto& names = read.releases[std::string(key)];
      for (auto file : files.get_array()) {
        names.emplace_back(file["filename"].get_string().value());
      }
    }
  }
  for (auto file : root["urls"].get_array()) {
    read.urls.emplace_back(file["filename"].get_string().value());
  }
  return read;
}

using Names = std::vector<std::string>;

const File k10Sdist{"foo_bar-1.0.tar.gz", "2020-01-01T00:00:00.000000Z"};
const File k10Wheel{"Foo.Bar-1.0-py3-none-any.whl", "2020-01-02T00:00:00.000000Z"};
const File k20Sdist{"foo_bar-2.0.tar.gz", "2021-01-02T00:00:00.000000Z"};
const File k20Wheel{"foo_bar-2.0-py3-none-any.whl", "2021-01-01T00:00:00.000000Z"};
const File k20Late{"foo_bar-2.0-cp312-cp312-manylinux_2_17_x86_64.whl",
                   "2024-06-01T00:00:00.123456Z"};
const File k10Hidden{"foo_bar-1.0-py2-none-any.whl", "2019-01-01T00:00:00Z"};  // under 2.0
const File kOther{"other-2.0.tar.gz", "2019-01-01T00:00:00Z"};                 // not foo-bar's
const File k30Sdist{"foo_bar-3.0.tar.gz", "2022-01-01T00:00:00.000000Z"};

const Releases kReleases = {{"1.0", {k10Sdist, k10Wheel}},
                            {"2.0", {k20Sdist, k20Wheel, k20Late, k10Hidden, kOther}},
                            {"3.0", {k30Sdist}}};

TEST(PypiJsonApi, JudgesEachReleaseOnceThenEachOfItsFiles) {
  std::string doc = packageDoc("3.0", kReleases, {k30Sdist});
  const std::string original = doc;
  TableJudge judge;
  judge.remove("1.0", Reason::PackageMalicious, "MAL-2025-1");
  judge.max_uploaded = k2023;  // 2.0's cp312 wheel, added in 2024, is too new
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(doc, original);
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.keys, (Names{"2.0", "3.0"}));
  EXPECT_EQ(read.releases.at("2.0"), (Names{k20Sdist.filename, k20Wheel.filename}));
  EXPECT_EQ(read.releases.at("3.0"), (Names{k30Sdist.filename}));
  EXPECT_EQ(read.urls, (Names{k30Sdist.filename}));
  ASSERT_EQ(result->removed.size(), 2u);
  EXPECT_EQ(result->removed[0].version, "1.0");
  EXPECT_EQ(result->removed[0].reason, Reason::PackageMalicious);
  EXPECT_EQ(result->removed[0].advisory, "MAL-2025-1");
  EXPECT_TRUE(result->removed[0].whole);
  EXPECT_EQ(result->removed[1].version, "2.0");
  EXPECT_EQ(result->removed[1].reason, Reason::PackageTooNew);
  EXPECT_FALSE(result->removed[1].whole);
  EXPECT_EQ(result->kept_files, 4u);     // 2.0's two, 3.0's, and 3.0's again in urls
  EXPECT_EQ(result->removed_files, 3u);  // 1.0's two and the late wheel
  EXPECT_EQ(result->invalid_files, 2u);  // the 1.0 wheel under 2.0 and another project's
  EXPECT_EQ(result->info_version, "3.0");
  EXPECT_EQ(result->info_version_removed, std::nullopt);
  // Each release once, in document order, with its valid files' earliest upload: 2.0's wheel,
  // listed after its sdist; not the hidden 1.0 wheel's earlier one. urls is not judged again.
  EXPECT_EQ(judge.calls, (std::vector<std::pair<std::string, Millis>>{
                             {"1.0", k2020}, {"2.0", k2021}, {"3.0", k2022}}));
  // Every valid file, a removed version's too, with its own time.
  EXPECT_EQ(judge.file_calls,
            (std::vector<std::pair<std::string, Millis>>{{k10Sdist.filename, k2020},
                                                         {k10Wheel.filename, k2020 + kDay},
                                                         {k20Sdist.filename, k2021 + kDay},
                                                         {k20Wheel.filename, k2021},
                                                         {k20Late.filename, k2024_06 + 123},
                                                         {k30Sdist.filename, k2022}}));
  // What stays is the origin's bytes.
  EXPECT_NE(result->body.find(R"({"info":)" + infoJson("3.0") + R"(,"last_serial":42,)"),
            std::string::npos);
  EXPECT_NE(result->body.find(R"("2.0":[)" + fileJson(k20Sdist) + "," + fileJson(k20Wheel) + "]"),
            std::string::npos);
  EXPECT_NE(result->body.find(R"(,"vulnerabilities":[]})"), std::string::npos);
}

TEST(PypiJsonApi, ACompactDocumentNothingLeavesComesOutAsItWent) {
  std::string doc = packageDoc("3.0", {{"1.0", {k10Sdist}}, {"3.0", {k30Sdist}}}, {k30Sdist});
  TableJudge judge;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->body, doc);
  EXPECT_TRUE(result->removed.empty());
}

TEST(PypiJsonApi, AReleaseWithNoValidFileIsJudgedWithNoTime) {
  std::string doc = packageDoc("2.0", {{"1.0", {kOther}}, {"2.0", {k20Wheel}}}, {});
  TableJudge judge;
  judge.max_published = k2022;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(readOutput(result->body).keys, (Names{"2.0"}));
  ASSERT_EQ(judge.calls.size(), 2u);
  EXPECT_EQ(judge.calls[0], std::make_pair(std::string("1.0"), Millis()));
  ASSERT_EQ(result->removed.size(), 1u);
  EXPECT_EQ(result->removed[0].version, "1.0");
}

TEST(PypiJsonApi, AKeptReleaseThatLostEveryFileGoesWhole) {
  std::string doc = packageDoc("2.0", {{"1.0", {k10Sdist}}, {"2.0", {k20Late}}}, {k20Late});
  TableJudge judge;
  judge.max_uploaded = k2023;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.keys, (Names{"1.0"}));
  EXPECT_TRUE(read.urls.empty());
  ASSERT_EQ(result->removed.size(), 1u);
  EXPECT_EQ(result->removed[0].reason, Reason::PackageTooNew);
  EXPECT_TRUE(result->removed[0].whole);
  EXPECT_EQ(result->info_version_removed, std::optional<std::size_t>(0));  // its entry
}

// info.version's release is found by `order`; `info` itself is never rewritten.
struct InfoCase {
  const char* name;
  std::string info_version;
  std::string removed;  // the release judged out, "" for none
  bool info_version_removed;
};

class PypiJsonApiInfo : public ::testing::TestWithParam<InfoCase> {};

TEST_P(PypiJsonApiInfo, InfoStaysAsItWas) {
  std::string doc = packageDoc(GetParam().info_version, kReleases, {k30Sdist});
  TableJudge judge;
  if (!GetParam().removed.empty()) {
    judge.remove(GetParam().removed);
  }
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->info_version, GetParam().info_version);
  EXPECT_EQ(result->info_version_removed.has_value(), GetParam().info_version_removed);
  EXPECT_EQ(result->body.find(R"({"info":)" + infoJson(GetParam().info_version) + ","), 0u);
  // The urls' file of 3.0 stays exactly when 3.0's did.
  EXPECT_EQ(readOutput(result->body).urls,
            GetParam().removed == "3.0" ? Names{} : Names{k30Sdist.filename});
  EXPECT_EQ(judge.calls.size(), kReleases.size());
}

INSTANTIATE_TEST_SUITE_P(Cases, PypiJsonApiInfo,
                         ::testing::Values(InfoCase{"kept", "3.0", "", false},
                                           InfoCase{"removed", "3.0", "3.0", true},
                                           InfoCase{"removed_other_spelling", "3.0.0", "3.0", true},
                                           InfoCase{"kept_other_spelling", "3.0.0", "", false},
                                           InfoCase{"another_removed", "3.0", "2.0", false}),
                         [](const auto& row) { return std::string(row.param.name); });

// /pypi/NAME/VERSION/json: `urls` is info.version's one group.
struct VersionCase {
  const char* name;
  std::string removed;  // judged out, "" for none
  Millis max_published, max_uploaded;
  Names urls;
  std::vector<RemovedVersion> expected;
  bool info_version_removed;
};

class PypiJsonApiVersion : public ::testing::TestWithParam<VersionCase> {};

TEST_P(PypiJsonApiVersion, JudgesTheVersionOnceThenEachFile) {
  const VersionCase& c = GetParam();
  std::string doc = versionDoc("2.0", {k20Sdist, k20Wheel, k20Late, k10Hidden});
  const std::string original = doc;
  TableJudge judge;
  if (!c.removed.empty()) {
    judge.remove(c.removed);
  }
  judge.max_published = c.max_published;
  judge.max_uploaded = c.max_uploaded;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(doc, original);
  EXPECT_EQ(readOutput(result->body).urls, c.urls);
  ASSERT_EQ(result->removed.size(), c.expected.size());
  for (std::size_t i = 0; i < c.expected.size(); ++i) {
    EXPECT_EQ(result->removed[i].version, c.expected[i].version);
    EXPECT_EQ(result->removed[i].reason, c.expected[i].reason);
    EXPECT_EQ(result->removed[i].whole, c.expected[i].whole);
  }
  EXPECT_EQ(result->info_version_removed.has_value(), c.info_version_removed);
  EXPECT_EQ(result->kept_files, c.urls.size());
  EXPECT_EQ(result->removed_files, 3 - c.urls.size());
  EXPECT_EQ(result->invalid_files, 1u);  // the 1.0 wheel
  EXPECT_EQ(judge.calls, (std::vector<std::pair<std::string, Millis>>{{"2.0", k2021}}));
  EXPECT_EQ(judge.file_calls.size(), 3u);
  EXPECT_EQ(result->body.find(R"({"info":)" + infoJson("2.0") + ","), 0u);
}

const Names kAll20 = {k20Sdist.filename, k20Wheel.filename, k20Late.filename};

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiJsonApiVersion,
    ::testing::Values(
        VersionCase{"kept", "", {}, {}, kAll20, {}, false},
        VersionCase{"removed", "2.0", {}, {}, {}, {{"2.0", Reason::PackageDenied, {}}}, true},
        VersionCase{
            "published_too_late", "", k2020, {}, {}, {{"2.0", Reason::PackageDenied, {}}}, true},
        VersionCase{"partial",
                    "",
                    {},
                    k2023,
                    {k20Sdist.filename, k20Wheel.filename},
                    {{"2.0", Reason::PackageTooNew, {}, false}},
                    false},
        VersionCase{
            "every_file_too_new", "", {}, k2020, {}, {{"2.0", Reason::PackageTooNew, {}}}, true}),
    [](const auto& row) { return std::string(row.param.name); });

// `upload_time_iso_8601` when it is a string, else `upload_time` read as UTC.
struct TimeCase {
  const char* name;
  std::string members;  // the file's time members, JSON
  Millis read;
};

class PypiJsonApiTimes : public ::testing::TestWithParam<TimeCase> {};

TEST_P(PypiJsonApiTimes, ReadsTheUploadTime) {
  const std::string file = R"({"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz")" +
                           std::string(GetParam().members.empty() ? "" : ",") + GetParam().members +
                           "}";
  std::string doc = R"({"info":{"name":"foo-bar","version":"1.0"},"urls":[)" + file + "]}";
  TableJudge judge;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  ASSERT_EQ(judge.calls.size(), 1u);
  EXPECT_EQ(judge.calls[0].second, GetParam().read);
  ASSERT_EQ(judge.file_calls.size(), 1u);
  EXPECT_EQ(judge.file_calls[0].second, GetParam().read);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiJsonApiTimes,
    ::testing::Values(
        TimeCase{"iso", R"("upload_time_iso_8601":"2020-01-01T00:00:00.123456Z")", k2020 + 123},
        TimeCase{"iso_offset", R"("upload_time_iso_8601":"2020-01-01T01:00:00+01:00")", k2020},
        TimeCase{"plain_fallback", R"("upload_time":"2020-01-01T00:00:00")", k2020},
        TimeCase{"plain_fraction", R"("upload_time":"2020-01-01T00:00:00.5")", k2020 + 500},
        TimeCase{
            "iso_first",
            R"("upload_time":"2019-01-01T00:00:00","upload_time_iso_8601":"2020-01-01T00:00:00Z")",
            k2020},
        TimeCase{"iso_null_then_plain",
                 R"("upload_time_iso_8601":null,"upload_time":"2019-01-01T00:00:00")", k2019},
        TimeCase{"both_null", R"("upload_time":null,"upload_time_iso_8601":null)", std::nullopt},
        TimeCase{"none", "", std::nullopt},
        TimeCase{"iso_unreadable",
                 R"("upload_time_iso_8601":"yesterday","upload_time":"2019-01-01T00:00:00")",
                 std::nullopt},
        TimeCase{"plain_with_a_zone", R"("upload_time":"2020-01-01T00:00:00Z")", std::nullopt},
        TimeCase{"plain_escaped", R"("upload_time":"2020-01-01T00:00:0\u0030")", std::nullopt},
        TimeCase{"plain_long", R"("upload_time":")" + std::string(60, '1') + "\"", std::nullopt}),
    [](const auto& row) { return std::string(row.param.name); });

// One file listed under `key` (info.version too): valid or dropped unjudged.
struct ValidityCase {
  const char* name;
  std::string key;
  File file;
  bool valid;
};

class PypiJsonApiValidity : public ::testing::TestWithParam<ValidityCase> {};

TEST_P(PypiJsonApiValidity, AFileMustBeOfItsRelease) {
  const ValidityCase& c = GetParam();
  std::string doc = packageDoc(c.key, {{c.key, {c.file}}}, {c.file});
  TableJudge judge;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->kept_files, c.valid ? 2u : 0u);
  EXPECT_EQ(result->invalid_files, c.valid ? 0u : 2u);
  EXPECT_EQ(judge.file_calls.size(), c.valid ? 1u : 0u);
  ASSERT_EQ(judge.calls.size(), 1u);  // the release stays, judged with no time when invalid
  EXPECT_EQ(judge.calls[0].second.has_value(), c.valid);
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.releases.at(c.key).size(), c.valid ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiJsonApiValidity,
    ::testing::Values(
        ValidityCase{"valid", "1.0", k10Sdist, true},
        ValidityCase{"key_spelled_otherwise", "1.0.0", k10Sdist, true},
        ValidityCase{"wheel_version_as_pip_reads_it",
                     "1.0-1",
                     {"foo_bar-1.0_1-py3-none-any.whl", "2020-01-01T00:00:00Z"},
                     true},
        ValidityCase{"another_project", "2.0", kOther, false},
        ValidityCase{"another_version", "2.0", k10Sdist, false},
        ValidityCase{"legacy_egg", "1.0", {"foo_bar-1.0-py2.7.egg", "2020-01-01T00:00:00Z"}, false},
        ValidityCase{"url_names_another_file",
                     "1.0",
                     {k10Sdist.filename, k10Sdist.uploaded, "https://h/p/foo_bar-2.0.tar.gz"},
                     false},
        ValidityCase{"url_egg_fragment",
                     "1.0",
                     {k10Sdist.filename, k10Sdist.uploaded,
                      "https://h/p/foo_bar-1.0.tar.gz#egg=foo_bar-9.9"},
                     false}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(PypiJsonApi, AUrlsFileStaysOnlyWhenItsReleaseKeptIt) {
  const File bad_url{k30Sdist.filename, k30Sdist.uploaded, "https://h/p/foo_bar-2.0.tar.gz"};
  const File unlisted{"foo_bar-3.0-py3-none-any.whl", "2022-01-01T00:00:00Z"};
  std::string doc = packageDoc("3.0", kReleases, {k30Sdist, bad_url, unlisted, k20Sdist});
  TableJudge judge;
  auto result = filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(readOutput(result->body).urls, (Names{k30Sdist.filename}));
  EXPECT_EQ(result->invalid_files, 2u + 3u);  // kReleases' two, and three of urls
  EXPECT_EQ(judge.calls.size(), 3u);
  EXPECT_EQ(judge.file_calls.size(), 6u);  // releases' valid files only
}

struct RefusalCase {
  const char* name;
  std::string document;
};

class PypiJsonApiRefusal : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(PypiJsonApiRefusal, RefusesTheWholeDocument) {
  std::string doc = GetParam().document;
  TableJudge judge;
  EXPECT_FALSE(filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder).ok());
  EXPECT_EQ(doc, GetParam().document);
  EXPECT_TRUE(judge.calls.empty());
}

const std::string kI = R"("info":{"name":"foo-bar","version":"1.0"})";
const std::string kF = R"({"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz")";
std::string withUrls(const std::string& members) {
  return "{" + kI + R"(,"urls":[)" + members + "]}";
}
std::string withFile(const std::string& members) { return withUrls(kF + members + "}"); }

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiJsonApiRefusal,
    ::testing::Values(
        RefusalCase{"not_json", "<html>"}, RefusalCase{"array", "[]"},
        RefusalCase{"no_info", R"({"urls":[]})"}, RefusalCase{"no_urls", "{" + kI + "}"},
        RefusalCase{"info_array", R"({"info":[],"urls":[]})"},
        RefusalCase{"no_name", R"({"info":{"version":"1.0"},"urls":[]})"},
        RefusalCase{"no_version", R"({"info":{"name":"foo-bar"},"urls":[]})"},
        RefusalCase{"name_number", R"({"info":{"name":1,"version":"1.0"},"urls":[]})"},
        RefusalCase{"version_null", R"({"info":{"name":"foo-bar","version":null},"urls":[]})"},
        RefusalCase{"another_project", R"({"info":{"name":"foo","version":"1.0"},"urls":[]})"},
        RefusalCase{"name_repeated",
                    R"({"info":{"name":"foo-bar","version":"1.0","name":"x"},"urls":[]})"},
        RefusalCase{"version_repeated",
                    R"({"info":{"name":"foo-bar","version":"1.0","version":"2"},"urls":[]})"},
        RefusalCase{"info_key_escaped",
                    R"({"info":{"name":"foo-bar","version":"1.0","n\u0061me":"x"},"urls":[]})"},
        RefusalCase{"info_bad_json",
                    R"({"info":{"name":"foo-bar","version":"1.0","size":01},"urls":[]})"},
        RefusalCase{"top_key_escaped", "{" + kI + R"(,"url\u0073":[]})"},
        RefusalCase{"top_key_repeated", "{" + kI + R"(,"urls":[],"urls":[]})"},
        RefusalCase{"info_repeated", "{" + kI + "," + kI + R"(,"urls":[]})"},
        RefusalCase{"urls_object", "{" + kI + R"(,"urls":{}})"},
        RefusalCase{"releases_array", "{" + kI + R"(,"releases":[],"urls":[]})"},
        RefusalCase{"release_object", "{" + kI + R"(,"releases":{"1.0":{}},"urls":[]})"},
        RefusalCase{"release_repeated",
                    "{" + kI + R"(,"releases":{"1.0":[],"2.0":[],"1.0":[]},"urls":[]})"},
        RefusalCase{"release_key_escaped", "{" + kI + R"(,"releases":{"1.\u0030":[]},"urls":[]})"},
        RefusalCase{"file_string", withUrls(R"("foo_bar-1.0.tar.gz")")},
        RefusalCase{"file_without_url", withUrls(R"({"filename":"foo_bar-1.0.tar.gz"})")},
        RefusalCase{"file_without_filename", withUrls(R"({"url":"foo_bar-1.0.tar.gz"})")},
        RefusalCase{"filename_number", withUrls(R"({"filename":1,"url":"x"})")},
        RefusalCase{"url_null", withUrls(R"({"filename":"x","url":null})")},
        RefusalCase{"upload_time_number", withFile(R"(,"upload_time":1577836800)")},
        RefusalCase{"upload_time_iso_true", withFile(R"(,"upload_time_iso_8601":true)")},
        RefusalCase{"filename_repeated", withFile(R"(,"filename":"foo_bar-9.tar.gz")")},
        RefusalCase{"url_repeated", withFile(R"(,"url":"x")")},
        RefusalCase{"upload_time_repeated",
                    withFile(R"(,"upload_time":null,"upload_time":"2020-01-01T00:00:00")")},
        RefusalCase{"upload_time_iso_repeated",
                    withFile(R"(,"upload_time_iso_8601":null,"upload_time_iso_8601":null)")},
        RefusalCase{"file_key_escaped", withFile(R"(,"file\u006eame":"x")")},
        RefusalCase{"file_bad_json", withFile(R"(,"size":01)")},
        RefusalCase{"released_file_bad_json",
                    "{" + kI + R"(,"releases":{"1.0":[)" + kF + R"(,"size":-}]},"urls":[]})"},
        RefusalCase{"vulnerabilities_bad_json", "{" + kI + R"(,"urls":[],"vulnerabilities":[,]})"},
        RefusalCase{"trailing", "{" + kI + R"(,"urls":[]}])"},
        RefusalCase{"invalid_utf8", "{" + kI + ",\"urls\":[],\"x\":\"\xe9\"}"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(PypiJsonApi, EveryTruncationIsAnError) {
  const std::string full = packageDoc("2.0", {{"2.0", {k20Sdist, kOther}}}, {k20Sdist});
  TableJudge judge;
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    std::string doc = full.substr(0, cut);
    EXPECT_FALSE(filterPypiJsonApi(doc, "foo-bar", judge, kPypiOrder).ok()) << cut;
  }
  EXPECT_TRUE(judge.calls.empty());
}

TEST(PypiJsonApi, RefusesAProjectNameThatIsNone) {
  std::string doc = versionDoc("1.0", {k10Sdist});
  TableJudge judge;
  EXPECT_FALSE(filterPypiJsonApi(doc, "foo bar", judge, kPypiOrder).ok());
}

// kMaxJsonApiFiles bounds the files of all arrays together, and the releases.
TEST(PypiJsonApi, RefusesMoreFilesOrReleasesThanTheBound) {
  const std::string file = R"({"filename":"a","url":"a"})";
  const std::size_t half = kMaxJsonApiFiles / 2;
  std::string files;
  for (std::size_t i = 0; i < half; ++i) {
    files += (i ? "," : "") + file;
  }
  const std::string start = "{" + kI + R"(,"releases":{"1.0":[)" + files + R"(]},"urls":[)";
  std::string at_bound = start + files + "]}";
  std::string over = start + files + "," + file + "]}";
  TableJudge judge;
  auto kept = filterPypiJsonApi(at_bound, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(kept.ok()) << kept.error().what;
  EXPECT_EQ(kept->invalid_files, kMaxJsonApiFiles);
  EXPECT_FALSE(filterPypiJsonApi(over, "foo-bar", judge, kPypiOrder).ok());

  std::string releases = "{" + kI + R"(,"releases":{)";
  for (std::size_t i = 0; i <= kMaxJsonApiFiles; ++i) {
    releases += (i ? ",\"" : "\"") + std::to_string(i) + "\":[]";
  }
  releases += R"(},"urls":[]})";
  EXPECT_FALSE(filterPypiJsonApi(releases, "foo-bar", judge, kPypiOrder).ok());
}

}  // namespace
}  // namespace sluice::proxy::packages
