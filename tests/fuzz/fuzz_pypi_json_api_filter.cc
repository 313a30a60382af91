// libFuzzer target for PyPI's JSON API filter (proxy/packages/pypi_json_api_filter.h): a
// hostile index's /pypi/NAME/json or /pypi/NAME/VERSION/json goes through the filter whose
// output a resolver (poetry, pdm) picks files from.
// Parser files: proxy/packages/pypi_json_api_filter.cc, proxy/packages/pypi_file_name.cc,
// proxy/packages/metadata_json.cc
//
// Input: byte 0: bit 0 chooses the version order (0: bytes; 1: bytes with trailing ".0"s
// dropped, so "1.0" is "1.0.0" as in PEP 440), the rest salt the judge (a version is removed
// when a hash of it and the salt is 0 mod 4, a file is too new when another hash of its name is
// 0 mod 8); the project is "foo-bar". The rest of the input is the document.
// Invariants, each a trap on violation:
//   - the caller's document comes back byte for byte; a refused one was judged not at all;
//   - on success the output is JSON (as for npm, a number out of double's range aside), never
//     longer than the input, with info.version the filter reports; each file in `releases` has
//     a string filename that its url names, of a version of foo-bar the order finds equal to
//     its key, and is not too new; each key left was judged keep and is not listed as gone
//     whole; each file in `urls` is likewise of info.version, not too new, and (with
//     `releases`) named by a file left there, (without) of a version judged keep;
//   - each version was judged once, each file asked about after its version; the removed list
//     holds, in order, each version judged out (whole) and each kept one that lost a file (whole
//     when it lost every file); info_version_removed says whether the version document's
//     version went; kept_files counts the output's files;
//   - the output filtered again with the same judge comes out the same, nothing dropped (a
//     version document's version judged out is judged out again).

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/packages/pypi_file_name.h"
#include "proxy/packages/pypi_json_api_filter.h"

namespace {

namespace pk = sluice::proxy::packages;
using sluice::policy::Ecosystem;
using sluice::policy::Reason;

constexpr std::string_view kProject = "foo-bar";

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

int compareBytes(Ecosystem, std::string_view a, std::string_view b) {
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}
int compareTrimmed(Ecosystem e, std::string_view a, std::string_view b) {
  const auto trim = [](std::string_view v) {
    while (v.size() > 2 && v.substr(v.size() - 2) == ".0") {
      v.remove_suffix(2);
    }
    return v;
  };
  return compareBytes(e, trim(a), trim(b));
}
bool noPrerelease(Ecosystem, std::string_view) { return false; }

class HashJudge : public pk::VersionJudge {
 public:
  // One judged version and what became of the files asked about after it.
  struct Group {
    std::string version;
    bool kept;
    std::size_t files = 0, too_new = 0;
  };

  explicit HashJudge(std::uint8_t salt) : salt_(salt) {}
  pk::VersionVerdict judge(std::string_view version, std::optional<std::int64_t>) const override {
    const bool keep = hash(version, salt_) % 4 != 0;
    check(verdicts.emplace(std::string(version), keep).second);  // judged once
    groups.push_back(Group{std::string(version), keep});
    return keep ? pk::VersionVerdict{} : pk::VersionVerdict{Reason::PackageDenied, {}};
  }
  // One file in eight is too new, whatever its version's verdict.
  bool fileTooNew(std::string_view file, std::optional<std::int64_t>) const override {
    const bool too_new = hash(file, salt_ ^ 0x5a5au) % 8 == 0;
    files.emplace(std::string(file), too_new);
    check(!groups.empty());  // asked after its version
    groups.back().files += 1;
    groups.back().too_new += too_new ? 1 : 0;
    return too_new;
  }
  static std::uint32_t hash(std::string_view text, std::uint32_t seed) {
    std::uint32_t hash = 2166136261u ^ seed;
    for (const char c : text) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    }
    return hash;
  }
  mutable std::map<std::string, bool, std::less<>> verdicts;  // version: kept
  mutable std::map<std::string, bool, std::less<>> files;     // file name: too new
  mutable std::vector<Group> groups;                          // in the order judged

 private:
  std::uint8_t salt_;
};

bool domParses(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  return parser.parse(text).get(root) == simdjson::SUCCESS;
}

