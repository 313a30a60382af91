#pragma once
// Which package a request to a registry names (docs/packages.md#requests): read from the
// request target of a rule with a `registry`, as the registry itself routes it, so that what
// sluice judges is what the registry serves. Pure: bytes of the target in, facts out.

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/package_settings.h"

namespace sluice::policy {

enum class PackageRequestKind : std::uint8_t {
  None,             // names no package: not a GET or HEAD, outside the registry's path, or one
                    // of the registry's own endpoints (npm's /-/..., PyPI's /simple/ index)
  Metadata,         // a package's versions: npm packument, PyPI simple page or JSON API
  VersionMetadata,  // one version's (or npm dist-tag's) metadata: /NAME/1.0.0, /pypi/N/V/json
  File,             // a file of one version: npm tarball, PyPI wheel or sdist (or its PEP 658
                    // .metadata)
  Unrecognized,     // in the registry's namespace, in no shape sluice reads: refused, since
                    // the registry may read it as a package sluice did not judge
};
std::string_view toString(PackageRequestKind k);

enum class MetadataForm : std::uint8_t { None, NpmPackument, NpmVersion, PypiSimple, PypiJson };

struct PackageRequest {
  PackageRequestKind kind = PackageRequestKind::None;
  Ecosystem ecosystem = Ecosystem::Npm;
  MetadataForm form = MetadataForm::None;
  std::string name;     // normal form (package_name.h); set for every kind but None/Unrecognized
  std::string version;  // File and VersionMetadata: as the URL spells it (npm: or a dist-tag)
  // A PyPI File: the distribution's file name as the URL spells it, less a PEP 658 ".metadata"
  // (its files are uploaded apart, so each has its own age: docs/packages.md#the-age-rule).
  std::string file;
};

// `target`: the request's origin-form target ("/path?query"). A target whose path could read
// otherwise at the origin (request_path.h: dot or empty segments, encoded '\' or NUL, double
// encoding; an encoded '/' only where npm puts one, in "@scope%2fname") is Unrecognized when
// it is a GET or HEAD, wherever it points: a registry could route it to a package.
PackageRequest recognizePackageRequest(const RegistrySettings& registry, std::string_view method,
                                       std::string_view target);

}  // namespace sluice::policy
