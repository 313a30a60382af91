// A rule's `registry` and a policy's `packages` (docs/packages.md#settings). Part of
// loadConfig(); see config_loader_parts.h.

#include <algorithm>

#include "policy/config_loader_parts.h"
#include "policy/config_scalars.h"
#include "policy/request_path.h"

namespace sluice::policy::loader {
namespace {

std::optional<Ecosystem> readEcosystem(YamlWalker& walker, const YamlValue& value) {
  auto word = readWord(walker, value, "a registry", {"npm", "pypi"});
  if (!word) {
    return std::nullopt;
  }
  return ecosystemFromWord(*word);
}

// The registry's metadata path: a path prefix (request_path.h) ending in '/', with no encoded
// '/': the package's own path is read below it.
std::optional<std::string> readRegistryPath(YamlWalker& walker, const YamlValue& value) {
  auto path = readString(walker, value);
  if (!path) {
    return std::nullopt;
  }
  if (!isValidPathPrefix(*path) || path->back() != '/' || path->find('%') != std::string::npos) {
    walker.error(value.mark, quoteForMessage(*path) +
                                 ": a registry path starts and ends with '/' and holds no "
                                 "'?', '%', dot segments or empty segments");
    return std::nullopt;
  }
  return path;
}

std::optional<PackagePattern> readPattern(YamlWalker& walker, const YamlValue& value,
                                          std::vector<std::string>& seen) {
  auto text = readString(walker, value);
  if (!text) {
    return std::nullopt;
  }
  auto pattern = PackagePattern::parse(*text);
  if (!pattern) {
    walker.error(value.mark, pattern.error());
    return std::nullopt;
  }
  if (std::find(seen.begin(), seen.end(), *text) != seen.end()) {
    walker.error(value.mark, "duplicate package pattern " + quoteForMessage(*text));
    return std::nullopt;
  }
  seen.push_back(*text);
  return std::move(pattern.value());
}

void readPatterns(YamlWalker& walker, const MapReader& map, std::string_view key,
                  std::vector<PackagePattern>& out) {
  map.read(key, [&](const YamlValue& v) {
    std::vector<std::string> seen;
    // `allow: []` would read as "no name is allowed" to one reader and "no list" to another.
    auto list = readList<PackagePattern>(
        walker, v, "an empty list is no list; remove the key",
        [&](const YamlValue& item) { return readPattern(walker, item, seen); });
    if (list) {
      out = std::move(*list);
    }
  });
}

}  // namespace

std::optional<RegistrySettings> readRegistry(YamlWalker& walker, const YamlValue& value) {
  RegistrySettings registry;
  if (value.node.IsScalar()) {
    auto ecosystem = readEcosystem(walker, value);
    if (!ecosystem) {
      return std::nullopt;
    }
    registry.ecosystem = *ecosystem;
    return registry;
  }
  MapReader map(walker, value, {"ecosystem", "path"});
  if (!map.isMap()) {
    return std::nullopt;
  }
  const std::size_t errors = walker.errorCount();
  map.readRequired("ecosystem", [&](const YamlValue& v) {
    if (auto ecosystem = readEcosystem(walker, v)) {
      registry.ecosystem = *ecosystem;
    }
  });
  map.read("path", [&](const YamlValue& v) {
    if (auto path = readRegistryPath(walker, v)) {
      registry.path = std::move(*path);
    }
  });
  if (walker.errorCount() != errors) {
    return std::nullopt;
  }
  return registry;
}

std::optional<PackageSettings> readPackageSettings(YamlWalker& walker, const YamlValue& value) {
  MapReader map(walker, value,
                {"min_age", "exempt", "deny", "allow", "advisories", "block", "max_metadata"});
  if (!map.isMap()) {
    return std::nullopt;
  }
  const std::size_t errors = walker.errorCount();
  PackageSettings settings;
  map.read("min_age", [&](const YamlValue& v) {
    if (!v.node.IsScalar()) {
      walker.error(v.mark, "an age is a scalar, e.g. 7d");
      return;
    }
    auto age = parseAge(v.node.Scalar());
    if (!age) {
      walker.error(v.mark, age.error());
    } else if (age->count() <= 0 || *age > PackageSettings::kMaxMinAge) {
      walker.error(v.mark, "must be greater than 0 and at most 3650d");
    } else {
      settings.min_age = *age;
    }
  });
  readPatterns(walker, map, "exempt", settings.exempt);
  if (!settings.exempt.empty() && settings.min_age.count() == 0 && walker.errorCount() == errors) {
    walker.error(map.find("exempt")->key_mark, "exempt is from min_age; set one");
  }
  readPatterns(walker, map, "deny", settings.deny);
  readPatterns(walker, map, "allow", settings.allow);
  map.read("advisories", [&](const YamlValue& v) {
    std::vector<std::string> seen;
    auto list = readList<std::string>(
        walker, v, "an empty list names no advisories; remove the key",
        [&](const YamlValue& item) -> std::optional<std::string> {
          auto path = readPath(walker, item);
          if (path && std::find(seen.begin(), seen.end(), *path) != seen.end()) {
            walker.error(item.mark, "advisories " + quoteForMessage(*path) + " are listed twice");
            return std::nullopt;
          }
          if (path) {
            seen.push_back(*path);
          }
          return path;
        });
    if (list) {
      settings.advisories = std::move(*list);
    }
  });
  const bool has_block = map.read("block", [&](const YamlValue& v) {
    if (auto word = readWord(walker, v, "an advisory choice", {"malicious", "all"})) {
      settings.block = *word == "all" ? AdvisoryBlock::All : AdvisoryBlock::Malicious;
    }
  });
  map.read("max_metadata", [&](const YamlValue& v) {
    auto n = readSize(walker, v);
    if (n && (*n < PackageSettings::kMinMaxMetadata || *n > PackageSettings::kMaxMaxMetadata)) {
      walker.error(v.mark, "must be between 1MiB and 1GiB");
    } else if (n) {
      settings.max_metadata = *n;
    }
  });
  if (has_block && settings.advisories.empty() && walker.errorCount() == errors) {
    walker.error(map.find("block")->key_mark, "block chooses among advisories; list some");
  }
  if (walker.errorCount() != errors) {
    return std::nullopt;
  }
  return settings;
}

}  // namespace sluice::policy::loader
