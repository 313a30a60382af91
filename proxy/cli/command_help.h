#pragma once
// What each command takes and does, written once: `sluice COMMAND --help`, the overview of
// `sluice help`, the man page sluice(1) (`sluice help --man`, installed as share/man/man1/
// sluice.1) and the flag parser of each command all read this table, so the help cannot name a
// flag the command does not take, nor miss one it does (docs/cli.md is the long form).

#include <span>
#include <string>
#include <string_view>

#include "proxy/cli/flags.h"

namespace sluice::cli {

struct CommandHelp {
  std::string_view name;        // "audit summary"
  std::string_view synopsis;    // after the name: "FILE... [--json] [--since WHEN]"
  std::string_view purpose;     // one line, for the overview and the man page's list
  std::string_view description; // paragraphs separated by "\n\n", each one line of text
  std::span<const FlagSpec> flags;
  std::string_view example;     // shell lines, as typed
  std::string_view exit_status; // "0 ...; 1 ...; 2 ..."
};

// Every command, in the order the overview lists them.
std::span<const CommandHelp> allCommandHelp();
// The command of that name ("run", "ca init"); nullptr if there is none.
const CommandHelp* findCommandHelp(std::string_view name);
// The flags a command's parser takes: those of its help (a name not in the table is a bug, and
// aborts).
std::span<const FlagSpec> commandFlags(std::string_view name);

// `sluice COMMAND --help`: synopsis, description, options, example, exit status; wrapped at
// 80 columns.
std::string commandHelpText(const CommandHelp& help);
// `sluice help`: one line per command.
std::string overviewText();
// sluice(1) in roff (man(7) macros), for `version` (the page's footer).
std::string manPage(std::string_view version);

}  // namespace sluice::cli
