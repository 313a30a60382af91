#include "proxy/runtime/package_judgement.h"

#include <chrono>
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

// `min_age` as the config would write it: in the largest unit that divides it.
std::string shownAge(std::chrono::milliseconds age) {
  constexpr std::int64_t kHour = 60LL * 60 * 1000;
  constexpr std::int64_t kDay = 24 * kHour;
  const std::int64_t ms = age.count();
  if (ms > 0 && ms % kDay == 0) {
    return std::to_string(ms / kDay) + "d";
  }
  if (ms > 0 && ms % kHour == 0) {
    return std::to_string(ms / kHour) + "h";
  }
  return std::to_string(ms) + "ms";
}

}  // namespace

void PackageJudgement::clear() {
  package.kind = policy::PackageRequestKind::None;
  package.form = policy::MetadataForm::None;
  package.name.clear();
  package.version.clear();
  package.file.clear();
  reason = policy::Reason::None;
  advisory.clear();
  detail.clear();
  age_unknown = false;
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

void judgePackageAge(const policy::PackageSettings& settings, const PublishTimes* known,
                     std::int64_t now_ms, PackageJudgement& out) {
  const policy::PackageRequest& package = out.package;
  if (package.version.empty() ||
      !policy::ageRuleApplies(settings, package.ecosystem, package.name)) {
    return;
  }
  // A PyPI file is as old as its own upload: a wheel added today to an old release is new.
  const bool pypi_file = package.kind == policy::PackageRequestKind::File &&
                         package.ecosystem == policy::Ecosystem::Pypi;
  std::optional<std::int64_t> published;
  if (known != nullptr) {
    published = pypi_file ? known->findPypiFile(package.name, package.file)
                          : known->find(package.ecosystem, package.name, package.version);
  }
  if (!policy::tooNew(settings, published, now_ms)) {
    return;
  }
  out.reason = policy::Reason::PackageTooNew;
  appendPackage(out.detail, package);
  const std::string age = shownAge(settings.min_age);
  if (published) {
    const std::int64_t hours = (now_ms - *published) / (60 * 60 * 1000);
    out.detail += (pypi_file ? ": this file was uploaded " : " was published ") +
                  std::to_string(hours < 0 ? 0 : hours) +
                  " hours ago, less than packages.min_age (" + age + ")";
  } else {
    out.age_unknown = true;
    // A file carries no time: sluice knows one from the package's metadata it filtered for
    // this sandbox (docs/packages.md#the-decision).
    out.detail += pypi_file ? ": this file has no publish time" : " has no publish time";
    out.detail +=
        " sluice knows (its metadata was not fetched through sluice first), and "
        "packages.min_age (" +
        age + ") applies to it";
  }
}

}  // namespace sluice::proxy
