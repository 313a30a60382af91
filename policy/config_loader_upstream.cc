// The `upstream` map (docs/configuration.md#upstream): how sluice verifies and keeps its
// connections to origins. Part of loadConfig(); see config_loader_parts.h.

#include <algorithm>
#include <string>
#include <vector>

#include "policy/config_loader_parts.h"
#include "policy/config_scalars.h"

namespace sluice::policy::loader {

void readUpstream(YamlWalker& walker, const YamlValue& value, UpstreamSettings& upstream) {
  MapReader map(walker, value, {"ca_file", "extra_ca_files", "connect_timeout", "max_idle",
                                "max_idle_per_sandbox"});
  map.read("ca_file", [&](const YamlValue& v) { upstream.ca_file = readPath(walker, v); });
  map.read("extra_ca_files", [&](const YamlValue& v) {
    std::vector<std::string> seen;
    auto read_file = [&](const YamlValue& item) -> std::optional<std::string> {
      std::optional<std::string> path = readPath(walker, item);
      if (path && std::find(seen.begin(), seen.end(), *path) != seen.end()) {
        walker.error(item.mark, "'" + *path + "' is listed twice");
        return std::nullopt;
      }
      if (path) {
        seen.push_back(*path);
      }
      return path;
    };
    upstream.extra_ca_files =
        readList<std::string>(walker, v, "an empty list: leave the key out", read_file)
            .value_or(std::vector<std::string>{});
  });
  map.read("connect_timeout", [&](const YamlValue& v) {
    upstream.connect_timeout = readPositiveDuration(walker, v).value_or(upstream.connect_timeout);
  });
  // Counts of connections, 0 (keep none idle) included; more than a process could ever open
  // is a typo, not a wish.
  constexpr std::uint64_t kMaxIdle = 1u << 24;
  auto readIdle = [&](std::string_view key, std::uint64_t& field) {
    map.read(key, [&](const YamlValue& v) {
      auto n = readInteger(walker, v);
      if (n && *n > kMaxIdle) {
        walker.error(v.mark, "must be at most " + std::to_string(kMaxIdle));
      } else if (n) {
        field = *n;
      }
    });
  };
  readIdle("max_idle", upstream.max_idle);
  readIdle("max_idle_per_sandbox", upstream.max_idle_per_sandbox);
}

}  // namespace sluice::policy::loader
