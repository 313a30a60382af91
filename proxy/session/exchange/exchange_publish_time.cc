// The age rule on an npm file whose publish time the sandbox never learned
// (docs/packages.md#the-age-rule). A lockfile install (`npm ci`) asks for tarballs only, and a
// tarball carries no time: before it decides, sluice asks the same origin for the package's
// packument (its full form, with `time`), over the upstream the file would have taken, with
// the client's own fields (a private registry's credentials included). The times it gives are
// learned for the sandbox as if it had asked; then the file is refused (package_too_new) or
// requested in its turn, on the upstream the packument came over when it may be kept. Nothing
// of the packument reaches the client, and the file's record is the request's only record.
//
// npm only: its packuments live under the registry's path on the tarballs' own host. PyPI's
// files host (files.pythonhosted.org) is not its index's, which no rule names.
#include <spdlog/spdlog.h>

#include "policy/package_verdict.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/exchange/exchange.h"

namespace sluice::proxy::session {

bool Exchange::planPublishTimeFetch(const policy::Rule& rule) {
  const policy::PackageRequest& package = record_.package.package;
  if (package.ecosystem != policy::Ecosystem::Npm ||
      package.kind != policy::PackageRequestKind::File || record_.method != "GET" ||
      framing_ != http::BodyFraming::None || !rule.registry) {
    return false;
  }
  // The packument's path as npm itself asks for it: the scope's slash encoded.
  publish_time_target_ = rule.registry->path;
  for (char c : package.name) {
    if (c == '/') {
      publish_time_target_ += "%2f";
    } else {
      publish_time_target_ += c;
    }
  }
  policy::PackageRequest packument;
  packument.kind = policy::PackageRequestKind::Metadata;
  packument.ecosystem = package.ecosystem;
  packument.form = policy::MetadataForm::NpmPackument;
  packument.name = package.name;
  const policy::PackageSettings& settings = *sandbox().policy->packages;
  metadata_.plan(packument, "", settings.max_metadata, host_.runtime().metadata_held.get(),
                 /*needs_times=*/true);
  return true;
}

void Exchange::publishTimeHead(const http::ResponseHead& head) {
  if (state_ != ExchangeState::AwaitingResponse) {
    upstreamFailed(policy::Reason::UpstreamConnect, "the origin answered before the request");
    return;
  }
  std::string detail;
  policy::Reason refused = metadata_.holdHead(head, detail);
  if (refused == policy::Reason::None && !metadata_.holding()) {
    // A 404, a redirect, a 304: no times to learn. The file is refused as of unknown age.
    refused = policy::Reason::PackageTooNew;
    detail = "npm package '" + record_.package.package.name + "' " +
             record_.package.package.version +
             ": sluice asked the registry for the package's metadata to learn its publish "
             "time, and it answered " +
             std::to_string(head.status) + " (docs/packages.md#the-age-rule)";
  }
  if (refused != policy::Reason::None) {
    after_ = UpstreamAfter::Close;  // (its answer is not read)
    deny(refused, detail);
    return;
  }
  transition(ExchangeState::HoldingResponse);
}

void Exchange::publishTimeFetched() {
  const policy::PackageSettings& settings = *sandbox().policy->packages;
  PublishTimes& known = *host_.runtime().publish_times;
  const std::int64_t now = unixTimeMs();
  const MetadataFacts facts{host_.sandboxView().advisories, now, &known};
  PackageJudgement& judged = record_.package;
  const ServedMetadata& packument = metadata_.finish(settings, facts);
  known.learn(judged.package.ecosystem, judged.package.name, packument.published);
  if (packument.reason == policy::Reason::PackageMetadataInvalid ||
      packument.reason == policy::Reason::PackageMetadataTooLarge) {
    deny(packument.reason, packument.detail);
    return;
  }
  judged.reason = policy::Reason::None;
  judged.detail.clear();
  judged.age_unknown = false;
  judgePackageAge(settings, &known, now, judged);
  if (judged.reason != policy::Reason::None) {
    deny(judged.reason, judged.detail);
    return;
  }
  SPDLOG_DEBUG("[C{}] {} {}: publish time learned from {}", host_.facts().id, judged.package.name,
               judged.package.version, publish_time_target_);
  // The file itself now, on the upstream the packument came over when it may carry another
  // request. Its end was read already (a GET without a body), and is sent with its head.
  publish_time_target_.clear();
  metadata_.reset();
  releaseAnsweredUpstream();
  after_ = UpstreamAfter::Keep;
  request_end_ = RequestEnd::Read;
  acquireUpstream(decideRequest({}, false));
}

}  // namespace sluice::proxy::session
