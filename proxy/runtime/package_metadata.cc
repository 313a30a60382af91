#include "proxy/runtime/package_metadata.h"

#include <algorithm>

#include "base/ascii.h"
#include "policy/package_verdict.h"
#include "proxy/packages/media_type.h"
#include "proxy/packages/npm_packument_filter.h"
#include "proxy/packages/pypi_json_api_filter.h"
#include "proxy/packages/pypi_simple_filter.h"
#include "proxy/packages/version_order.h"

namespace sluice::proxy {
namespace {

using policy::MetadataForm;
using policy::Reason;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kNpmFull = kJson;
constexpr std::string_view kNpmAbbreviated = "application/vnd.npm.install-v1+json";
constexpr std::string_view kSimpleJson = kSimpleJsonType;
constexpr std::string_view kSimpleHtmlV1 = "application/vnd.pypi.simple.v1+html";
// PEP 691's alias for the newest version of the JSON form, which v1 is.
constexpr std::string_view kSimpleJsonLatest = "application/vnd.pypi.simple.latest+json";
constexpr std::string_view kHtml = "text/html";

// The policy's advisories and age rule on each version of one package: the first advisory
// that `block` counts refuses it (policy::judgePackageVersion's order; a name the lists refuse
// never gets here), then its age. A version the metadata gives no time for is looked for in
// what the sandbox learned before (`known`), and every time the document gives is kept for it.
class PolicyVersionJudge final : public packages::VersionJudge {
 public:
  PolicyVersionJudge(const policy::PackageSettings& settings, const MetadataFacts& facts,
                     const policy::PackageRequest& package)
      : settings_(settings),
        facts_(facts),
        package_(package),
        malicious_only_(settings.block == policy::AdvisoryBlock::Malicious),
        age_applies_(policy::ageRuleApplies(settings, package.ecosystem, package.name)) {}

  packages::VersionVerdict judge(std::string_view version,
                                 std::optional<std::int64_t> published) const override {
    if (published) {
      learned_.emplace_back(std::string(version), *published);
    }
    if (facts_.advisories != nullptr) {
      if (const std::optional<packages::AdvisoryMatch> match = facts_.advisories->find(
              package_.ecosystem, package_.name, version, malicious_only_)) {
        return {Reason::PackageMalicious, match->id};
      }
    }
    if (!age_applies_) {
      return {};
    }
    if (!published && facts_.known != nullptr) {
      published = facts_.known->find(package_.ecosystem, package_.name, version);
    }
    if (policy::tooNew(settings_, published, facts_.now_ms)) {
      return {Reason::PackageTooNew, {}};
    }
    return {};
  }

  // PyPI (docs/packages.md#the-age-rule): a file is as old as its own upload, or as what the
  // sandbox learned of it by its name. Asked of every file a page lists: each time is learned.
  bool fileTooNew(std::string_view file, std::optional<std::int64_t> uploaded) const override {
    if (uploaded) {
      learned_files_.emplace_back(std::string(file), *uploaded);
    }
    if (!age_applies_) {
      return false;
    }
    if (!uploaded && facts_.known != nullptr) {
      uploaded = facts_.known->findPypiFile(package_.name, file);
    }
    return policy::tooNew(settings_, uploaded, facts_.now_ms);
  }

  std::vector<std::pair<std::string, std::int64_t>>& learned() const { return learned_; }
  std::vector<std::pair<std::string, std::int64_t>>& learnedFiles() const { return learned_files_; }

