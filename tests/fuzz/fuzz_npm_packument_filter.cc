// libFuzzer target for the npm metadata filter (proxy/packages/npm_packument_filter.h): a
// hostile registry's packument goes through the filter, whose output npm resolves from.
// Parser files: proxy/packages/npm_packument_filter.cc, proxy/packages/metadata_json.cc,
// proxy/packages/json_walk.h
//
// Input: byte 0 salts the judge (a version is removed when a hash of it and the salt is 0 mod
// 4); the rest is the document. The order is a total one of the fuzz's own (shorter first,
// then bytewise; a '-' makes a prerelease).
// Invariants, each a trap on violation:
//   - the caller's document comes back byte for byte, whatever the outcome;
//   - on success the output is JSON (simdjson's DOM reads it; a number out of double's range
//     is the one thing the filter passes that the DOM refuses, so then the input fails too),
//     one object whose `versions` holds exactly the versions judged keep, each judged once;
//     `removed` holds exactly those judged remove; no removed version is a key of `versions`
//     or `time`, nor the value of a dist-tag; every dist-tag names a kept version; `latest` is
//     there whenever a version is kept; `time` holds only created, modified, unpublished and
//     kept versions;
//   - the per-version reader succeeds only on an object with a string `version`, judged once.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "proxy/packages/npm_packument_filter.h"

namespace {

namespace pk = sluice::proxy::packages;
using sluice::policy::Ecosystem;
using sluice::policy::Reason;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

int compareFuzz(Ecosystem, std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return a.size() < b.size() ? -1 : 1;
  }
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}
bool isFuzzPrerelease(Ecosystem, std::string_view v) { return v.find('-') != v.npos; }

class HashJudge : public pk::VersionJudge {
 public:
  explicit HashJudge(std::uint8_t salt) : salt_(salt) {}
  pk::VersionVerdict judge(std::string_view version, std::optional<std::int64_t>) const override {
    std::uint32_t hash = 2166136261u ^ salt_;
    for (const char c : version) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    }
    const bool keep = hash % 4 != 0;
    auto [it, fresh] = verdicts.emplace(std::string(version), keep);
    check(fresh);  // judged once
    return keep ? pk::VersionVerdict{} : pk::VersionVerdict{Reason::PackageMalicious, "MAL-FUZZ"};
  }
  mutable std::map<std::string, bool, std::less<>> verdicts;

 private:
  std::uint8_t salt_;
};

bool domParses(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  return parser.parse(text).get(root) == simdjson::SUCCESS;
}

void checkOutput(const pk::FilteredPackument& out, const HashJudge& judge,
                 const std::string& input) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(out.json).get(root) != simdjson::SUCCESS) {
    check(!domParses(input));
    return;
  }
  simdjson::dom::object object;
  check(root.get_object().get(object) == simdjson::SUCCESS);
  std::set<std::string, std::less<>> kept;
  std::size_t removed_judged = 0;
  for (const auto& [version, keep] : judge.verdicts) {
    if (keep) {
      kept.insert(version);
    } else {
      ++removed_judged;
    }
  }
  check(out.removed.size() == removed_judged);
  for (const pk::RemovedVersion& r : out.removed) {
    const auto it = judge.verdicts.find(r.version);
    check(it != judge.verdicts.end() && !it->second && r.reason == Reason::PackageMalicious &&
          r.advisory == "MAL-FUZZ");
  }
  check(out.kept == kept.size());
  std::size_t versions_seen = 0;
  bool has_latest = false;
  for (auto [key, value] : object) {
    if (key == "versions") {
      for (auto [version, manifest] : value.get_object()) {
        check(kept.count(version) == 1);
        check(manifest.is_object());
        ++versions_seen;
      }
    } else if (key == "time") {
      for (auto [name, time] : value.get_object()) {
        check(name == "created" || name == "modified" || name == "unpublished" ||
              kept.count(name) == 1);
      }
    } else if (key == "dist-tags") {
      for (auto [tag, target] : value.get_object()) {
        std::string_view version;
        check(target.get_string().get(version) == simdjson::SUCCESS);
        check(kept.count(version) == 1);
        has_latest = has_latest || tag == "latest";
      }
    }
  }
  check(versions_seen == kept.size());
  check(has_latest || kept.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const pk::VersionOrder order{&compareFuzz, &isFuzzPrerelease};
  {
    std::string document = input;  // exact size: the filter's padding reallocates it
    HashJudge judge(data[0]);
    auto result = pk::filterNpmPackument(document, judge, order);
    check(document == input);
    if (result.ok()) {
      checkOutput(*result, judge, input);
    }
  }
  {
    std::string document = input;
    HashJudge judge(data[0]);
    auto result = pk::judgeNpmVersionDocument(document, judge, 0);
    check(document == input);
    if (result.ok()) {
      check(judge.verdicts.size() == 1 && judge.verdicts.begin()->first == result->version);
      check(judge.verdicts.begin()->second == result->verdict.keeps());
    } else {
      check(judge.verdicts.empty());
    }
  }
  return 0;
}
