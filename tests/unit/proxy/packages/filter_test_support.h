#pragma once
// What the metadata filters' tests share: a judge driven by a table and a cut-off time, and a
// small SemVer-like order (the real one is proxy/packages/version_order.h; the filters take the
// order as a parameter so that their tests do not depend on it).

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/packages/npm_packument_filter.h"
#include "proxy/packages/version_judge.h"

namespace sluice::proxy::packages::testing {

// Removes the versions of `verdicts` as they say; with `max_published`, also every other
// version published after it or with no time (as a minimum age would; PackageDenied stands
// in for its reason). With `max_uploaded`, a file uploaded after it or with no time is too new.
// Records every call.
class TableJudge : public VersionJudge {
 public:
  std::map<std::string, VersionVerdict, std::less<>> verdicts;
  std::optional<std::int64_t> max_published;
  std::optional<std::int64_t> max_uploaded;
  mutable std::vector<std::pair<std::string, std::optional<std::int64_t>>> calls;
  mutable std::vector<std::pair<std::string, std::optional<std::int64_t>>> file_calls;

  bool fileTooNew(std::string_view file, std::optional<std::int64_t> uploaded) const override {
    file_calls.emplace_back(std::string(file), uploaded);
    return max_uploaded && (!uploaded || *uploaded > *max_uploaded);
  }

  VersionVerdict judge(std::string_view version,
                       std::optional<std::int64_t> published) const override {
    calls.emplace_back(std::string(version), published);
    if (const auto it = verdicts.find(version); it != verdicts.end()) {
      return it->second;
    }
    if (max_published && (!published || *published > *max_published)) {
      return VersionVerdict{policy::Reason::PackageDenied, {}};
    }
    return {};
  }
  void remove(std::string version, policy::Reason reason = policy::Reason::PackageDenied,
              std::string_view advisory = {}) {
    verdicts[std::move(version)] = VersionVerdict{reason, advisory};
  }
};

// MAJOR.MINOR.PATCH with an optional -PRERELEASE of dot-separated parts (numeric ones compare
// as numbers and before alphanumeric ones); a text that is no such version sorts first, by its
// bytes. Enough for the tests' versions.
struct SimpleVersion {
  bool valid = false;
  long core[3] = {0, 0, 0};
  std::vector<std::string_view> pre;
};
inline SimpleVersion parseSimpleVersion(std::string_view text) {
  SimpleVersion v;
  std::size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t begin = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      v.core[i] = v.core[i] * 10 + (text[at++] - '0');
    }
    if (at == begin || (i < 2 && (at == text.size() || text[at++] != '.'))) {
      return {};
    }
  }
  if (at < text.size()) {
    if (text[at] != '-' || at + 1 == text.size()) {
      return {};
    }
    std::string_view rest = text.substr(at + 1);
    while (!rest.empty()) {
      const std::size_t dot = rest.find('.');
      v.pre.push_back(rest.substr(0, dot));
      rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
    }
  }
  v.valid = true;
  return v;
}
inline int compareSimpleVersions(policy::Ecosystem, std::string_view a, std::string_view b) {
  const SimpleVersion x = parseSimpleVersion(a);
  const SimpleVersion y = parseSimpleVersion(b);
  if (!x.valid || !y.valid) {
    if (x.valid != y.valid) {
      return x.valid ? 1 : -1;
    }
    return a < b ? -1 : (a == b ? 0 : 1);
  }
  for (int i = 0; i < 3; ++i) {
    if (x.core[i] != y.core[i]) {
      return x.core[i] < y.core[i] ? -1 : 1;
    }
  }
  if (x.pre.empty() != y.pre.empty()) {
    return x.pre.empty() ? 1 : -1;
  }
  for (std::size_t i = 0; i < std::min(x.pre.size(), y.pre.size()); ++i) {
    const bool xn =
        std::all_of(x.pre[i].begin(), x.pre[i].end(), [](char c) { return c >= '0' && c <= '9'; });
    const bool yn =
        std::all_of(y.pre[i].begin(), y.pre[i].end(), [](char c) { return c >= '0' && c <= '9'; });
    if (xn && yn && x.pre[i].size() != y.pre[i].size()) {
      return x.pre[i].size() < y.pre[i].size() ? -1 : 1;
    }
    if (xn != yn) {
      return xn ? -1 : 1;
    }
    if (x.pre[i] != y.pre[i]) {
      return x.pre[i] < y.pre[i] ? -1 : 1;
    }
  }
  return x.pre.size() == y.pre.size() ? 0 : (x.pre.size() < y.pre.size() ? -1 : 1);
}
inline bool isSimplePrerelease(policy::Ecosystem, std::string_view version) {
  const SimpleVersion v = parseSimpleVersion(version);
  return v.valid && !v.pre.empty();
}
inline const VersionOrder kSimpleOrder{&compareSimpleVersions, &isSimplePrerelease};

// PyPI's filters' tests: a string order is enough, the tests' versions compare as their bytes
// do, but "1.0.0" and "1.0" (one PEP 440 version) compare equal, as pep440.h has it.
inline int compareTrimmedVersions(policy::Ecosystem, std::string_view a, std::string_view b) {
  const auto trim = [](std::string_view v) {
    while (v.size() > 2 && v.substr(v.size() - 2) == ".0") {
      v.remove_suffix(2);
    }
    return v;
  };
  a = trim(a);
  b = trim(b);
  return a < b ? -1 : (a == b ? 0 : 1);
}
inline bool noPrerelease(policy::Ecosystem, std::string_view) { return false; }
inline const VersionOrder kPypiOrder{&compareTrimmedVersions, &noPrerelease};

}  // namespace sluice::proxy::packages::testing
