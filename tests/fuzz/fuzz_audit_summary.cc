// libFuzzer target for what `sluice audit summary` reads: audit logs that anyone with write
// access may have shaped, through the JSON line reader (base/json_reader.h) into the summary.
// The input is a log, split at '\n' as the command splits it.
// Invariants, each a trap on violation:
//   - every line is either a record taken in or a line skipped (nothing else, no crash);
//   - the JSON the summary writes is one object the line reader reads back, with the same
//     number of records;
//   - the table holds no control character but '\n' (a name cannot steer a terminal).
//
// Parser files: base/json_reader.cc, proxy/audit/audit_summary.cc

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_reader.h"
#include "proxy/audit/audit_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view log(reinterpret_cast<const char*>(data), size);
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
  for (char c : sluice::proxy::audit::summaryTable(summary)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u == 0x7f) {
      __builtin_trap();
    }
  }
  return 0;
}
