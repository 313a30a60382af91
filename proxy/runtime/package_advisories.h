#pragma once
// The OSV advisories a configuration's policies list (`packages.advisories`,
// docs/packages.md#advisories), read when a generation is built: at start and at each reload.
// sluice never fetches them; an operator's job keeps the files current and reloads.
//
// A path is a directory (every `*.json` below it, as the OSV and malicious-packages
// repositories lay them out) or a zip (`all.zip` as OSV publishes it per ecosystem). Read
// whole or refused: a file that cannot be read or a document that is no OSV advisory fails
// the load, and a reload that fails keeps the running generation, so what sluice enforces is
// never silently less than the files say.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "policy/config.h"
#include "proxy/packages/advisory.h"

namespace sluice::proxy {

// Bounds on what one path may hold, so that a wrong path (`/`) fails fast instead of reading
// a disk: files and directories visited, the bytes of one zip.
inline constexpr std::size_t kMaxAdvisoryFiles = std::size_t{1} << 20;
inline constexpr std::size_t kMaxAdvisoryDepth = 8;
inline constexpr std::uint64_t kMaxAdvisoryZipBytes = std::uint64_t{2} << 30;

// Each policy's advisories: the entries of all its paths in one index.
class PolicyAdvisories {
 public:
  // Reads every path each policy of `config` lists, each path once.
  static Result<std::shared_ptr<const PolicyAdvisories>, std::string> load(
      const policy::Config& config);

  // The index of the policy named, or null when it lists no advisories.
  const packages::AdvisoryIndex* find(const policy::Policy& policy) const;
  // One line per policy with advisories, for the log: how many and their fingerprint.
  const std::vector<std::string>& summary() const { return summary_; }

 private:
  std::unordered_map<const policy::Policy*, std::unique_ptr<packages::AdvisoryIndex>> by_policy_;
  std::vector<std::string> summary_;
};

// An index's fingerprint as the log line and the metrics show it: 16 hex digits.
std::string fingerprintText(const packages::AdvisoryIndex& index);

// The advisories of one path (a directory or a zip), appended to `out`; "PATH: why" when not.
Result<Ok, std::string> readAdvisories(const std::string& path,
                                       std::vector<packages::AdvisoryEntry>& out);

}  // namespace sluice::proxy
