#pragma once
// The command line (docs/cli.md). Each command is a function from its arguments to an exit code,
// writing to the streams it is given, so tests can call it in-process as well as run the
// binary.

#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace sluice::cli {

struct Streams {
  std::FILE* out = stdout;
  std::FILE* err = stderr;
};

// Exit codes shared by the commands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // e.g. explain: deny; run: cannot start
inline constexpr int kExitUsage = 2;     // bad arguments or a bad config

// argv as main() receives it.
int run(int argc, char** argv, Streams streams = {});

// Each takes the arguments after its command words ("check -c F" gets {"-c", "F"}).
int runCommand(std::span<const std::string_view> args, Streams streams);
int checkCommand(std::span<const std::string_view> args, Streams streams);
int explainCommand(std::span<const std::string_view> args, Streams streams);
int caInitCommand(std::span<const std::string_view> args, Streams streams);
int envCommand(std::span<const std::string_view> args, Streams streams);
int auditVerifyCommand(std::span<const std::string_view> args, Streams streams);
int auditSummaryCommand(std::span<const std::string_view> args, Streams streams);
int auditReportCommand(std::span<const std::string_view> args, Streams streams);
int auditSbomCommand(std::span<const std::string_view> args, Streams streams);
int versionCommand(std::span<const std::string_view> args, Streams streams);

// The `audit` commands' reading of a log: each line of the file at `path` ("-": standard
// input) to `take`, without its newline. False, once it said why on `streams.err` ("sluice
// audit COMMAND: PATH: ..."), when the file cannot be opened or read.
bool forEachLogLine(const std::string& path, std::string_view command, Streams streams,
                    const std::function<void(std::string_view line)>& take);

}  // namespace sluice::cli
