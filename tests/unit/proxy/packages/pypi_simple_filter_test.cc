#include "proxy/packages/pypi_simple_filter.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

#include "base/ascii.h"
#include "proxy/packages/pypi_file_name.h"
#include "tests/unit/proxy/packages/filter_test_support.h"

namespace sluice::proxy::packages {
namespace {

using policy::Reason;
using testing::TableJudge;

using testing::kPypiOrder;

struct File {
  std::string filename;
  std::string upload_time;  // "" for none
  std::string url = {};     // "" for the usual one
};

std::string fileJson(const File& f) {
  const std::string url =
      f.url.empty() ? "https://files.example/packages/ab/cd/" + f.filename : f.url;
  std::string json = R"({"filename":")" + f.filename + R"(","url":")" + url +
                     R"(","hashes":{"sha256":"0123abcd"},"requires-python":">=3.8",)"
                     R"("core-metadata":{"sha256":"beef"},"yanked":false,"size":1234)";
  if (!f.upload_time.empty()) {
    json += R"(,"upload-time":")" + f.upload_time + "\"";
  }
  return json + "}";
}

const std::vector<File> kFiles = {
    {"Foo.Bar-0.9.zip", "2019-01-01T00:00:00.000000Z"},
    {"foo_bar-1.0.tar.gz", "2020-01-02T00:00:00.000000Z"},
    {"foo_bar-1.0-py3-none-any.whl", "2020-01-01T00:00:00.000000Z"},
    {"foo_bar-2.0.tar.gz", "2023-01-01T00:00:00.000000Z"},
    {"foo_bar-2.0-py3-none-any.whl", "2023-01-01T00:00:01.000000Z"},
    {"foo_bar-2.0-1-cp312-cp312-manylinux_2_17_x86_64.whl", "2023-01-02T00:00:00Z"},
    {"foo_bar-3.0rc1.tar.gz", "2024-05-01T12:34:56.123456Z"},
    {"foo_bar-0.8-py2.7.egg", "2018-01-01T00:00:00Z"},  // legacy: dropped unjudged
    {"other-1.0.tar.gz", "2020-01-01T00:00:00Z"},       // another project's: dropped
};

std::string page(const std::vector<File>& files = kFiles,
                 const std::string& versions = R"(["0.9","1.0","2.0","3.0rc1"])") {
  std::string json =
      R"({"meta":{"api-version":"1.1","_last-serial":42},"name":"Foo.Bar","files":[)";
  for (std::size_t i = 0; i < files.size(); ++i) {
    json += (i ? ",\n  " : "\n  ") + fileJson(files[i]);
  }
  return json + "],\"versions\":" + versions + "}";
}

struct Read {
  std::vector<std::string> files;
  std::vector<std::string> versions;
};

Read readOutput(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  Read read;
  for (auto file : root["files"].get_array()) {
    read.files.emplace_back(file["filename"].get_string().value());
  }
  for (auto version : root["versions"].get_array()) {
    read.versions.emplace_back(version.get_string().value());
  }
  return read;
}

const std::vector<std::string> kValidNames = {"Foo.Bar-0.9.zip",
                                              "foo_bar-1.0.tar.gz",
                                              "foo_bar-1.0-py3-none-any.whl",
                                              "foo_bar-2.0.tar.gz",
                                              "foo_bar-2.0-py3-none-any.whl",
                                              "foo_bar-2.0-1-cp312-cp312-manylinux_2_17_x86_64.whl",
                                              "foo_bar-3.0rc1.tar.gz"};

TEST(PypiSimpleJson, JudgesEachVersionOnceWithItsEarliestUpload) {
  std::string doc = page();
  const std::string original = doc;
  TableJudge judge;
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(doc, original);
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.files, kValidNames);
  EXPECT_EQ(read.versions, (std::vector<std::string>{"0.9", "1.0", "2.0", "3.0rc1"}));
  EXPECT_EQ(result->kept_files, 7u);
  EXPECT_EQ(result->invalid_files, 2u);
  EXPECT_EQ(result->removed_files, 0u);
  ASSERT_EQ(judge.calls.size(), 4u);
  EXPECT_EQ(judge.calls[0],
            std::make_pair(std::string("0.9"), std::optional<std::int64_t>(1546300800000)));
  // 1.0: the wheel's time, earlier than the sdist's, though listed after it.
  EXPECT_EQ(judge.calls[1],
            std::make_pair(std::string("1.0"), std::optional<std::int64_t>(1577836800000)));
  EXPECT_EQ(judge.calls[2].second, std::optional<std::int64_t>(1672531200000));
  EXPECT_EQ(judge.calls[3].first, "3.0rc1");
  // Kept files are copied as the origin wrote them.
  EXPECT_NE(result->body.find(fileJson(kFiles[1])), std::string::npos);
}

