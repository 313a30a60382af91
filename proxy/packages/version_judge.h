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
  // None: keep. Otherwise why it goes: PackageDenied, PackageMalicious (and, with a minimum
  // release age, too new: docs/packages.md#what-comes-next).
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
};

// One version a filter removed, for the audit record (docs/audit.md): the version as spelled
// in the metadata, why, and the advisory id when one applies.
struct RemovedVersion {
  std::string version;
  policy::Reason reason = policy::Reason::None;
  std::string advisory;
};

}  // namespace sluice::proxy::packages
