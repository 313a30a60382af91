#pragma once
// Loading a configuration text in a policy test: the errors as `sluice check` prints them, or
// the Config. One helper for every config loader test file.

#include <memory>
#include <string>
#include <vector>

#include "policy/config_loader.h"

namespace sluice::policy::test {

inline LoadOptions defaultLoadOptions() {
  LoadOptions options;
  options.default_ca_base = "/var/lib/sluice";
  return options;
}

// The errors of loading `yaml` as `file`, each as "FILE:LINE:COL: message"; empty when it
// loads, and then `loaded` (if given) gets the Config.
inline std::vector<std::string> errorsOf(const std::string& yaml,
                                         const LoadOptions& options = defaultLoadOptions(),
                                         const std::string& file = "test.yaml",
                                         std::shared_ptr<const Config>* loaded = nullptr) {
  ConfigResult result = loadConfig(ConfigText{file, yaml}, options);
  std::vector<std::string> lines;
  if (!result.ok()) {
    for (const ConfigError& e : result.error()) {
      lines.push_back(e.toString());
    }
  } else if (loaded != nullptr) {
    *loaded = std::move(result).value();
  }
  return lines;
}

}  // namespace sluice::policy::test
