#pragma once
// Registry metadata filtered on its way to the sandbox (docs/packages.md#metadata): which
// answers are held whole and filtered, the form a PyPI client is served, and the document sent
// in the origin's place (or the refusal). Sans-IO: the exchange holds the bytes, decodes them
// and sends what this decides; the filters are proxy/packages'.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/config.h"
#include "policy/package_request.h"
#include "policy/reason.h"
#include "proxy/packages/advisory.h"
#include "proxy/packages/version_judge.h"
#include "proxy/runtime/publish_times.h"

namespace sluice::proxy {

// Whether the answer to `package` (a request of a registry rule that was judged and is served)
// is held and filtered: a GET of an npm packument or version document, or of a PyPI simple
// page or JSON API document, of a policy with `packages`, for a package one of its advisories
// names or the age rule applies to. Nothing else can lose a version: a name that `deny` or
// `allow` refuses is refused before any upstream is asked.
bool filtersMetadata(const policy::Policy& policy, const packages::AdvisoryIndex* advisories,
                     const policy::PackageRequest& package, std::string_view method);

// The form a PyPI client is served a simple page in, from its Accept: PEP 691 JSON when it
// lists `application/vnd.pypi.simple.v1+json` (or the `latest+json` alias), else PEP 503 HTML,
// under the type it named.
enum class SimplePageForm : std::uint8_t { Json, HtmlV1, Html };
SimplePageForm simplePageFormFor(std::string_view client_accept);
// PEP 691's JSON form of a simple page.
inline constexpr std::string_view kSimpleJsonType = "application/vnd.pypi.simple.v1+json";
// What sluice asks a PyPI origin for in the client's place: JSON first, which carries upload
// times (PEP 700), then HTML from an origin that has only that.
inline constexpr std::string_view kSimplePageAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.1, "
    "text/html;q=0.01";

// What the filters judge with besides the policy: its advisories (or null), the time now, and
// the publish times the sandbox learned before (or null), for a version the document gives no
// time for.
struct MetadataFacts {
  const packages::AdvisoryIndex* advisories = nullptr;
  std::int64_t now_ms = 0;  // ms since the Unix epoch
  const PublishTimes* known = nullptr;
};

// What the client gets in place of the origin's 200: the filtered document, or a refusal.
struct ServedMetadata {
  policy::Reason reason = policy::Reason::None;  // None: serve `body` as `content_type`
  std::string detail;    // a refusal's why ("npm packument of 'x': ..."), for its body and log
  std::string advisory;  // package_malicious: the advisory's id
  std::string body;
  std::string content_type;
  std::vector<packages::RemovedVersion> removed;  // in the document's order
  // Each version the document gave a publish time for, with it: for PublishTimes::learn.
  std::vector<std::pair<std::string, std::int64_t>> published;
  // PyPI: each file the page gave an upload time for, by name: for PublishTimes::learnPypiFiles.
  std::vector<std::pair<std::string, std::int64_t>> uploaded;

  void clear();
};

// Filters `document` (decoded, as the origin sent it under `content_type`), the answer to
// `package`, for a client served `form` (PyPI). `document` is padded in place for the
// filters and restored; reserve size() + packages::kMetadataPadding to spare a copy.
//   - npm packument (`application/json` or `application/vnd.npm.install-v1+json`): versions
//     an advisory blocks removed (npm_packument_filter.h), served under the origin's
//     Content-Type (as it was, parameters included).
//   - npm version document (`application/json`): served as it is, or refused with the reason
//     of the version it names (a dist-tag resolves to a blocked version: package_malicious).
//   - PyPI simple page: JSON filtered and served as JSON or rendered as HTML; an HTML page
//     (from an origin without JSON) filtered as HTML.
//   - PyPI JSON API (`application/json`): the package's document loses the files and releases
//     the simple page would (pypi_json_api_filter.h), `info` served as it was; a version's
//     document is served filtered, or refused with the reason of the version it describes.
// Any other type, or a document the filter refuses, is package_metadata_invalid.
void serveFilteredMetadata(const policy::PackageSettings& settings, const MetadataFacts& facts,
                           const policy::PackageRequest& package, std::string_view content_type,
                           SimplePageForm form, std::string& document, ServedMetadata& out);

}  // namespace sluice::proxy
