#pragma once
// What the package_metadata tests share (package_metadata_test.cc, the advisories' side;
// package_metadata_age_test.cc, the age rule's): requests as the recogniser reads them, and
// documents reserved as the exchange reserves them.

#include <string>
#include <string_view>

#include "policy/package_request.h"
#include "proxy/packages/metadata_json.h"

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

}  // namespace sluice::proxy::test_support
