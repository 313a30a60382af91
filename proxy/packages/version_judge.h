#pragma once
// What a metadata filter asks of the policy about each version it reads
// (docs/packages.md#metadata): keep it, or remove it and why. The filters know the registries'
// formats and nothing of the rules; the judge knows the rules and nothing of the formats.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/reason.h"

namespace sluice::proxy::packages {

struct VersionVerdict {
  // None: keep. Otherwise why it goes: PackageDenied, PackageMalicious or PackageTooNew.
  policy::Reason reason = policy::Reason::None;
  // The advisory that blocks it (PackageMalicious): its OSV id, e.g. "MAL-2025-1234".
  std::string_view advisory;

  bool keeps() const { return reason == policy::Reason::None; }
};

class VersionJudge {
 public:
  virtual ~VersionJudge() = default;
  // `version` as the registry spells it; `published` in milliseconds since the Unix epoch,
  // nullopt when the metadata gives no time for it (a judge with a minimum age removes such a
  // version: an unknown age is not an old one).
  virtual VersionVerdict judge(std::string_view version,
                               std::optional<std::int64_t> published) const = 0;
  // The age rule on one file of a version judge() kept, for a registry whose files of one
  // version are uploaded apart (PyPI: a wheel added today to a year-old release is a day old,
  // docs/packages.md#the-age-rule): true when the file is younger than the minimum age, or
  // `uploaded` is nullopt and the judge knows no time for `file` (the name the metadata gives
  // it). Asked of every file a page lists, in order, whatever became of its version, so a
  // judge sees every upload time. A judge without an age rule keeps every file.
  virtual bool fileTooNew(std::string_view file, std::optional<std::int64_t> uploaded) const {
    (void)file;
    (void)uploaded;
    return false;
  }
};

// One version a filter removed, for the audit record (docs/audit.md): the version as spelled
// in the metadata, why, and the advisory id when one applies.
struct RemovedVersion {
  std::string version;
  policy::Reason reason = policy::Reason::None;
  std::string advisory;
  // False when only some of its files went (VersionJudge::fileTooNew), so the version stays
  // listed where a document lists versions apart from files (PEP 700's `versions`).
  bool whole = true;
};

}  // namespace sluice::proxy::packages