TEST(PypiSimpleJson, RemovesEveryFileOfARemovedVersion) {
  std::string doc = page();
  TableJudge judge;
  judge.remove("2.0", Reason::PackageMalicious, "MAL-2025-7");
  auto result = filterSimpleJson(doc, "FOO_bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.files,
            (std::vector<std::string>{"Foo.Bar-0.9.zip", "foo_bar-1.0.tar.gz",
                                      "foo_bar-1.0-py3-none-any.whl", "foo_bar-3.0rc1.tar.gz"}));
  EXPECT_EQ(read.versions, (std::vector<std::string>{"0.9", "1.0", "3.0rc1"}));
  EXPECT_EQ(result->removed_files, 3u);
  ASSERT_EQ(result->removed.size(), 1u);
  EXPECT_EQ(result->removed[0].version, "2.0");
  EXPECT_EQ(result->removed[0].reason, Reason::PackageMalicious);
  EXPECT_EQ(result->removed[0].advisory, "MAL-2025-7");
}

// A PyPI release takes files at any time: a wheel added today to a year-old release is a day
// old (docs/packages.md#the-age-rule). A kept version's files are each judged by their own
// upload time; the version stays listed while one of its files does.
TEST(PypiSimpleJson, EachFileOfAKeptVersionIsJudgedByItsOwnUpload) {
  std::string doc = page();
  TableJudge judge;
  judge.max_uploaded = 1672531200500;  // 2023-01-01T00:00:00.5Z: 2.0's sdist is older
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.files,
            (std::vector<std::string>{"Foo.Bar-0.9.zip", "foo_bar-1.0.tar.gz",
                                      "foo_bar-1.0-py3-none-any.whl", "foo_bar-2.0.tar.gz"}));
  // 3.0rc1 lost its only file; 2.0 kept one.
  EXPECT_EQ(read.versions, (std::vector<std::string>{"0.9", "1.0", "2.0"}));
  EXPECT_EQ(result->kept_files, 4u);
  EXPECT_EQ(result->removed_files, 3u);
  ASSERT_EQ(result->removed.size(), 2u);
  EXPECT_EQ(result->removed[0].version, "2.0");
  EXPECT_EQ(result->removed[0].reason, Reason::PackageTooNew);
  EXPECT_FALSE(result->removed[0].whole);
  EXPECT_EQ(result->removed[1].version, "3.0rc1");
  EXPECT_EQ(result->removed[1].reason, Reason::PackageTooNew);
  EXPECT_TRUE(result->removed[1].whole);
  // Every valid file is asked about, in order, with its own time.
  ASSERT_EQ(judge.file_calls.size(), kValidNames.size());
  for (std::size_t i = 0; i < kValidNames.size(); ++i) {
    EXPECT_EQ(judge.file_calls[i].first, kValidNames[i]);
  }
  EXPECT_EQ(judge.file_calls[4].second, std::optional<std::int64_t>(1672531201000));
}

TEST(PypiSimpleJson, ARemovedVersionLosesEveryFileWhateverTheirTimes) {
  std::string doc = page();
  TableJudge judge;
  judge.remove("1.0", Reason::PackageMalicious, "MAL-2025-9");
  judge.max_uploaded = 1672531200500;
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  const Read read = readOutput(result->body);
  EXPECT_EQ(read.files, (std::vector<std::string>{"Foo.Bar-0.9.zip", "foo_bar-2.0.tar.gz"}));
  EXPECT_EQ(read.versions, (std::vector<std::string>{"0.9", "2.0"}));
  ASSERT_EQ(result->removed.size(), 3u);
  EXPECT_EQ(result->removed[0].version, "1.0");
  EXPECT_EQ(result->removed[0].reason, Reason::PackageMalicious);  // the version's reason
  EXPECT_TRUE(result->removed[0].whole);
  // The removed version's files were asked about too: a judge sees every upload time.
  EXPECT_EQ(judge.file_calls.size(), kValidNames.size());
}

TEST(PypiSimpleJson, VersionsEntriesGoByTheOrderNotOnlyByBytes) {
  std::string doc = page(kFiles, R"(["0.9","1.0.0","2.0"])");
  TableJudge judge;
  judge.remove("1.0");
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(readOutput(result->body).versions, (std::vector<std::string>{"0.9", "2.0"}));
}

