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

// The versions a filter removed, in its order.
inline std::vector<std::string> removedVersions(const ServedMetadata& served) {
  std::vector<std::string> versions;
  for (const packages::RemovedVersion& r : served.removed) {
    versions.push_back(r.version);
  }
  return versions;
}

}  // namespace sluice::proxy::test_support
