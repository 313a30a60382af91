#pragma once
// The package files the sandboxes fetched, from their audit logs, as a CycloneDX 1.5 SBOM
// (docs/packages.md#sbom): `sluice audit sbom` reads files line by line into one Sbom, and
// `sluice audit summary` lists each sandbox's packages with fetchedPackage. Lines in, JSON out:
// no files, no clock, no randomness here (the command passes the serial number and the time).
//
// Every line is hostile input. A line is read by JsonObjectLine (bounded depth, at most twice
// the line's size), its `package` member by JsonObjectLine again; names must be normal names
// (policy/package_name.h: at most 214 characters), versions at most kMaxVersion bytes, digests
// exactly 64 hex digits. The Sbom holds at most one component per distinct purl and one entry
// per distinct sandbox and digest of each: its size is bounded by the input's.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/json_reader.h"
#include "policy/package_name.h"

namespace sluice::proxy::audit {

inline constexpr std::size_t kMaxVersion = 256;

// A package file a record says was served: `package.kind` "file", `decision` allow or report,
// `status` 200.
struct FetchedPackage {
  policy::Ecosystem ecosystem = policy::Ecosystem::Npm;
  std::string name;     // normal form: npm "@scope/name" or "name", PyPI PEP 503
  std::string version;  // as the URL spells it
  std::string purl;
  std::string sha256;  // lower-case hex, or "" when the record has none
};

// What a record's `package` member says of a served file: the package, nullopt when the record
// is no served package file (another kind, refused, not 200, no package), or *malformed set
// when its `package` is there but unreadable (not an object, no ecosystem, a name that is no
// package name, a version too long or empty).
std::optional<FetchedPackage> fetchedPackage(const JsonObjectLine& record, bool* malformed);

// The package URL (github.com/package-url/purl-spec PURL-TYPES): pkg:npm/%40scope/name@1.0.0,
// pkg:pypi/name@1.0; `name` in its normal form. Each segment percent-encoded but for
// [A-Za-z0-9.-_~].
std::string purlOf(policy::Ecosystem ecosystem, std::string_view name, std::string_view version);

struct SbomComponent {
  FetchedPackage package;           // the first record's (its sha256 aside)
  std::set<std::string> sha256s;    // every distinct digest the records have
  std::set<std::string> sandboxes;  // every sandbox that fetched it
  std::string first_url;            // the first record's url, in the order read
};

class Sbom {
 public:
  explicit Sbom(std::string sandbox = {}) : sandbox_(std::move(sandbox)) {}

  // One line of a log (without its newline).
  void add(std::string_view line);

  const std::map<std::string, SbomComponent>& components() const { return components_; }  // by purl
  std::uint64_t records() const { return records_; }    // lines that are records
  std::uint64_t skipped() const { return skipped_; }    // lines that are not (or unreadable)
  std::uint64_t filtered() const { return filtered_; }  // records of other sandboxes

 private:
  std::string sandbox_;  // only this sandbox's records; "" all
  std::map<std::string, SbomComponent> components_;
  std::uint64_t records_ = 0;
  std::uint64_t skipped_ = 0;
  std::uint64_t filtered_ = 0;
};

struct SbomMeta {
  std::string serial;     // "urn:uuid:..." (a random version 4 UUID)
  std::string timestamp;  // RFC 3339
  std::string tool_version;
};

// The SBOM as CycloneDX 1.5 JSON (cyclonedx.org/docs/1.5/json), one line and a newline;
// components in purl order.
std::string sbomJson(const Sbom& sbom, const SbomMeta& meta);

// "urn:uuid:xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" of 16 random bytes (RFC 4122 version 4).
std::string uuidUrn(const unsigned char (&random)[16]);

}  // namespace sluice::proxy::audit
