#include "proxy/cli/cli.h"

#include <cstdio>

#include <string>
#include <string_view>
#include <vector>

#include "base/version.h"
#include "proxy/cli/command_help.h"

namespace sluice::cli {

namespace {

int usage(Streams streams, std::string_view problem) {
  if (!problem.empty()) {
    std::fprintf(streams.err, "sluice: %.*s\n", static_cast<int>(problem.size()),
                 problem.data());
  }
  const std::string overview = overviewText();
  std::fprintf(streams.err, "%s", overview.c_str());
  return kExitUsage;
}

// The command `args` start with ("ca init" is two words), or nullptr.
const CommandHelp* namedCommand(std::span<const std::string_view> args) {
  if (args.size() >= 2) {
    if (const CommandHelp* two =
            findCommandHelp(std::string(args[0]) + " " + std::string(args[1]))) {
      return two;
    }
  }
  return args.empty() ? nullptr : findCommandHelp(args[0]);
}

bool asksForHelp(std::span<const std::string_view> args) {
  for (std::string_view arg : args) {
    if (arg == "--help" || arg == "-h") {
      return true;
    }
  }
  return false;
}

int printHelp(Streams streams, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), streams.out);
  return kExitOk;
}

// `sluice help [COMMAND] [--man]`, and `--help` or `-h` anywhere after a command.
int help(std::span<const std::string_view> args, Streams streams) {
  if (asksForHelp(args)) {  // `sluice help --help`
    return printHelp(streams, commandHelpText(*findCommandHelp("help")));
  }
  for (std::string_view arg : args) {
    if (arg == "--man") {
      return args.size() == 1 ? printHelp(streams, manPage(SLUICE_VERSION))
                              : usage(streams, "help: --man takes no command");
    }
  }
  if (args.empty()) {
    return printHelp(streams, overviewText());
  }
  const CommandHelp* command = namedCommand(args);
  if (command == nullptr) {
    std::string group;  // "ca" or "audit": the help of each of its commands
    for (const CommandHelp& each : allCommandHelp()) {
      if (each.name.starts_with(std::string(args[0]) + " ")) {
        group += (group.empty() ? "" : "\n") + commandHelpText(each);
      }
    }
    if (group.empty()) {
      return usage(streams, "help: unknown command '" + std::string(args[0]) + "'");
    }
    return printHelp(streams, group);
  }
  return printHelp(streams, commandHelpText(*command));
}

}  // namespace

int run(int argc, char** argv, Streams streams) {
  std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (args.empty()) {
    return usage(streams, "");
  }
  std::string_view command = args.front();
  if (command == "help" || command == "--help" || command == "-h") {
    return help(std::span<const std::string_view>(args).subspan(1), streams);
  }
  if (asksForHelp(args)) {
    const CommandHelp* named = namedCommand(args);
    const std::size_t words =
        named != nullptr && named->name.find(' ') != std::string_view::npos ? 2 : 1;
    return help(std::span<const std::string_view>(args).first(words), streams);
  }
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
    if (!rest.empty() && rest.front() == "sbom") {
      return auditSbomCommand(rest.subspan(1), streams);
    }
    return usage(streams,
                 "audit: expected 'audit verify FILE', 'audit summary FILE...', "
                 "'audit report FILE... -o OUT.html' or 'audit sbom FILE...'");
  }
  return usage(streams, "unknown command '" + std::string(command) + "'");
}

}  // namespace sluice::cli
