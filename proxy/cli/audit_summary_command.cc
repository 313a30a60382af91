// sluice audit summary FILE... [--json] [--since WHEN] [--sandbox NAME]: what the sandboxes
// fetched and were refused, per sandbox and host, from their audit logs
// (docs/cli.md#sluice-audit-summary-sluice-audit-report). Exit 0, or 2 for bad arguments or a
// file that cannot be read.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "proxy/audit/audit_record.h"
#include "proxy/audit/audit_summary.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/flags.h"

namespace sluice::cli {

namespace {

constexpr std::string_view kUsageLine =
    "usage: sluice audit summary FILE... [--json] [--since WHEN] [--sandbox NAME]\n"
    "  WHEN: a time in RFC 3339 (2026-12-03, 2026-12-03T06:00:00Z) or a span back from now\n"
    "        (90s, 30m, 2h, 7d)\n";

int badInput(Streams streams, const std::string& problem) {
  std::fprintf(streams.err, "sluice audit summary: %s\n%.*s", problem.c_str(),
               static_cast<int>(kUsageLine.size()), kUsageLine.data());
  return kExitUsage;
}

// --since as the text a record's ts compares with: an RFC 3339 time (or its prefix) as given,
// a span ("2h") as now minus it. Empty: not a time.
std::string sinceText(std::string_view when) {
  if (when.size() >= 4 && when[0] >= '0' && when[0] <= '9' && when.find('-') == 4) {
    return std::string(when);
  }
  if (when.size() < 2) {
    return "";
  }
  const char unit = when.back();
  const std::string digits(when.substr(0, when.size() - 1));
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) {
    return "";
  }
  const long long n = std::atoll(digits.c_str());
  std::chrono::seconds span;
  switch (unit) {
    case 's':
      span = std::chrono::seconds(n);
      break;
    case 'm':
      span = std::chrono::minutes(n);
      break;
    case 'h':
      span = std::chrono::hours(n);
      break;
    case 'd':
      span = std::chrono::hours(24 * n);
      break;
    default:
      return "";
  }
  std::string text;
  proxy::audit::appendTimestamp(text, std::chrono::system_clock::now() - span);
  return text;
}

bool readInto(const std::string& path, proxy::audit::Summary& summary, Streams streams) {
  std::FILE* file = path == "-" ? stdin : std::fopen(path.c_str(), "re");
  if (file == nullptr) {
    std::fprintf(streams.err, "sluice audit summary: %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  char* line = nullptr;
  std::size_t capacity = 0;
  ssize_t n = 0;
  while ((n = ::getline(&line, &capacity, file)) > 0) {
    std::string_view text(line, static_cast<std::size_t>(n));
    if (text.back() == '\n') {
      text.remove_suffix(1);
    }
    summary.add(text);
  }
  const bool read_error = std::ferror(file) != 0;
  std::free(line);
  if (file != stdin) {
    std::fclose(file);
  }
  if (read_error) {
    std::fprintf(streams.err, "sluice audit summary: %s: read error\n", path.c_str());
  }
  return !read_error;
}

}  // namespace

int auditSummaryCommand(std::span<const std::string_view> args, Streams streams) {
  static constexpr FlagSpec kSpecs[] = {
      {"json", "", false, false}, {"since", "", false, true}, {"sandbox", "", false, true}};
  // Files are the arguments that are no flag and no flag's value.
  std::vector<std::string_view> flag_args;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg.starts_with("--")) {
      flag_args.push_back(arg);
      const bool takes_value = arg == "--since" || arg == "--sandbox";
      if (takes_value && i + 1 < args.size()) {
        flag_args.push_back(args[++i]);
      }
    } else if (arg.starts_with("-") && arg != "-") {
      return badInput(streams, "unknown flag " + std::string(arg));
    } else {
      files.emplace_back(arg);
    }
  }
  std::string error;
  auto flags = Flags::parse(flag_args, kSpecs, &error);
  if (!flags) {
    return badInput(streams, error);
  }
  if (files.empty()) {
    return badInput(streams, "no audit file given");
  }
  proxy::audit::SummaryFilter filter;
  if (auto since = flags->get("since")) {
    filter.since = sinceText(*since);
    if (filter.since.empty()) {
      return badInput(streams, "--since " + std::string(*since) + " is not a time or a span");
    }
  }
  if (auto sandbox = flags->get("sandbox")) {
    filter.sandbox.assign(*sandbox);
  }
  proxy::audit::Summary summary(filter);
  for (const std::string& path : files) {
    if (!readInto(path, summary, streams)) {
      return kExitUsage;
    }
  }
  const std::string out =
      flags->has("json") ? proxy::audit::summaryJson(summary) : proxy::audit::summaryTable(summary);
  std::fwrite(out.data(), 1, out.size(), streams.out);
  return kExitOk;
}

}  // namespace sluice::cli
