#pragma once
// The package firewall on one request (docs/packages.md#the-decision): the package a request
// of a registry rule names, and the policy's verdict on it with the words of its refusal. What
// the gateway acts on for each request and `sluice explain` shows, from one function.

#include <string>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "policy/package_request.h"
#include "policy/reason.h"
#include "proxy/packages/advisory.h"
#include "proxy/packages/version_judge.h"
#include "proxy/runtime/publish_times.h"

namespace sluice::proxy {

struct PackageJudgement {
  policy::PackageRequest package;                // kind None: names no package
  policy::Reason reason = policy::Reason::None;  // None: served
  std::string advisory;                          // package_malicious: the advisory's id
  std::string detail;  // a refusal's why, for its body and log line ("npm package 'x' ...")
  // Filtered metadata (docs/packages.md#metadata): the versions the client was not shown.
  // package_too_new because sluice knows no publish time for the version (not because it is
  // young): learning the time may serve it (docs/packages.md#the-age-rule).
  bool age_unknown = false;
  bool filtered = false;
  std::vector<packages::RemovedVersion> removed;

  void clear();
};

// `rule` has a registry; `advisories` is the policy's, or null. Fills `out` (cleared first).
// A name or version longer than the small-string buffer costs one allocation per package
// request; a refusal's words are built only for a refusal.
void judgePackageRequest(const policy::Policy& policy, const policy::Rule& rule,
                         const packages::AdvisoryIndex* advisories, std::string_view method,
                         std::string_view target, PackageJudgement& out);

// The age rule on a request judgePackageRequest served that names one version and carries no
// time of its own (a file, a PyPI version document): package_too_new when `min_age` applies to
// the name and the version is younger, or its publish time is not in `known` (the times the
// sandbox's filtered metadata gave; null: none known). Sets `out`'s reason and detail.
void judgePackageAge(const policy::PackageSettings& settings, const PublishTimes* known,
                     std::int64_t now_ms, PackageJudgement& out);

}  // namespace sluice::proxy
