// sluice audit summary FILE... [--json] [--since WHEN] [--sandbox NAME]: what the sandboxes
// fetched and were refused, per sandbox and host, from their audit logs; sluice audit report
// FILE... -o OUT.html [--since WHEN] [--sandbox NAME]: the same as one self-contained HTML page
// (docs/cli.md#sluice-audit-summary-sluice-audit-report). Exit 0, or 2 for bad arguments or a
// file that cannot be read or written.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "proxy/audit/audit_report.h"
#include "proxy/audit/audit_summary.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"

namespace sluice::cli {

namespace {

constexpr std::string_view kUsageLine =
    "usage: sluice audit summary FILE... [--json] [--since WHEN] [--sandbox NAME]\n"
    "       sluice audit report FILE... -o OUT.html [--since WHEN] [--sandbox NAME]\n"
    "  WHEN: a time in RFC 3339, UTC unless it says otherwise (2026-12-03, 2026-12-03T06:00,\n"
    "        2026-12-03T07:00:00+01:00), or a span back from now (90s, 30m, 2h, 7d)\n"
    "        (90s, 30m, 2h, 7d)\n";

int badInput(Streams streams, std::string_view command, const std::string& problem) {
  std::fprintf(streams.err, "sluice audit %.*s: %s\n%.*s", static_cast<int>(command.size()),
               command.data(), problem.c_str(), static_cast<int>(kUsageLine.size()),
               kUsageLine.data());
  return kExitUsage;
}

// Both commands: `report` writes the page to -o, `summary` the table or --json to stdout.
int auditSummaryOrReport(std::string_view command, std::span<const std::string_view> args,
                         Streams streams) {
  const bool report = command == "report";
  const std::span<const FlagSpec> specs = commandFlags(report ? "audit report" : "audit summary");
  std::vector<std::string> files;
  std::string error;
  auto flags = parseFlagsAmongFiles(args, specs, files, &error);
  if (!flags) {
    return badInput(streams, command, error);
  }
  if (files.empty()) {
    return badInput(streams, command, "no audit file given");
  }
  if (report && !flags->get("output")) {
    return badInput(streams, command, "-o OUT.html is required");
  }
  proxy::audit::SummaryFilter filter;
  if (auto since = flags->get("since")) {
    auto from = proxy::audit::sinceTimestamp(*since, std::chrono::system_clock::now());
    if (!from) {
      return badInput(streams, command,
                      "--since " + std::string(*since) + " is not a time or a span");
    }
    filter.since = std::move(*from);
  }
  if (auto sandbox = flags->get("sandbox")) {
    filter.sandbox.assign(*sandbox);
  }
  proxy::audit::Summary summary(filter);
  for (const std::string& path : files) {
    if (!forEachLogLine(path, command, streams,
                        [&](std::string_view line) { summary.add(line); })) {
      return kExitUsage;
    }
  }
  if (report) {
    const std::string path(*flags->get("output"));
    const std::string page = proxy::audit::summaryReport(summary, files);
    std::FILE* out = std::fopen(path.c_str(), "we");
    bool written = out != nullptr && std::fwrite(page.data(), 1, page.size(), out) == page.size() &&
                   std::fflush(out) == 0;
    if (out != nullptr && std::fclose(out) != 0) {
      written = false;
    }
    if (!written) {
      std::fprintf(streams.err, "sluice audit report: %s: %s\n", path.c_str(),
                   std::strerror(errno));
      return kExitUsage;
    }
    std::fprintf(streams.out, "%s: %llu records\n", path.c_str(),
                 static_cast<unsigned long long>(summary.records()));
    return kExitOk;
  }
  const std::string out =
      flags->has("json") ? proxy::audit::summaryJson(summary) : proxy::audit::summaryTable(summary);
  std::fwrite(out.data(), 1, out.size(), streams.out);
  return kExitOk;
}

}  // namespace

int auditSummaryCommand(std::span<const std::string_view> args, Streams streams) {
  return auditSummaryOrReport("summary", args, streams);
}

int auditReportCommand(std::span<const std::string_view> args, Streams streams) {
  return auditSummaryOrReport("report", args, streams);
}

}  // namespace sluice::cli