TEST(PypiSimpleJson, MissingOrMalformedUploadTimes) {
  std::vector<File> files = {{"foo_bar-1.0.tar.gz", "2020-13-01T00:00:00Z"},
                             {"foo_bar-1.0-py3-none-any.whl", "2021-01-01T00:00:00Z"},
                             {"foo_bar-2.0.tar.gz", ""},
                             {"foo_bar-2.0-py3-none-any.whl", "yesterday"}};
  std::string doc = page(files, "[]");
  TableJudge judge;
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  ASSERT_EQ(judge.calls.size(), 2u);
  EXPECT_EQ(judge.calls[0].second, std::optional<std::int64_t>(1609459200000));
  EXPECT_FALSE(judge.calls[1].second.has_value());
}

TEST(PypiSimpleJson, WheelVersionsAreReadAsPipReadsThem) {
  std::string doc = page({{"foo_bar-1.0_1-py3-none-any.whl", ""}}, "[]");
  TableJudge judge;
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  ASSERT_EQ(judge.calls.size(), 1u);
  EXPECT_EQ(judge.calls[0].first, "1.0-1");  // a post release, as pip reads it
}

struct UrlCase {
  const char* name;
  std::string url;
  bool kept;
};

class PypiFileUrls : public ::testing::TestWithParam<UrlCase> {};

TEST_P(PypiFileUrls, TheUrlMustNameTheFile) {
  std::string doc = page({{"foo_bar-1.0.tar.gz", "", GetParam().url}}, "[]");
  TableJudge judge;
  auto result = filterSimpleJson(doc, "foo-bar", judge, kPypiOrder);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->kept_files, GetParam().kept ? 1u : 0u);
  EXPECT_EQ(result->invalid_files, GetParam().kept ? 0u : 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiFileUrls,
    ::testing::Values(UrlCase{"absolute", "https://h/p/foo_bar-1.0.tar.gz", true},
                      UrlCase{"relative", "../../p/foo_bar-1.0.tar.gz", true},
                      UrlCase{"bare", "foo_bar-1.0.tar.gz", true},
                      UrlCase{"query", "https://h/p/foo_bar-1.0.tar.gz?x=1", true},
                      UrlCase{"hash_fragment", "https://h/p/foo_bar-1.0.tar.gz#sha256=abcd", true},
                      UrlCase{"percent_encoded", "https://h/p/foo%5Fbar-1.0.tar.gz", true},
                      UrlCase{"another_file", "https://h/p/foo_bar-9.9.tar.gz", false},
                      UrlCase{"egg_fragment", "https://h/p/foo_bar-1.0.tar.gz#egg=foo_bar-9.9",
                              false},
                      UrlCase{"trailing_slash", "https://h/p/foo_bar-1.0.tar.gz/", false},
                      UrlCase{"encoded_slash", "https://h/p%2Ffoo_bar-1.0.tar.gz", false},
                      UrlCase{"bad_escape", "https://h/p/foo_bar-1.0.tar.gz%2", false},
                      UrlCase{"backslash", "https://h/p\\\\foo_bar-1.0.tar.gz", false},
                      UrlCase{"space", "https://h/p/foo_bar-1.0.tar.gz ", false},
                      UrlCase{"host_only", "https://h/", false}),
    [](const auto& row) { return std::string(row.param.name); });

struct RefusalCase {
  const char* name;
  std::string document;
};

class PypiJsonRefusal : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(PypiJsonRefusal, RefusesTheWholePage) {
  std::string doc = GetParam().document;
  TableJudge judge;
  EXPECT_FALSE(filterSimpleJson(doc, "foo-bar", judge, kPypiOrder).ok());
  EXPECT_EQ(doc, GetParam().document);
}

