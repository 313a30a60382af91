#pragma once
// Reading configuration from disk: the file named with -c, the files of `sandboxes_dir`, the
// built-in default, and where a sandbox's CA lives by default. policy/ parses and validates;
// this is the I/O it leaves to the caller.

#include <cstdio>
#include <string>
#include <vector>

#include "base/result.h"
#include "policy/config_loader.h"
#include "proxy/config/config_fingerprint.h"

namespace sluice::proxy {

// $XDG_STATE_HOME/sluice, else $HOME/.local/state/sluice (docs/configuration.md#sandboxes);
// "./sluice-state" if neither variable is set.
std::string defaultCaBase();

// The YAML files of a sandboxes directory (sandboxFileNames() that are regular files), in name
// order. `as_read` (when given) records each file as it was read.
Result<std::vector<policy::ConfigText>, std::string> readSandboxDir(
    const std::string& dir, ConfigFingerprint* as_read = nullptr);

policy::LoadOptions defaultLoadOptions(ConfigFingerprint* as_read = nullptr);

// Reads and loads `path`. An unreadable file is one error with no position. `as_read` (when
// given) records the files as they were read: what a reload's ConfigWatch measures from.
policy::ConfigResult loadConfigFile(const std::string& path,
                                    ConfigFingerprint* as_read = nullptr);

// The built-in default of `sluice run` without -c.
policy::ConfigResult loadBuiltinConfig();

// Prints each error as `sluice check` does: one "FILE:LINE:COL: message" line each.
void printConfigErrors(std::FILE* stream, const std::vector<policy::ConfigError>& errors);

}  // namespace sluice::proxy
