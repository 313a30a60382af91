#pragma once
// The package firewall's decision (docs/packages.md#the-decision): a pure function of a
// policy's `packages` and the facts proxy/ gathered about one package, or one version of it.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "policy/package_settings.h"
#include "policy/reason.h"

namespace sluice::policy {

// An advisory that names the version (proxy/packages gathers them from the loaded OSV files).
struct AdvisoryHit {
  std::string_view id;  // "MAL-2025-1234", "GHSA-..."
  bool malicious = false;
};

struct PackageRefusal {
  Reason reason = Reason::None;  // None: served
  std::string_view advisory;     // PackageMalicious: the id of the advisory that blocks it
  // PackageDenied by `deny`: the entry that matched (null: `allow` does not list the name).
  const PackagePattern* denied_by = nullptr;

  bool refuses() const { return reason != Reason::None; }
};

// The name alone, in this order: `deny` (PackageDenied), then a non-empty `allow` that does not
// list it (PackageDenied). `name` is in its normal form.
PackageRefusal judgePackageName(const PackageSettings& settings, Ecosystem ecosystem,
                                std::string_view name);

// One version: its name first (judgePackageName), then the advisories that name it: the first
// that `block` counts (malicious ones for `block: malicious`, any for `block: all`) refuses it,
// PackageMalicious with its id. (The reason is PackageMalicious for either choice: the
// advisory id says what kind it is.)
PackageRefusal judgePackageVersion(const PackageSettings& settings, Ecosystem ecosystem,
                                   std::string_view name, std::span<const AdvisoryHit> advisories);

// The age rule (docs/packages.md#settings): whether it applies to `name` (a `min_age`, and no
// `exempt` entry lists the name), and whether a version published at `published_ms` (ms since
// the Unix epoch; nullopt: sluice does not know when) is younger than `min_age` at `now_ms`:
// package_too_new. An unknown time is too new: an unknown age is not an old one.
bool ageRuleApplies(const PackageSettings& settings, Ecosystem ecosystem, std::string_view name);
bool tooNew(const PackageSettings& settings, std::optional<std::int64_t> published_ms,
            std::int64_t now_ms);

}  // namespace sluice::policy
