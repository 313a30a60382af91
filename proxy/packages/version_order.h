#pragma once
// Each ecosystem's version order over any text (docs/packages.md#versions): npm's SemVer
// (semver.h), PyPI's PEP 440 (pep440.h).
//
// The order is total over every string, so callers can sort and search whatever a registry
// or an advisory spells: a text that is no version of the ecosystem sorts before every valid
// version, and such texts among themselves by their bytes (so two of them are equal only when
// byte-equal). Two valid versions compare 0 when the ecosystem reads them as one version
// ("1.0" and "1.0.0" on PyPI; "1.0.0" and "1.0.0+build" on npm, whose registry keeps no build
// metadata). Each call parses both texts: linear in their lengths, no allocation.

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/package_name.h"

namespace sluice::proxy::packages {

int compareVersions(policy::Ecosystem ecosystem, std::string_view a, std::string_view b);
bool isValidVersion(policy::Ecosystem ecosystem, std::string_view version);
// npm: a SemVer prerelease ("1.0.0-rc.1"); PyPI: a pre or dev release ("1.0a1", "1.0.dev2").
// false for a text that is no version.
bool isPrerelease(policy::Ecosystem ecosystem, std::string_view version);

// A text equal for two texts exactly when compareVersions gives 0, to find a version in a
// sorted list without parsing the list: for a version, a spelling of it (npm:
// "major.minor.patch[-prerelease]"; PyPI: the canonical spelling with the release's trailing
// zeros dropped, "1.0.0+A" is "1+a"); for a text that is no version, a 0 byte then the text.
std::string versionKey(policy::Ecosystem ecosystem, std::string_view version);

// The orders an OSV range can name (advisory.h): SemVer's for type SEMVER whatever the
// ecosystem, the ecosystem's own for type ECOSYSTEM.
enum class VersionScheme : std::uint8_t { SemVer, Pep440 };
VersionScheme schemeOf(policy::Ecosystem ecosystem);
int compareVersions(VersionScheme scheme, std::string_view a, std::string_view b);
bool isValidVersion(VersionScheme scheme, std::string_view version);

}  // namespace sluice::proxy::packages
