#include "proxy/runtime/package_judgement.h"

#include <vector>

#include "policy/package_verdict.h"

namespace sluice::proxy {
namespace {

void appendPackage(std::string& out, const policy::PackageRequest& package) {
  out += policy::toString(package.ecosystem);
  out += " package '";
  out += package.name;
  out += '\'';
  if (!package.version.empty()) {
    out += ' ';
    out += package.version;
  }
}

}  // namespace

void PackageJudgement::clear() {
  package.kind = policy::PackageRequestKind::None;
  package.form = policy::MetadataForm::None;
  package.name.clear();
  package.version.clear();
  reason = policy::Reason::None;
  advisory.clear();
  detail.clear();
  filtered = false;
  removed.clear();
}

void judgePackageRequest(const policy::Policy& policy, const policy::Rule& rule,
                         const packages::AdvisoryIndex* advisories, std::string_view method,
                         std::string_view target, PackageJudgement& out) {
  using Kind = policy::PackageRequestKind;
  out.clear();
  out.package = policy::recognizePackageRequest(*rule.registry, method, target);
  const policy::PackageRequest& package = out.package;
  if (package.kind == Kind::Unrecognized) {
    out.reason = policy::Reason::PackageUnrecognized;
    out.detail = "the path is in the namespace of rule '" + rule.name + "' (a " +
                 std::string(policy::toString(package.ecosystem)) +
                 " registry) but names no package in a shape sluice reads "
                 "(docs/packages.md#requests)";
    return;
  }
  if (package.kind == Kind::None || !policy.packages) {
    return;
  }
  // The advisories that name the version, when the request names one (a file, a version's
  // metadata): none for nearly every request, so nothing is allocated for those.
  std::vector<policy::AdvisoryHit> hits;
  if (advisories != nullptr && !package.version.empty()) {
    for (const packages::AdvisoryMatch& match :
         advisories->lookup(package.ecosystem, package.name, package.version)) {
      hits.push_back({match.id, match.malicious});
    }
  }
  const policy::PackageRefusal refusal =
      policy::judgePackageVersion(*policy.packages, package.ecosystem, package.name, hits);
  out.reason = refusal.reason;
  if (!refusal.refuses()) {
    return;
  }
  appendPackage(out.detail, package);
  if (refusal.reason == policy::Reason::PackageMalicious) {
    out.advisory.assign(refusal.advisory);
    out.detail += " is named by advisory ";
    out.detail += refusal.advisory;
    out.detail += refusal.advisory.starts_with("MAL-") ? " (malicious)" : " (packages.block: all)";
  } else if (refusal.denied_by != nullptr) {
    out.detail += " is denied by packages.deny ('" + refusal.denied_by->text() + "')";
  } else {
    out.detail += " is not in packages.allow";
  }
}

}  // namespace sluice::proxy