const std::string kF = R"({"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz"})";

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiJsonRefusal,
    ::testing::Values(
        RefusalCase{"not_json", "<html>"}, RefusalCase{"array", "[]"},
        RefusalCase{"no_name", R"({"files":[]})"}, RefusalCase{"no_files", R"({"name":"foo-bar"})"},
        RefusalCase{"another_project", R"({"name":"foo","files":[]})"},
        RefusalCase{"name_number", R"({"name":1,"files":[]})"},
        RefusalCase{"files_object", R"({"name":"foo-bar","files":{}})"},
        RefusalCase{"file_string", R"({"name":"foo-bar","files":["x"]})"},
        RefusalCase{"file_without_url",
                    R"({"name":"foo-bar","files":[{"filename":"foo_bar-1.0.tar.gz"}]})"},
        RefusalCase{"filename_number", R"({"name":"foo-bar","files":[{"filename":1,"url":"u"}]})"},
        RefusalCase{
            "repeated_filename",
            R"({"name":"foo-bar","files":[{"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz","filename":"foo_bar-9.tar.gz"}]})"},
        RefusalCase{
            "repeated_url",
            R"({"name":"foo-bar","files":[{"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz","url":"x"}]})"},
        RefusalCase{
            "escaped_key",
            R"({"name":"foo-bar","files":[{"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz","file\u006eame":"x"}]})"},
        RefusalCase{"repeated_files", R"({"name":"foo-bar","files":[],"files":[)" + kF + "]}"},
        RefusalCase{"versions_number", R"({"name":"foo-bar","files":[],"versions":[1]})"},
        RefusalCase{
            "bad_json_in_a_file",
            R"({"name":"foo-bar","files":[{"filename":"foo_bar-1.0.tar.gz","url":"foo_bar-1.0.tar.gz","size":01}]})"},
        RefusalCase{"trailing", R"({"name":"foo-bar","files":[]}])"},
        RefusalCase{"invalid_utf8", "{\"name\":\"foo-bar\",\"files\":[],\"x\":\"\xe9\"}"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(PypiSimpleJson, EveryTruncationIsAnError) {
  const std::string full = page({kFiles[1], kFiles[7]}, R"(["1.0"])");
  TableJudge judge;
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    std::string doc = full.substr(0, cut);
    EXPECT_FALSE(filterSimpleJson(doc, "foo-bar", judge, kPypiOrder).ok()) << cut;
  }
}

TEST(PypiSimpleJson, RefusesAProjectNameThatIsNone) {
  std::string doc = page();
  TableJudge judge;
  EXPECT_FALSE(filterSimpleJson(doc, "foo bar", judge, kPypiOrder).ok());
}

struct NameCase {
  const char* file;
  std::optional<std::string> version;  // as pip reads it
};

class PypiFileNames : public ::testing::TestWithParam<NameCase> {};

TEST_P(PypiFileNames, ReadAsPipReadsThem) {
  const auto version = versionOfFile(GetParam().file, "foo-bar");
  ASSERT_EQ(version.has_value(), GetParam().version.has_value());
  if (version) {
    std::string read;
    appendPipVersion(read, *version);
    EXPECT_EQ(read, *GetParam().version);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, PypiFileNames,
    ::testing::Values(
        NameCase{"foo_bar-1.0-py3-none-any.whl", "1.0"},
        NameCase{"Foo.Bar-1.0-py3-none-any.whl", "1.0"},
        NameCase{"foo_bar-1.0-1-py3-none-any.whl", "1.0"},
        NameCase{"foo_bar-1.0-b1-py3-none-any.whl", std::nullopt},
        NameCase{"foo_bar-1.0-none-any.whl", std::nullopt},
        NameCase{"foo_bar-1.0-1-2-py3-none-any.whl", std::nullopt},
        NameCase{"foo_bar--py3-none-any.whl", std::nullopt},
        NameCase{"foo_bar-1.0_post1-py3-none-any.whl", "1.0-post1"},
        NameCase{"foo_bar-1.0.tar.gz", "1.0"}, NameCase{"foo-bar-1.0.zip", "1.0"},
        NameCase{"FOO__BAR-2.0rc1.tar.bz2", "2.0rc1"}, NameCase{"foo.bar-1.0-1.tgz", "1.0-1"},
        NameCase{"foo_bar-1.0.tar", "1.0"}, NameCase{"foo_bar-1!2.0+local.tar.xz", "1!2.0+local"},
        NameCase{"foo_bar-.tar.gz", std::nullopt}, NameCase{"foo_bar.tar.gz", std::nullopt},
        NameCase{"foo-1.0.tar.gz", std::nullopt}, NameCase{"foo_barbaz-1.0.tar.gz", std::nullopt},
        NameCase{"foo_bar-1.0.TAR.GZ", std::nullopt}, NameCase{"foo_bar-1.0.egg", std::nullopt},
        NameCase{"foo_bar-1.0.win32.exe", std::nullopt},
        NameCase{"foo_bar-1.0 .tar.gz", std::nullopt},
        NameCase{"foo_bar-1.0/x.tar.gz", std::nullopt}),
    [](const auto& row) {
      std::string name;
      for (const char c : std::string_view(row.param.file)) {
        name.push_back(ascii::isAlnum(c) ? c : '_');
      }
      return name + "_" + std::to_string(row.index);
    });

}  // namespace
}  // namespace sluice::proxy::packages
