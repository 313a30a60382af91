// The age rule on a file whose publish time the sandbox never learned
// (docs/packages.md#the-age-rule). A lockfile install (`npm ci`) asks for tarballs only, a
// direct URL skips the index, and a file carries no time: before it decides, sluice asks the
// same origin for the package's metadata in the form with times (npm's full packument, PyPI's
// PEP 691 simple page under the registry's path), over the upstream the file would have
// taken, with the client's own fields (a private registry's credentials included). The times
// it gives are learned for the sandbox as if it had asked; then the file is refused
// (package_too_new) or requested in its turn, on the upstream the metadata came over when it
// may be kept. Nothing of the metadata reaches the client, and the file's record is the
// request's only record. An origin with no such metadata (pypi.org's files host, which serves
// no index) answers 404: the file stays of unknown age, refused.
#include <spdlog/spdlog.h>

#include "policy/package_verdict.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/exchange/exchange.h"

namespace sluice::proxy::session {

bool Exchange::planPublishTimeFetch(const policy::Rule& rule) {
  const policy::PackageRequest& package = record_.package.package;
  if (package.kind != policy::PackageRequestKind::File || record_.method != "GET" ||
      framing_ != http::BodyFraming::None || !rule.registry) {
    return false;
  }
  policy::PackageRequest metadata;
  metadata.kind = policy::PackageRequestKind::Metadata;
  metadata.ecosystem = package.ecosystem;
  metadata.name = package.name;
  publish_time_target_ = rule.registry->path;
  std::string_view accept;
  if (package.ecosystem == policy::Ecosystem::Npm) {
    // The packument's path as npm itself asks for it: the scope's slash encoded.
    metadata.form = policy::MetadataForm::NpmPackument;
    for (char c : package.name) {
      if (c == '/') {
        publish_time_target_ += "%2f";
      } else {
        publish_time_target_ += c;
      }
    }
  } else {
    // The project's simple page (a normal name is [a-z0-9-]: nothing to encode), as JSON.
    metadata.form = policy::MetadataForm::PypiSimple;
    publish_time_target_ += "simple/";
    publish_time_target_ += package.name;
    publish_time_target_ += '/';
    accept = kSimpleJsonType;
  }
  const policy::PackageSettings& settings = *sandbox().policy->packages;
  metadata_.plan(metadata, accept, settings.max_metadata, host_.runtime().metadata_held.get(),
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
    const policy::PackageRequest& package = record_.package.package;
    detail = std::string(policy::toString(package.ecosystem)) + " package '" + package.name + "' " +
             package.version +
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
  const ServedMetadata& fetched = metadata_.finish(settings, facts);
  known.learn(judged.package.ecosystem, judged.package.name, fetched.published);
  known.learnPypiFiles(judged.package.name, fetched.uploaded);
  if (fetched.reason == policy::Reason::PackageMetadataInvalid ||
      fetched.reason == policy::Reason::PackageMetadataTooLarge) {
    deny(fetched.reason, fetched.detail);
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
  // The file itself now, on the upstream the metadata came over when it may carry another
  // request. Its end was read already (a GET without a body), and is sent with its head.
  publish_time_target_.clear();
  metadata_.reset();
  releaseAnsweredUpstream();
  after_ = UpstreamAfter::Keep;
  request_end_ = RequestEnd::Read;
  acquireUpstream(decideRequest({}, false));
}

}  // namespace sluice::proxy::session
