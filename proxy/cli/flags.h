#pragma once
// A small, strict flag parser for the commands: "--name value", "--name=value" and the short
// aliases a command declares ("-c"). Unknown flags, missing values and repeats of a flag that
// may appear once are errors with a message; nothing is guessed.

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {

struct FlagSpec {
  std::string_view name;        // "config"
  std::string_view short_name;  // "c", or empty
  bool repeatable = false;
  bool takes_value = true;
  std::string_view value = "";  // what the value is, for the help: "FILE"
  std::string_view help = "";   // one paragraph (proxy/cli/command_help.h)
};

class Flags {
 public:
  // On error returns nullopt and sets *error ("unknown flag --foo", "--url needs a value").
  static std::optional<Flags> parse(std::span<const std::string_view> args,
                                    std::span<const FlagSpec> specs, std::string* error);

  bool has(std::string_view name) const { return values_.count(std::string(name)) != 0; }
  // The value of a flag given once; nullopt when absent.
  std::optional<std::string_view> get(std::string_view name) const;
  // Every value of a repeatable flag, in order.
  std::vector<std::string_view> all(std::string_view name) const;

 private:
  std::map<std::string, std::vector<std::string_view>, std::less<>> values_;
};

// A command that takes files among its flags (the audit commands): each argument that is no
// flag and no flag's value is a file ("-" is standard input), appended to `files`; the flags,
// with their values, are parsed by Flags::parse (nullopt and `*error` as it says).
std::optional<Flags> parseFlagsAmongFiles(std::span<const std::string_view> args,
                                          std::span<const FlagSpec> specs,
                                          std::vector<std::string>& files, std::string* error);

}  // namespace sluice::cli