 private:
  const policy::PackageSettings& settings_;
  const MetadataFacts& facts_;
  const policy::PackageRequest& package_;
  bool malicious_only_;
  bool age_applies_;
  mutable std::vector<std::pair<std::string, std::int64_t>> learned_;
  mutable std::vector<std::pair<std::string, std::int64_t>> learned_files_;
};

// A version the origin wrote, as a refusal's words show it: the origin's text, so only a short
// one of a version's characters is shown as it is.
std::string shownVersion(std::string_view version) {
  const bool plain = !version.empty() && version.size() <= 128 &&
                     std::all_of(version.begin(), version.end(), [](char c) {
                       return ascii::isAlnum(c) || c == '.' || c == '+' || c == '-' || c == '_';
                     });
  return plain ? std::string(version) : std::string("(a version of unusual spelling)");
}

bool isType(std::string_view type, std::string_view expected) {
  return ascii::iequals(type, expected);
}

void refuseInvalid(const policy::PackageRequest& package, std::string_view what,
                   std::string_view why, ServedMetadata& out) {
  out.reason = Reason::PackageMetadataInvalid;
  out.detail = "the origin's ";
  out.detail += what;
  out.detail += " of ";
  out.detail += policy::toString(package.ecosystem);
  out.detail += " package '";
  out.detail += package.name;
  out.detail += "' cannot be filtered: ";
  out.detail += why;
  out.detail += " (docs/packages.md#metadata)";
}

void refuseDocument(const policy::PackageRequest& package, std::string_view what,
                    const packages::MetadataError& error, ServedMetadata& out) {
  refuseInvalid(package, what, std::string(error.what) + " at byte " + std::to_string(error.offset),
                out);
}

void refuseType(const policy::PackageRequest& package, std::string_view what, std::string_view type,
                ServedMetadata& out) {
  // The type is the origin's text: only a clean one is quoted.
  const bool clean = type.size() <= 64 && ascii::isToken(type.substr(0, type.find('/'))) &&
                     type.find('/') != std::string_view::npos &&
                     ascii::isToken(type.substr(type.find('/') + 1));
  refuseInvalid(package, what,
                clean ? "it came as '" + std::string(type) + "', not a type of that document"
                      : std::string("its Content-Type is not a type of that document"),
                out);
}

constexpr packages::VersionOrder kOrder{&packages::compareVersions, &packages::isPrerelease};

// A version document whose version the policy refuses (`version`: the one it describes, as it
// spells it), refused with that version's reason.
void refuseVersion(const policy::PackageRequest& package, std::string_view version, Reason reason,
                   std::string_view advisory, ServedMetadata& out) {
  out.reason = reason;
  out.advisory.assign(advisory);
  out.detail = std::string(policy::toString(package.ecosystem)) + " package '" + package.name +
               "' " + shownVersion(version) + " (the version '" + package.version + "' names) ";
  out.detail += reason == Reason::PackageTooNew
                    ? "is younger than packages.min_age, or sluice does not know its age"
                    : "is named by advisory " + out.advisory;
}

// `content_type`: the origin's whole value, served again as it was (its parameters, a charset,
// kept); `type` its media type.
void serveNpm(const policy::PackageRequest& package, const packages::VersionJudge& judge,
              std::string_view content_type, std::string_view type, std::string& document,
              ServedMetadata& out) {
  if (package.form == MetadataForm::NpmVersion) {
    if (!isType(type, kNpmFull)) {
      refuseType(package, "version document", type, out);
      return;
    }
    auto judged = packages::judgeNpmVersionDocument(document, judge, std::nullopt);
    if (!judged) {
      refuseDocument(package, "version document", judged.error(), out);
      return;
    }
    if (!judged->verdict.keeps()) {
      refuseVersion(package, judged->version, judged->verdict.reason, judged->verdict.advisory,
                    out);
      return;
    }
    out.body = std::move(document);
    out.content_type.assign(content_type);
    return;
  }
  if (!isType(type, kNpmFull) && !isType(type, kNpmAbbreviated)) {
    refuseType(package, "packument", type, out);
    return;
  }
  auto filtered = packages::filterNpmPackument(document, judge, kOrder);
  if (!filtered) {
    refuseDocument(package, "packument", filtered.error(), out);
    return;
  }
  out.body = std::move(filtered->json);
  out.removed = std::move(filtered->removed);
  out.content_type.assign(content_type);
}

void servePypiSimple(const policy::PackageRequest& package, const packages::VersionJudge& judge,
                     std::string_view content_type, std::string_view type, SimplePageForm form,
                     std::string& document, ServedMetadata& out) {
  if (isType(type, kHtml) || isType(type, kSimpleHtmlV1)) {
    // An origin with no PEP 691 JSON: the page as it is, filtered with no upload times.
    auto filtered = packages::filterSimpleHtml(document, package.name, judge);
    if (!filtered) {
      refuseDocument(package, "simple page", filtered.error(), out);
      return;
    }
    out.body = std::move(filtered->body);
    out.removed = std::move(filtered->removed);
    out.content_type.assign(content_type);
    return;
  }
  if (!isType(type, kSimpleJson)) {
    refuseType(package, "simple page", type, out);
    return;
  }
  auto filtered = packages::filterSimpleJson(document, package.name, judge, kOrder);
  if (!filtered) {
    refuseDocument(package, "simple page", filtered.error(), out);
    return;
  }
  out.removed = std::move(filtered->removed);
  if (form == SimplePageForm::Json) {
    out.body = std::move(filtered->body);
    out.content_type.assign(kSimpleJson);
    return;
  }
  filtered->body.reserve(filtered->body.size() + packages::kMetadataPadding);
  auto html = packages::renderSimpleHtml(filtered->body);
  if (!html) {
    refuseDocument(package, "simple page", html.error(), out);
    return;
  }
  out.body = std::move(*html);
  out.content_type = form == SimplePageForm::HtmlV1 ? std::string(kSimpleHtmlV1)
                                                    : std::string("text/html; charset=utf-8");
}

// PyPI's JSON API (docs/packages.md#metadata): the package's document loses what the simple
// page would; a version document whose version went is refused with its reason, as npm's is.
void servePypiJsonApi(const policy::PackageRequest& package, const packages::VersionJudge& judge,
                      std::string_view content_type, std::string_view type, std::string& document,
                      ServedMetadata& out) {
  if (!isType(type, kJson)) {
    refuseType(package, "JSON API document", type, out);
    return;
  }
  auto filtered = packages::filterPypiJsonApi(document, package.name, judge, kOrder);
  if (!filtered) {
    refuseDocument(package, "JSON API document", filtered.error(), out);
    return;
  }
  out.removed = std::move(filtered->removed);
  if (package.kind == policy::PackageRequestKind::VersionMetadata &&
      filtered->info_version_removed) {
    const packages::RemovedVersion& gone = out.removed[*filtered->info_version_removed];
    refuseVersion(package, filtered->info_version, gone.reason, gone.advisory, out);
    return;
  }
  out.body = std::move(filtered->body);
  out.content_type.assign(content_type);
}

}  // namespace

void ServedMetadata::clear() {
  reason = Reason::None;
  detail.clear();
  advisory.clear();
  body.clear();
  content_type.clear();
  removed.clear();
  published.clear();
  uploaded.clear();
}

bool filtersMetadata(const policy::Policy& policy, const packages::AdvisoryIndex* advisories,
                     const policy::PackageRequest& package, std::string_view method) {
  if (!policy.packages || method != "GET") {
    return false;
  }
  // (Every form: a package's versions, or one version's document.)
  const bool metadata = package.kind == policy::PackageRequestKind::Metadata ||
                        package.kind == policy::PackageRequestKind::VersionMetadata;
  return metadata &&
         ((advisories != nullptr && advisories->namesPackage(package.ecosystem, package.name)) ||
          policy::ageRuleApplies(*policy.packages, package.ecosystem, package.name));
}

SimplePageForm simplePageFormFor(std::string_view client_accept) {
  if (packages::acceptListsMediaType(client_accept, kSimpleJson) ||
      packages::acceptListsMediaType(client_accept, kSimpleJsonLatest)) {
    return SimplePageForm::Json;
  }
  return packages::acceptListsMediaType(client_accept, kSimpleHtmlV1) ? SimplePageForm::HtmlV1
                                                                      : SimplePageForm::Html;
}

void serveFilteredMetadata(const policy::PackageSettings& settings, const MetadataFacts& facts,
                           const policy::PackageRequest& package, std::string_view content_type,
                           SimplePageForm form, std::string& document, ServedMetadata& out) {
  out.clear();
  const PolicyVersionJudge judge(settings, facts, package);
  // (The times go back to the caller whatever became of the document: they are the origin's.)
  struct Learned {
    const PolicyVersionJudge& judge;
    ServedMetadata& out;
    ~Learned() {
      out.published = std::move(judge.learned());
      out.uploaded = std::move(judge.learnedFiles());
    }
  } learned{judge, out};
  const std::string_view type = packages::mediaTypeOf(content_type);
  switch (package.form) {
    case MetadataForm::NpmPackument:
    case MetadataForm::NpmVersion:
      serveNpm(package, judge, content_type, type, document, out);
      return;
    case MetadataForm::PypiSimple:
      servePypiSimple(package, judge, content_type, type, form, document, out);
      return;
    case MetadataForm::PypiJson:
      servePypiJsonApi(package, judge, content_type, type, document, out);
      return;
    case MetadataForm::None:
      refuseInvalid(package, "document", "it is no metadata sluice reads", out);
      return;
  }
}

}  // namespace sluice::proxy
