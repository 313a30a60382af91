// libFuzzer target for what `sluice audit summary` reads: audit logs that anyone with write
// access may have shaped, through the JSON line reader (base/json_reader.h) into the summary.
// The input is a log, split at '\n' as the command splits it.
// Invariants, each a trap on violation:
//   - every line is either a record taken in or a line skipped (nothing else, no crash);
//   - the JSON the summary writes is one object the line reader reads back, with the same
//     number of records;
//   - the table holds no control character but '\n' (a name cannot steer a terminal);
//   - the report (proxy/audit/audit_report.cc) holds no control character but '\n', no
//     markup the log could have brought ("<script", "<i>"), and at most 120 timeline bars;
//   - the first line read as --since WHEN: when it is a time, its canonical form is one too,
//     and the same (sinceTimestamp is idempotent, so the filter compares like with like).
//
// Parser files: base/json_reader.cc proxy/audit/audit_summary.cc

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_reader.h"
#include "proxy/audit/audit_report.h"
#include "proxy/audit/audit_summary.h"

namespace {

bool printable(const std::string& text) {
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u == 0x7f) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view log(reinterpret_cast<const char*>(data), size);
  const auto now = std::chrono::system_clock::time_point(std::chrono::hours(500000));
  if (auto since = sluice::proxy::audit::sinceTimestamp(log.substr(0, log.find('\n')), now)) {
    if (sluice::proxy::audit::sinceTimestamp(*since, now) != since) {
      __builtin_trap();
    }
  }
  sluice::proxy::audit::Summary summary;
  std::uint64_t lines = 0;
  while (!log.empty()) {
    std::size_t end = log.find('\n');
    std::string_view line = log.substr(0, end == std::string_view::npos ? log.size() : end);
    log.remove_prefix(end == std::string_view::npos ? log.size() : end + 1);
    summary.add(line);
    ++lines;
  }
  if (summary.records() + summary.skipped() != lines) {
    __builtin_trap();
  }
  const std::string json = sluice::proxy::audit::summaryJson(summary);
  auto back = sluice::JsonObjectLine::parse(json);
  if (!back || back->count("records") != summary.records()) {
    __builtin_trap();
  }
  if (!printable(sluice::proxy::audit::summaryTable(summary))) {
    __builtin_trap();
  }
  const std::string page = sluice::proxy::audit::summaryReport(summary, {"log"});
  std::size_t bars = 0;
  for (std::size_t at = page.find("<g class=\"bar\""); at != std::string::npos;
       at = page.find("<g class=\"bar\"", at + 1)) {
    ++bars;
  }
  if (!printable(page) || bars > 120 || page.find("<script") != std::string::npos ||
      page.find("<i>") != std::string::npos) {
    __builtin_trap();
  }
  return 0;
}
