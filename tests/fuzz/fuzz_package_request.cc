// libFuzzer target for which package a registry request names (docs/packages.md#requests): the
// request target is the sandbox's, and what the recogniser reads of it is what the package
// firewall judges and the audit record names.
// Parser files: policy/package_request.cc, policy/package_name.cc
//
// Input: byte 0 picks the ecosystem (bit 0) and the registry's path (bits 1-2: "/", "/npm/",
// "/api/pypi/", "/a/b/"), byte 1 the method (bit 0: GET, else POST); the rest is the target.
// The same bytes are also parsed as a `packages` list entry and matched against the name read.
// Invariants, each a trap on violation:
//   - a request that names a package (metadata, a version's metadata, a file) has a name in
//     its normal form for its ecosystem (normalising it again changes nothing), at most 214
//     bytes; any other kind has no name and no version;
//   - a version is set exactly for files and version metadata, at most 128 bytes of
//     [A-Za-z0-9.+!_-];
//   - a POST names no package; an unrecognised request has no metadata form;
//   - a pattern parsed from the bytes matches a name without reading past either.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "policy/package_name.h"
#include "policy/package_request.h"

namespace {

namespace sp = sluice::policy;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

bool isVersionByte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '.' || c == '-' || c == '+' || c == '!' || c == '_';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) {
    return 0;
  }
  constexpr std::string_view kPaths[] = {"/", "/npm/", "/api/pypi/", "/a/b/"};
  sp::RegistrySettings registry;
  registry.ecosystem = (data[0] & 1) != 0 ? sp::Ecosystem::Pypi : sp::Ecosystem::Npm;
  registry.path = std::string(kPaths[(data[0] >> 1) & 3]);
  const std::string_view method = (data[1] & 1) != 0 ? "GET" : "POST";
  const std::string_view target(reinterpret_cast<const char*>(data + 2), size - 2);

  const sp::PackageRequest got = sp::recognizePackageRequest(registry, method, target);
  using Kind = sp::PackageRequestKind;
  check(got.ecosystem == registry.ecosystem);
  const bool names = got.kind == Kind::Metadata || got.kind == Kind::VersionMetadata ||
                     got.kind == Kind::File;
  if (names) {
    check(!got.name.empty() && got.name.size() <= 214);
    const auto again = sp::normalizePackageName(got.ecosystem, got.name);
    check(again.has_value() && *again == got.name);
  } else {
    check(got.name.empty() && got.version.empty());
  }
  const bool versioned = got.kind == Kind::VersionMetadata || got.kind == Kind::File;
  check(versioned == !got.version.empty());
  check(got.version.size() <= 128);
  for (char c : got.version) {
    check(isVersionByte(c));
  }
  if (method == "POST") {
    check(got.kind == Kind::None);
  }
  if (got.kind == Kind::Unrecognized || got.kind == Kind::File || got.kind == Kind::None) {
    check(got.form == sp::MetadataForm::None);
  }

  auto pattern = sp::PackagePattern::parse(target);
  if (pattern && names) {
    (void)pattern.value().matches(got.ecosystem, got.name);
  }
  (void)sp::globMatches(target, got.name);
  return 0;
}
