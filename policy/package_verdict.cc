#include "policy/package_verdict.h"

#include <algorithm>

namespace sluice::policy {

namespace {

const PackagePattern* listed(const std::vector<PackagePattern>& patterns, Ecosystem ecosystem,
                             std::string_view name) {
  auto it = std::find_if(patterns.begin(), patterns.end(), [&](const PackagePattern& pattern) {
    return pattern.matches(ecosystem, name);
  });
  return it == patterns.end() ? nullptr : &*it;
}

}  // namespace

PackageRefusal judgePackageName(const PackageSettings& settings, Ecosystem ecosystem,
                                std::string_view name) {
  if (const PackagePattern* denied = listed(settings.deny, ecosystem, name)) {
    return {Reason::PackageDenied, {}, denied};
  }
  if (!settings.allow.empty() && listed(settings.allow, ecosystem, name) == nullptr) {
    return {Reason::PackageDenied, {}, nullptr};
  }
  return {};
}

PackageRefusal judgePackageVersion(const PackageSettings& settings, Ecosystem ecosystem,
                                   std::string_view name, std::span<const AdvisoryHit> advisories) {
  if (PackageRefusal by_name = judgePackageName(settings, ecosystem, name); by_name.refuses()) {
    return by_name;
  }
  for (const AdvisoryHit& hit : advisories) {
    if (hit.malicious || settings.block == AdvisoryBlock::All) {
      return {Reason::PackageMalicious, hit.id, nullptr};
    }
  }
  return {};
}

}  // namespace sluice::policy
