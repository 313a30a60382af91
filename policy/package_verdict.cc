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

bool ageRuleApplies(const PackageSettings& settings, Ecosystem ecosystem, std::string_view name) {
  return settings.min_age.count() > 0 && listed(settings.exempt, ecosystem, name) == nullptr;
}

bool tooNew(const PackageSettings& settings, std::optional<std::int64_t> published_ms,
            std::int64_t now_ms) {
  if (settings.min_age.count() <= 0) {
    return false;
  }
  // An unknown age is not an old one; a time in the future (a clock ahead of ours) is new.
  return !published_ms || *published_ms > now_ms - settings.min_age.count();
}

}  // namespace sluice::policy
