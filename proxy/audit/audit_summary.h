#pragma once
// What audit logs say, per sandbox and host (docs/audit.md#summaries): `sluice audit summary`
// and `sluice audit report` read files line by line into one Summary. Lines that are not
// records (not JSON, a record of a kind it does not know, a record without a sandbox) are
// counted, never fatal: a log may have been edited, cut or mixed with other lines.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::audit {

// One host of one sandbox: its requests.
struct HostSummary {
  std::uint64_t requests = 0;
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t reported = 0;
  std::map<std::string, std::uint64_t> reasons;  // denied and reported, by reason
  std::uint64_t req_bytes = 0;
  std::uint64_t resp_bytes = 0;
  std::string first_seen;  // ts, RFC 3339 (they sort as text)
  std::string last_seen;
};

// One name the sandbox's resolver refused (or, in report mode, answered).
struct NameSummary {
  std::uint64_t queries = 0;
  std::map<std::string, std::uint64_t> answers;  // nxdomain, refused, ...
  std::string first_seen;
  std::string last_seen;
};

// One package file the sandbox was served (docs/packages.md#sbom: kind file, allowed or
// reported, status 200).
struct PackageSummary {
  std::string ecosystem;  // "npm", "pypi"
  std::string name;       // normal form
  std::string version;
  std::uint64_t fetches = 0;
};

struct SandboxSummary {
  std::map<std::string, HostSummary> hosts;        // by host (with its port when not the default)
  std::map<std::string, NameSummary> names;        // DNS, by name
  std::map<std::string, PackageSummary> packages;  // by purl
};

// Requests of one minute (the ts's first 16 characters, "2026-12-03T06:00"), by decision.
struct MinuteCounts {
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t reported = 0;
};

struct SummaryFilter {
  std::string since;    // records with ts >= this (canonical, see sinceTimestamp); "" all
  std::string sandbox;  // only this sandbox; "" all
};

class Summary {
 public:
  explicit Summary(SummaryFilter filter = {}) : filter_(std::move(filter)) {}

  // One line of a log (without its newline).
  void add(std::string_view line);

  const std::map<std::string, SandboxSummary>& sandboxes() const { return sandboxes_; }
  // Every sandbox's requests, minute by minute (for the report's timeline).
  const std::map<std::string, MinuteCounts>& timeline() const { return timeline_; }
  std::uint64_t records() const { return records_; }    // lines taken into the summary
  std::uint64_t skipped() const { return skipped_; }    // lines that are not records
  std::uint64_t filtered() const { return filtered_; }  // records --since/--sandbox left out

 private:
  SummaryFilter filter_;
  std::map<std::string, SandboxSummary> sandboxes_;
  std::map<std::string, MinuteCounts> timeline_;
  std::uint64_t records_ = 0;
  std::uint64_t skipped_ = 0;
  std::uint64_t filtered_ = 0;
};

// The host a request record is about: the url's authority (with a port only when it is not the
// scheme's default, as the url has it), else the SNI, else the Host field, else "-".
std::string hostOfRecord(std::string_view url, std::optional<std::string_view> sni,
                         std::optional<std::string_view> host);

// "1.2 MiB": what a column of bytes says (the table's and the report's).
std::string humanBytes(std::uint64_t bytes);

// "1 request", "2 requests": `noun` with an s unless n is 1.
std::string countOf(std::uint64_t n, std::string_view noun);

// An RFC 3339 time, or the start of one: "2026-12-03", "2026-12-03T06:00", ...T06:00:05.25, each
// with an optional "Z" or "+01:00"; without a zone it is UTC (as every record's ts is).
// Milliseconds, not system_clock's nanoseconds: those end in 2262, and a --since may not.
using TimeMs = std::chrono::sys_time<std::chrono::milliseconds>;
std::optional<TimeMs> parseTime(std::string_view text);
// A record's ts form: "2026-12-03T06:00:00.000Z" (years 0000-9999; outside, clamped to them).
std::string canonicalTime(TimeMs at);
// --since WHEN as a record's ts compares with (its canonical form, "...T06:00:00.000Z"): a time
// (parseTime) or a span before `now` ("90s", "15m", "2h", "7d"). nullopt: neither.
std::optional<std::string> sinceTimestamp(std::string_view when,
                                          std::chrono::system_clock::time_point now);

// The table of `sluice audit summary` (docs/cli.md#sluice-audit-summary-sluice-audit-report).
std::string summaryTable(const Summary& summary);
// The same as one JSON object.
std::string summaryJson(const Summary& summary);

}  // namespace sluice::proxy::audit
