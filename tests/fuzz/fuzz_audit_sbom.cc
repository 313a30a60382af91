// libFuzzer target for what `sluice audit sbom` reads: audit logs that anyone with write access
// may have shaped, through the JSON line reader (base/json_reader.h), each record's `package`
// read again by it, into the SBOM (docs/packages.md#sbom). The input is a log, split at '\n' as
// the command splits it.
// Invariants, each a trap on violation:
//   - every line is either a record taken in or a line skipped (nothing else, no crash);
//   - there are no more components than records;
//   - each component's purl is "pkg:npm/" or "pkg:pypi/" and then only purl-spec's unreserved
//     characters, '%' with two hex digits, one '/' at most (npm's scope) and one '@';
//   - each digest is 64 lower-case hex digits;
//   - the SBOM is one JSON object the line reader reads back.
//
// Parser files: base/json_reader.cc proxy/audit/audit_sbom.cc

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_reader.h"
#include "proxy/audit/audit_sbom.h"

namespace {

bool hexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool wellFormedPurl(std::string_view purl) {
  if (purl.starts_with("pkg:npm/")) {
    purl.remove_prefix(8);
  } else if (purl.starts_with("pkg:pypi/")) {
    purl.remove_prefix(9);
  } else {
    return false;
  }
  int slashes = 0;
  int ats = 0;
  for (std::size_t i = 0; i < purl.size(); ++i) {
    const char c = purl[i];
    if (c == '/') {
      ++slashes;
    } else if (c == '@') {
      ++ats;
    } else if (c == '%') {
      if (i + 2 >= purl.size()) {
        return false;
      }
      const char hi = purl[i + 1];
      const char lo = purl[i + 2];
      const auto upper = [](char h) { return (h >= '0' && h <= '9') || (h >= 'A' && h <= 'F'); };
      if (!upper(hi) || !upper(lo)) {
        return false;
      }
      i += 2;
    } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_' || c == '~')) {
      return false;
    }
  }
  return slashes <= 1 && ats == 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view log(reinterpret_cast<const char*>(data), size);
  sluice::proxy::audit::Sbom sbom;
  std::uint64_t lines = 0;
  while (!log.empty()) {
    std::size_t end = log.find('\n');
    std::string_view line = log.substr(0, end == std::string_view::npos ? log.size() : end);
    log.remove_prefix(end == std::string_view::npos ? log.size() : end + 1);
    sbom.add(line);
    ++lines;
  }
  if (sbom.records() + sbom.skipped() != lines || sbom.components().size() > sbom.records()) {
    __builtin_trap();
  }
  for (const auto& [purl, component] : sbom.components()) {
    if (!wellFormedPurl(purl)) {
      __builtin_trap();
    }
    for (const std::string& hex : component.sha256s) {
      if (hex.size() != 64) {
        __builtin_trap();
      }
      for (char c : hex) {
        if (!hexDigit(c)) {
          __builtin_trap();
        }
      }
    }
  }
  const std::string json = sluice::proxy::audit::sbomJson(sbom, {"urn:uuid:x", "t", "v"});
  if (json.empty() || json.back() != '\n' ||
      !sluice::JsonObjectLine::parse(std::string_view(json).substr(0, json.size() - 1))) {
    __builtin_trap();
  }
  return 0;
}
