// sluice check -c FILE: validate; exit 0, or print every error as FILE:LINE:COL: message and
// exit 2 (docs/cli.md#sluice-check).
#include <cstdio>

#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"
#include "proxy/config/config_files.h"
#include "proxy/runtime/package_advisories.h"

namespace sluice::cli {

int checkCommand(std::span<const std::string_view> args, Streams streams) {
  std::string error;
  auto flags = Flags::parse(args, commandFlags("check"), &error);
  if (!flags || !flags->get("config")) {
    std::fprintf(streams.err, "sluice check: %s\nusage: sluice check -c FILE\n",
                 flags ? "-c FILE is required" : error.c_str());
    return kExitUsage;
  }
  std::string path(*flags->get("config"));
  auto config = proxy::loadConfigFile(path);
  if (!config) {
    proxy::printConfigErrors(streams.err, config.error());
    return kExitUsage;
  }
  // The advisories are part of what the policy enforces: a file run could not read fails here
  // too (docs/packages.md#advisories).
  auto advisories = proxy::PolicyAdvisories::load(*config.value());
  if (!advisories) {
    std::fprintf(streams.err, "sluice check: %s\n", advisories.error().c_str());
    return kExitUsage;
  }
  std::size_t rules = 0;
  for (const auto& policy : config.value()->policies) {
    rules += policy->rules.size();
  }
  std::fprintf(streams.out, "%s: ok (%zu sandboxes, %zu policies, %zu rules)\n", path.c_str(),
               config.value()->sandboxes.size(), config.value()->policies.size(), rules);
  for (const std::string& line : advisories.value()->summary()) {
    std::fprintf(streams.out, "%s\n", line.c_str());
  }
  return kExitOk;
}

}  // namespace sluice::cli
