#include "proxy/cli/cli.h"

#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {

namespace {

constexpr std::string_view kUsage =
    "usage:\n"
    "  sluice run [-c FILE]         run the gateway; without -c, the built-in default\n"
    "  sluice check -c FILE         validate a configuration; errors as FILE:LINE:COL: message\n"
    "  sluice explain -c FILE --sandbox NAME --url URL [--method M] [--sni NAME]\n"
    "                 [--ip ADDR]... [--resolve]\n"
    "                               the verdict for one hypothetical request, as JSON\n"
    "  sluice ca init --dir DIR     write DIR/ca.pem and DIR/ca.key; never overwrites\n"
    "  sluice env -c FILE --sandbox NAME\n"
    "                               the shell lines a sandbox needs (proxy and CA variables)\n"
    "  sluice audit verify FILE     check an audit log's hash chain (exit 1: the first bad line)\n"
    "  sluice audit summary FILE... [--json] [--since WHEN] [--sandbox NAME]\n"
    "                               what each sandbox fetched and was refused, per host\n"
    "  sluice audit report FILE... -o OUT.html [--since WHEN] [--sandbox NAME]\n"
    "                               the same as one self-contained HTML page with charts\n"
    "  sluice version\n";

int usage(Streams streams, std::string_view problem) {
  if (!problem.empty()) {
    std::fprintf(streams.err, "sluice: %.*s\n", static_cast<int>(problem.size()),
                 problem.data());
  }
  std::fprintf(streams.err, "%.*s", static_cast<int>(kUsage.size()), kUsage.data());
  return kExitUsage;
}

}  // namespace

int run(int argc, char** argv, Streams streams) {
  std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (args.empty()) {
    return usage(streams, "");
  }
  std::string_view command = args.front();
  std::span<const std::string_view> rest(args.data() + 1, args.size() - 1);
  if (command == "run") {
    return runCommand(rest, streams);
  }
  if (command == "check") {
    return checkCommand(rest, streams);
  }
  if (command == "explain") {
    return explainCommand(rest, streams);
  }
  if (command == "version" || command == "--version") {
    return versionCommand(rest, streams);
  }
  if (command == "ca") {
    if (!rest.empty() && rest.front() == "init") {
      return caInitCommand(rest.subspan(1), streams);
    }
    return usage(streams, "ca: expected 'ca init --dir DIR'");
  }
  if (command == "env") {
    return envCommand(rest, streams);
  }
  if (command == "audit") {
    if (!rest.empty() && rest.front() == "verify") {
      return auditVerifyCommand(rest.subspan(1), streams);
    }
    if (!rest.empty() && rest.front() == "summary") {
      return auditSummaryCommand(rest.subspan(1), streams);
    }
    if (!rest.empty() && rest.front() == "report") {
      return auditReportCommand(rest.subspan(1), streams);
    }
    return usage(streams,
                 "audit: expected 'audit verify FILE', 'audit summary FILE...' or "
                 "'audit report FILE... -o OUT.html'");
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::fprintf(streams.out, "%.*s", static_cast<int>(kUsage.size()), kUsage.data());
    return kExitOk;
  }
  return usage(streams, "unknown command '" + std::string(command) + "'");
}

}  // namespace sluice::cli
