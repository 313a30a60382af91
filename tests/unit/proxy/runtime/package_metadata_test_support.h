#pragma once
// What the package_metadata tests share (package_metadata_test.cc, the advisories' side;
// package_metadata_age_test.cc, the age rule's): requests as the recogniser reads them, and
// documents reserved as the exchange reserves them.

#include <string>
#include <string_view>
#include <vector>

#include "policy/package_request.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/runtime/package_metadata.h"

namespace sluice::proxy::test_support {

inline policy::PackageRequest request(policy::Ecosystem ecosystem, std::string_view target,
                                      std::string_view method = "GET") {
  return policy::recognizePackageRequest(policy::RegistrySettings{ecosystem, "/"}, method, target);
}

// The API pads the document in place: reserved as the exchange does, so nothing moves.
inline std::string document(std::string_view text) {
  std::string doc;
  doc.reserve(text.size() + packages::kMetadataPadding);
  doc.assign(text);
  return doc;
}

// One version's npm manifest of left-pad.
inline std::string manifest(std::string_view version) {
  return R"({"name":"left-pad","version":")" + std::string(version) +
         R"(","dist":{"tarball":"https://registry.npmjs.org/left-pad/-/left-pad-)" +
         std::string(version) + R"(.tgz","integrity":"sha512-AAAA=="}})";
}

// A PyPI JSON API document of foo-bar (https://warehouse.pypa.io/api-reference/json.html):
// `releases` (when `with_releases`: the package's document) of each version's files with their
// upload times, and `urls` the files of `info_version`.
struct JsonApiFile {
  std::string_view filename;
  std::string_view uploaded;  // upload_time_iso_8601
};
struct JsonApiRelease {
  std::string_view version;
  std::vector<JsonApiFile> files;
};
inline std::string pypiJsonApi(std::string_view info_version,
                               const std::vector<JsonApiRelease>& releases, bool with_releases) {
  const auto files = [](const JsonApiRelease& release) {
    std::string out = "[";
    for (const JsonApiFile& f : release.files) {
      out += std::string(out.size() > 1 ? "," : "") + R"({"filename":")" + std::string(f.filename) +
             R"(","url":"https://files.example/p/)" + std::string(f.filename) +
             R"(","upload_time_iso_8601":")" + std::string(f.uploaded) +
             R"(","digests":{"sha256":"abcd"}})";
    }
    return out + "]";
  };
  std::string doc = R"({"info":{"name":"foo-bar","version":")" + std::string(info_version) +
                    R"(","summary":"s"},"last_serial":7,)";
  if (with_releases) {
    doc += R"("releases":{)";
    for (const JsonApiRelease& release : releases) {
      doc += std::string(doc.back() == '{' ? "" : ",") + '"' + std::string(release.version) +
             "\":" + files(release);
    }
    doc += "},";
  }
  std::string urls = "[]";
  for (const JsonApiRelease& release : releases) {
    if (release.version == info_version) {
      urls = files(release);
    }
  }
  return doc + R"("urls":)" + urls + R"(,"vulnerabilities":[]})";
}

// The versions a filter removed, in its order.
inline std::vector<std::string> removedVersions(const ServedMetadata& served) {
  std::vector<std::string> versions;
  for (const packages::RemovedVersion& r : served.removed) {
    versions.push_back(r.version);
  }
  return versions;
}

}  // namespace sluice::proxy::test_support