// The version pip reads of a file, or nullopt when it is none of foo-bar's.
std::optional<std::string> pipVersion(std::string_view file_name) {
  const auto version = pk::versionOfFile(file_name, kProject);
  if (!version) {
    return std::nullopt;
  }
  std::string text;
  pk::appendPipVersion(text, *version);
  return text;
}

// A file of the output: valid for `version`, and not too new.
std::string_view checkFile(simdjson::dom::element file, std::string_view version,
                           const pk::VersionOrder& order, const HashJudge& judge) {
  std::string_view filename, url;
  check(file["filename"].get_string().get(filename) == simdjson::SUCCESS);
  check(file["url"].get_string().get(url) == simdjson::SUCCESS);
  pk::FileNameBuffer buffer;
  const auto named = pk::fileNameOfUrl(url, buffer);
  check(named && *named == filename);
  const auto read = pipVersion(filename);
  check(read && order.compare(Ecosystem::Pypi, *read, version) == 0);
  const auto it = judge.files.find(filename);
  check(it != judge.files.end() && !it->second);
  return filename;
}

void checkRemoved(const pk::FilteredJsonApi& result, const HashJudge& judge) {
  std::size_t at = 0;
  for (const HashJudge::Group& group : judge.groups) {
    if (group.kept && group.too_new == 0) {
      continue;
    }
    check(at < result.removed.size());
    const pk::RemovedVersion& removed = result.removed[at++];
    check(removed.version == group.version);
    check(removed.reason == (group.kept ? Reason::PackageTooNew : Reason::PackageDenied));
    check(removed.whole == (!group.kept || group.too_new == group.files));
  }
  check(at == result.removed.size());
}

void fuzz(const std::string& input, const pk::VersionOrder& order, std::uint8_t salt) {
  std::string document = input;
  HashJudge judge(salt);
  auto result = pk::filterPypiJsonApi(document, kProject, judge, order);
  check(document == input);
  if (!result.ok()) {
    check(judge.groups.empty() && judge.files.empty());
    return;
  }
  check(result->body.size() <= input.size());
  checkRemoved(*result, judge);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(result->body).get(root) != simdjson::SUCCESS) {
    check(!domParses(input));
    return;
  }
  std::string_view info_version;
  check(root["info"]["version"].get_string().get(info_version) == simdjson::SUCCESS);
  check(info_version == result->info_version);
  std::size_t files = 0;
  std::set<std::string_view> kept_names;
  simdjson::dom::object releases;
  const bool has_releases = root["releases"].get_object().get(releases) == simdjson::SUCCESS;
  if (has_releases) {
    for (auto [key, release] : releases) {
      const auto it = judge.verdicts.find(key);
      check(it != judge.verdicts.end() && it->second);
      for (const pk::RemovedVersion& removed : result->removed) {
        check(removed.version != key || !removed.whole);
      }
      for (auto file : release.get_array()) {
        kept_names.insert(checkFile(file, key, order, judge));
        ++files;
      }
    }
  } else {
    // The version document: its one group is info.version's.
    check(judge.groups.size() == 1 && judge.groups[0].version == info_version);
    const HashJudge::Group& group = judge.groups[0];
    check(result->info_version_removed.has_value() ==
          (!group.kept || (group.files > 0 && group.too_new == group.files)));
    check(!result->info_version_removed ||
          (*result->info_version_removed < result->removed.size() &&
           result->removed[*result->info_version_removed].whole));
  }
  for (auto file : root["urls"].get_array()) {
    const std::string_view name = checkFile(file, info_version, order, judge);
    check(!has_releases || kept_names.count(name) == 1);
    check(!result->info_version_removed || order.compare == &compareTrimmed);
    ++files;
  }
  check(files == result->kept_files);

  std::string again_document = result->body;
  HashJudge again(salt);
  auto reread = pk::filterPypiJsonApi(again_document, kProject, again, order);
  check(reread.ok() && reread->body == result->body && reread->kept_files == files &&
        reread->removed_files == 0 && reread->invalid_files == 0);
  const bool judged_out_again = !has_releases && !judge.groups[0].kept;
  check(reread->removed.size() == (judged_out_again ? 1u : 0u));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  static const pk::VersionOrder kBytes{&compareBytes, &noPrerelease};
  static const pk::VersionOrder kTrimmed{&compareTrimmed, &noPrerelease};
  const auto salt = static_cast<std::uint8_t>(data[0] >> 1);
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  fuzz(input, (data[0] & 1) != 0 ? kTrimmed : kBytes, salt);
  return 0;
}
