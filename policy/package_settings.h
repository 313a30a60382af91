#pragma once
// A policy's `packages` map (docs/packages.md#settings): which package versions the registries
// its rules name (a rule's `registry`) may serve. Part of the immutable Config.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/package_name.h"

namespace sluice::policy {

// Which advisories refuse a version (docs/packages.md#advisories): only those that call it
// malicious (OSV ids "MAL-..."), or every advisory that names it.
enum class AdvisoryBlock : std::uint8_t { Malicious, All };
std::string_view toString(AdvisoryBlock b);

struct PackageSettings {
  std::vector<PackagePattern> deny;   // never served, whatever the version
  std::vector<PackagePattern> allow;  // when non-empty: only these names are served
  // OSV files: directories of JSON documents, or the zips OSV publishes; absolute (resolved
  // against the config file's directory by the loader). Read by proxy/runtime at each load.
  std::vector<std::string> advisories;
  AdvisoryBlock block = AdvisoryBlock::Malicious;
  // Versions published less recently than this are hidden from metadata and their files refused
  // (package_too_new), but for `exempt` names; 0: no age rule.
  std::chrono::milliseconds min_age{0};
  std::vector<PackagePattern> exempt;
  // The largest metadata document (decoded) held whole for filtering: larger ones are refused
  // (package_metadata_too_large), never passed on unfiltered. A sandbox holds at most
  // kMetadataDocumentsHeld of them at once across its connections (package_metadata_busy).
  std::uint64_t max_metadata = kDefaultMaxMetadata;

  static constexpr std::uint64_t kDefaultMaxMetadata = 64ULL << 20;
  static constexpr std::uint64_t kMinMaxMetadata = 1ULL << 20;
  static constexpr std::uint64_t kMaxMaxMetadata = 1ULL << 30;
  static constexpr std::uint64_t kMetadataDocumentsHeld = 4;
  static constexpr std::chrono::milliseconds kMaxMinAge{3650LL * 24 * 60 * 60 * 1000};
};

// A rule that allows a registry (its `registry`): whose URL shapes its requests follow, and
// the path under which the registry's metadata lives ("/" for registry.npmjs.org and pypi.org,
// "/api/npm/remote/" for a mirror under a prefix). Always ends with '/'.
struct RegistrySettings {
  Ecosystem ecosystem = Ecosystem::Npm;
  std::string path = "/";
};

}  // namespace sluice::policy
