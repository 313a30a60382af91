#pragma once
// Loads the YAML of docs/configuration.md into a Config. The only place yaml-cpp is used.
//
// Every problem is reported, not only the first, as FILE:LINE:COL: key.path: message (1-based).
// yaml-cpp 0.7 silently accepts things that would quietly change an allowlist, so the loader
// walks every map itself: unknown keys, duplicate keys (yaml-cpp keeps the first), a number
// that is not plain decimal (yaml-cpp reads `0443` as octal 291 and `0x1bb` as 443), a quoted
// number, `yes`/`on` for booleans, and more than one YAML document are all errors.
//
// No I/O: the caller reads the files and lists `sandboxes_dir` through the callback, so the
// loader stays a pure function of its inputs.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "policy/config.h"

namespace sluice::policy {

struct ConfigText {
  std::string file;  // the name errors are reported under
  std::string text;
};

struct ConfigError {
  std::string file;
  int line = 0;    // 1-based; 0 when the error has no position (an unreadable file)
  int column = 0;  // 1-based
  std::string message;  // "sandboxes[1].listen: ..." (key path first, where there is one)

  std::string toString() const;  // "FILE:LINE:COL: message", or "FILE: message"
};

struct LoadOptions {
  // Where a sandbox without `ca` keeps its CA: <default_ca_base>/<sandbox name>. The caller
  // resolves $XDG_STATE_HOME/sluice, else ~/.local/state/sluice.
  std::string default_ca_base;
  // Reads the YAML files of `sandboxes_dir` (resolved against the config file's directory),
  // one sandbox per file, in the order they should be loaded. An Err names the failure.
  std::function<Result<std::vector<ConfigText>, std::string>(const std::string& dir)>
      read_sandbox_dir;
};

using ConfigResult = Result<std::shared_ptr<const Config>, std::vector<ConfigError>>;

// Relative paths in a file (ca, audit, sandboxes_dir, upstream.ca_file) are taken relative to
// the directory of that file.
ConfigResult loadConfig(const ConfigText& main, const LoadOptions& options);

}  // namespace sluice::policy
