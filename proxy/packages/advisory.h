#pragma once
// OSV advisories (docs/packages.md#advisories): the documents of the OSV database and of the
// OpenSSF malicious-packages repository (schema 1.x, https://ossf.github.io/osv-schema/), read
// into one entry per affected npm or PyPI package, and matched to versions.
//
// What is kept of a document: its `id` (which must be a string of [A-Za-z0-9._:-], at most
// kMaxOsvIdLength bytes: it is shown in a 403 body and the record), `modified`, and per
// `affected[]` whose `package.ecosystem` is exactly "npm" or "PyPI": the name in its normal
// form (policy::normalizePackageName; a name that has none is skipped, as no request can name
// it), `versions[]`, and the SEMVER and ECOSYSTEM `ranges[]`. Skipped, not errors: other
// ecosystems, GIT ranges (they name commits), ranges of unknown types, events of unknown kinds,
// unknown fields. A withdrawn advisory (`withdrawn` a string) gives nothing. Errors (nothing of
// the document kept): not JSON, nesting deeper than kMaxOsvDepth, not an object, no string id,
// a field this reader uses with the wrong type in an npm or PyPI entry, an event naming two
// kinds, more than a bound below.
//
// Matching follows the spec's evaluation: a version is affected when it is in `versions`
// (the ecosystem's equality: "1.0" is "1.0.0" on PyPI) or in a range: events sorted in the
// range's order (SEMVER: SemVer for both ecosystems; ECOSYSTEM: PEP 440 for PyPI, SemVer for
// npm), affected from an `introduced` ("0": the beginning) until a `fixed` (excluded) or past
// a `last_affected` (included), and only below some `limit` when the range has limits ("*":
// none). Where the data is broken sluice errs toward "affected", as a firewall should:
//   - an `introduced` that is no version of the range's order counts as "0", a `fixed`,
//     `last_affected` or `limit` that is none is dropped (it could only narrow the range);
//   - a range with events but no `introduced` starts at "0";
//   - at equal versions a `fixed` or `last_affected` is applied before an `introduced`, so
//     touching intervals ([1, 2) and [2, 3)) leave no gap.
// A version that is no version of a range's order sorts before every version
// (version_order.h): only a range from "0" with no bound it can pass covers it.
//
// Bounds: documents over kMaxOsvDocument bytes are refused (callers should not read them
// whole). Per document at most kMaxOsvAffected kept entries, kMaxOsvVersions versions and
// kMaxOsvEvents events in all (more is an error, not a silent cut: a cut list could hide an
// affected version); a listed version over kMaxOsvVersionLength bytes (longer than any
// version either order reads) is dropped, and an event's text over it counts as no version
// (above). What a document adds to `out` is at most about its own size plus 1 KiB per entry.
// A reader holds about 15 times the largest document it has read (simdjson's DOM: 8 bytes of
// tape and 4 of structural index per input byte, strings, and the padded copy) until it is
// destroyed, so a loader should keep one reader per reload, not one per process.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/package_name.h"
#include "proxy/packages/version_order.h"

namespace sluice::proxy::packages {

inline constexpr std::size_t kMaxOsvDocument = 4 << 20;
inline constexpr std::size_t kMaxOsvDepth = 64;
inline constexpr std::size_t kMaxOsvAffected = 1024;
inline constexpr std::size_t kMaxOsvVersions = 16384;
inline constexpr std::size_t kMaxOsvEvents = 4096;
inline constexpr std::size_t kMaxOsvIdLength = 128;
inline constexpr std::size_t kMaxOsvVersionLength = 256;

enum class OsvEventKind : std::uint8_t { Introduced, Fixed, LastAffected, Limit };

struct OsvEvent {
  OsvEventKind kind = OsvEventKind::Introduced;
  std::string version;  // "0" for an introduced from the beginning; never "*" (see above)

  bool operator==(const OsvEvent&) const = default;
};

struct OsvRange {
  VersionScheme scheme = VersionScheme::SemVer;
  std::vector<OsvEvent> events;  // sorted as evaluated; at least one Introduced

  bool operator==(const OsvRange&) const = default;
};

// One affected (ecosystem, package) of one advisory.
struct AdvisoryEntry {
  std::string id;          // "MAL-2025-1234", "GHSA-xxxx-xxxx-xxxx", "PYSEC-2024-1"
  bool malicious = false;  // the OpenSSF malicious-packages ids: "MAL-..."
  std::string modified;    // as written ("" when absent or not a short string)
  policy::Ecosystem ecosystem = policy::Ecosystem::Npm;
  std::string name;                   // normal form
  std::vector<std::string> versions;  // as written
  std::vector<OsvRange> ranges;

  bool operator==(const AdvisoryEntry&) const = default;
};

// Whether `entry` names `version` (spelled as the registry spells it).
bool affects(const AdvisoryEntry& entry, std::string_view version);

// Reads documents with one parser, reused: what a loader of many files keeps.
class OsvReader {
 public:
  OsvReader();
  ~OsvReader();
  OsvReader(const OsvReader&) = delete;
  OsvReader& operator=(const OsvReader&) = delete;

  // Appends the document's entries to `out` and returns true, or leaves `out` as it was,
  // sets `*error` (when not null) and returns false.
  bool read(std::string_view json, std::vector<AdvisoryEntry>& out, std::string* error);

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
};

// One document with a parser of its own (tests, one-offs).
bool parseOsv(std::string_view json, std::vector<AdvisoryEntry>& out, std::string* error);

struct AdvisoryMatch {
  std::string_view id;  // valid while the index is
  bool malicious = false;
};

// The advisories a configuration loaded, by package. Entries are sorted by (ecosystem, name,
// id), each entry's versions replaced by their versionKey()s, sorted; exact duplicates (the
// same advisory read from a directory and a zip) are kept once. A lookup finds the package by
// binary search, O(log n) in the entries, then evaluates each of that package's entries: a
// binary search of its versions, then its range events, each compared in time linear in the
// texts. Nothing is allocated unless something matches or the version's key is longer than
// std::string keeps inline.
class AdvisoryIndex {
 public:
  AdvisoryIndex() = default;
  explicit AdvisoryIndex(std::vector<AdvisoryEntry> entries);

  // `name` in its normal form, `version` as the registry spells it. Each matching advisory
  // once, in id order.
  std::vector<AdvisoryMatch> lookup(policy::Ecosystem ecosystem, std::string_view name,
                                    std::string_view version) const;
  // The first match in id order, among malicious ones only when `malicious_only`.
  std::optional<AdvisoryMatch> find(policy::Ecosystem ecosystem, std::string_view name,
                                    std::string_view version, bool malicious_only) const;

  // Whether any advisory names the package at all (then some version of it may be refused).
  bool namesPackage(policy::Ecosystem ecosystem, std::string_view name) const {
    return !entriesFor(ecosystem, name).empty();
  }
  std::size_t size() const { return advisories_; }  // distinct advisory ids
  std::size_t entryCount() const { return entries_.size(); }
  // 64-bit FNV-1a over the kept entries in index order, each entry given by its own FNV-1a
  // over everything kept of it (ecosystem, name, id, modified, version keys, ranges as
  // settled): equal when the same advisories are loaded whatever order the files were read
  // in, and changed by any change that can change a lookup (or a `modified`). Computed once,
  // when the index is built.
  std::uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::span<const AdvisoryEntry> entriesFor(policy::Ecosystem ecosystem,
                                            std::string_view name) const;

  std::vector<AdvisoryEntry> entries_;
  std::size_t advisories_ = 0;
  std::uint64_t fingerprint_ = 0;
};

}  // namespace sluice::proxy::packages
