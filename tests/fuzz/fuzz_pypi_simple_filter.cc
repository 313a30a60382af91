// libFuzzer target for PyPI's simple-API filters (proxy/packages/pypi_simple_filter.h): a
// hostile index's PEP 691 JSON or PEP 503 HTML goes through the filter whose output pip
// resolves from, and a JSON document through the HTML renderer.
// Parser files: proxy/packages/pypi_simple_filter.cc, proxy/packages/pypi_simple_html.cc,
// proxy/packages/pypi_simple_render.cc, proxy/packages/pypi_file_name.cc,
// proxy/packages/pypi_file_versions.cc, proxy/packages/metadata_json.cc
//
// Input: byte 0: bits 0-1 choose the mode (0, 1: PEP 691 JSON; 2: PEP 503 HTML; 3: the
// renderer alone), the rest salt the judge (a version is removed when a hash of it and the salt
// is 0 mod 4, a file is too new when another hash of its name is 0 mod 8); the project is
// "foo-bar". The rest of the input is the document.
// Invariants, each a trap on violation:
//   - JSON: the caller's document comes back byte for byte; on success the output is JSON
//     (as for npm, a number out of double's range aside), each of its files has a string
//     filename that its url names, of a version of foo-bar judged keep, and is not too new;
//     no file of a removed version and no `versions` entry spelled as one is left; the
//     removed list holds each removed version and each kept one that lost a file; each
//     version was judged once. If the output renders, the page passes the HTML filter with
//     the same judge and keeps the same number of files.
//   - HTML: on success, the output read again by the filter has no file removed or invalid,
//     and every version in it was judged keep; it is the input with anchors cut out (never
//     longer).
//   - rendering: on success every '<' of the page opens one of its own tags: the frame's 12
//     and 3 per anchor (no document string can add one).

#include <simdjson.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "proxy/packages/pypi_file_name.h"
#include "proxy/packages/pypi_simple_filter.h"

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

int compareFuzz(Ecosystem, std::string_view a, std::string_view b) {
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}
bool noPrerelease(Ecosystem, std::string_view) { return false; }

class HashJudge : public pk::VersionJudge {
 public:
  explicit HashJudge(std::uint8_t salt) : salt_(salt) {}
  pk::VersionVerdict judge(std::string_view version, std::optional<std::int64_t>) const override {
    const bool keep = hash(version, salt_) % 4 != 0;
    auto [it, fresh] = verdicts.emplace(std::string(version), keep);
    check(fresh);  // judged once
    return keep ? pk::VersionVerdict{} : pk::VersionVerdict{Reason::PackageDenied, {}};
  }
  // One file in eight is too new, whatever its version's verdict.
  bool fileTooNew(std::string_view file, std::optional<std::int64_t>) const override {
    const bool too_new = hash(file, salt_ ^ 0x5a5au) % 8 == 0;
    files.emplace(std::string(file), too_new);
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

 private:
  std::uint8_t salt_;
};

bool domParses(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  return parser.parse(text).get(root) == simdjson::SUCCESS;
}

// The version pip reads of a file, or "" when it is none of foo-bar's.
std::string pipVersion(std::string_view file_name) {
  const auto version = pk::versionOfFile(file_name, kProject);
  std::string text;
  if (version) {
    pk::appendPipVersion(text, *version);
  }
  return text;
}

// The versions a filter lists as removed: those judged out, and those kept that lost a file.
std::size_t expectedRemoved(const HashJudge& judge) {
  std::set<std::string> partial;
  for (const auto& [file, too_new] : judge.files) {
    const auto it = judge.verdicts.find(pipVersion(file));
    if (too_new && it != judge.verdicts.end() && it->second) {
      partial.insert(it->first);
    }
  }
  const auto out = static_cast<std::size_t>(std::count_if(
      judge.verdicts.begin(), judge.verdicts.end(), [](const auto& v) { return !v.second; }));
  return out + partial.size();
}

void checkRendered(const std::string& html) {
  const auto count = [&](std::string_view what) {
    std::size_t n = 0;
    for (std::size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  const std::size_t anchors = count("</a>");
  check(count("    <a href=\"") == anchors && count("<br />") == anchors);
  check(static_cast<std::size_t>(std::count(html.begin(), html.end(), '<')) == 12 + 3 * anchors);
}

void fuzzJson(const std::string& input, std::uint8_t salt) {
  std::string document = input;
  HashJudge judge(salt);
  auto result = pk::filterSimpleJson(document, kProject, judge, {&compareFuzz, &noPrerelease});
  check(document == input);
  if (!result.ok()) {
    check(judge.verdicts.empty());
    return;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(result->body).get(root) != simdjson::SUCCESS) {
    check(!domParses(input));
    return;
  }
  std::size_t files = 0;
  for (auto file : root["files"].get_array()) {
    std::string_view filename, url;
    check(file["filename"].get_string().get(filename) == simdjson::SUCCESS);
    check(file["url"].get_string().get(url) == simdjson::SUCCESS);
    pk::FileNameBuffer buffer;
    const auto named = pk::fileNameOfUrl(url, buffer);
    check(named && *named == filename);
    const auto it = judge.verdicts.find(pipVersion(filename));
    check(it != judge.verdicts.end() && it->second);
    const auto file_it = judge.files.find(filename);
    check(file_it != judge.files.end() && !file_it->second);
    ++files;
  }
  check(result->removed.size() == expectedRemoved(judge));
  check(files == result->kept_files);
  simdjson::dom::array versions;
  if (root["versions"].get_array().get(versions) == simdjson::SUCCESS) {
    for (auto version : versions) {
      const auto it = judge.verdicts.find(std::string_view(version.get_string().value()));
      check(it == judge.verdicts.end() || it->second);
    }
  }
  std::string filtered = result->body;
  auto html = pk::renderSimpleHtml(filtered);
  if (html.ok()) {
    checkRendered(*html);
    HashJudge again(salt);
    auto page = pk::filterSimpleHtml(*html, kProject, again);
    check(page.ok() && page->kept_files == files && page->removed_files == 0 &&
          page->invalid_files == 0);
  }
}

void fuzzHtml(const std::string& input, std::uint8_t salt) {
  HashJudge judge(salt);
  auto result = pk::filterSimpleHtml(input, kProject, judge);
  if (!result.ok()) {
    check(judge.verdicts.empty());
    return;
  }
  check(result->body.size() <= input.size());
  check(result->removed.size() == expectedRemoved(judge));
  HashJudge again(salt);
  auto reread = pk::filterSimpleHtml(result->body, kProject, again);
  check(reread.ok());
  check(reread->removed_files == 0 && reread->invalid_files == 0 &&
        reread->kept_files == result->kept_files);
  for (const auto& [version, keep] : again.verdicts) {
    check(keep);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  const int mode = data[0] & 3;
  const auto salt = static_cast<std::uint8_t>(data[0] >> 2);
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode <= 1) {
    fuzzJson(input, salt);
  } else if (mode == 2) {
    fuzzHtml(input, salt);
  } else {
    std::string document = input;
    auto html = pk::renderSimpleHtml(document);
    check(document == input);
    if (html.ok()) {
      checkRendered(*html);
    }
  }
  return 0;
}
