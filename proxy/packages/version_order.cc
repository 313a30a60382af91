#include "proxy/packages/version_order.h"

#include <optional>

#include "proxy/packages/pep440.h"
#include "proxy/packages/semver.h"

namespace sluice::proxy::packages {

namespace {

int sign(int c) { return c < 0 ? -1 : (c > 0 ? 1 : 0); }

// Texts that are no version: before every version, among themselves by bytes.
template <typename Version, typename Parse, typename Compare>
int compareParsed(std::string_view a, std::string_view b, Parse parse, Compare compare) {
  const std::optional<Version> x = parse(a);
  const std::optional<Version> y = parse(b);
  if (x && y) {
    return compare(*x, *y);
  }
  if (x || y) {
    return x ? 1 : -1;
  }
  return sign(a.compare(b));
}

}  // namespace

VersionScheme schemeOf(policy::Ecosystem ecosystem) {
  return ecosystem == policy::Ecosystem::Pypi ? VersionScheme::Pep440 : VersionScheme::SemVer;
}

int compareVersions(VersionScheme scheme, std::string_view a, std::string_view b) {
  if (scheme == VersionScheme::Pep440) {
    return compareParsed<Pep440>(a, b, parsePep440, comparePep440);
  }
  return compareParsed<SemVer>(a, b, parseSemVer, compareSemVer);
}

bool isValidVersion(VersionScheme scheme, std::string_view version) {
  return scheme == VersionScheme::Pep440 ? parsePep440(version).has_value()
                                         : parseSemVer(version).has_value();
}

int compareVersions(policy::Ecosystem ecosystem, std::string_view a, std::string_view b) {
  return compareVersions(schemeOf(ecosystem), a, b);
}

bool isValidVersion(policy::Ecosystem ecosystem, std::string_view version) {
  return isValidVersion(schemeOf(ecosystem), version);
}

bool isPrerelease(policy::Ecosystem ecosystem, std::string_view version) {
  if (ecosystem == policy::Ecosystem::Pypi) {
    const std::optional<Pep440> parsed = parsePep440(version);
    return parsed && parsed->isPrerelease();
  }
  const std::optional<SemVer> parsed = parseSemVer(version);
  return parsed && !parsed->prerelease.empty();
}

std::string versionKey(policy::Ecosystem ecosystem, std::string_view version) {
  if (ecosystem == policy::Ecosystem::Pypi) {
    if (std::optional<Pep440> parsed = parsePep440(version)) {
      while (parsed->release_count > 1 && parsed->release[parsed->release_count - 1] == 0) {
        --parsed->release_count;  // 1.0 == 1.0.0
      }
      return normalizedPep440(*parsed);
    }
  } else if (const std::optional<SemVer> parsed = parseSemVer(version)) {
    // Numeric prerelease identifiers have no leading zeros, so equal precedence is equal text.
    std::string key = std::to_string(parsed->major) + '.' + std::to_string(parsed->minor) + '.' +
                      std::to_string(parsed->patch);
    if (!parsed->prerelease.empty()) {
      key += '-';
      key += parsed->prerelease;
    }
    return key;
  }
  std::string key(1, '\0');
  key += version;
  return key;
}

}  // namespace sluice::proxy::packages
