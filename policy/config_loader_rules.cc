// Policies, their rules, and secrets (docs/configuration.md). Part of loadConfig(); see
// config_loader_parts.h.
//
// A rule allows; nothing denies. So every key a rule can carry only ever narrows it, and the
// one way to widen a rule by mistake is a value that means less than it says: an empty list
// (which would read as "no restriction"), a scalar taken as a list, a number in another base.
// All of these are errors rather than guesses.

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "base/ascii.h"
#include "policy/config_loader_parts.h"
#include "policy/config_scalars.h"
#include "policy/request_header.h"
#include "policy/request_path.h"

namespace sluice::policy::loader {
namespace {

constexpr std::string_view kEmptyList =
    "an empty list allows nothing; remove the key for the default";

bool isRuleName(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return false;
  }
  for (char c : name) {
    if (c < 0x20 || c > 0x7e) {
      return false;
    }
  }
  return true;
}

bool isEnvName(std::string_view name) {
  if (name.empty() || ascii::isDigit(name.front())) {
    return false;
  }
  for (char c : name) {
    if (!(ascii::isAlnum(c) || c == '_')) {
      return false;
    }
  }
  return true;
}

// Headers sluice writes or removes itself when it forwards a request: injecting one would be
// dropped, or would change where or how the request goes (a secret has no business in
// X-Forwarded-Host). One table decides both (policy/request_header.h).
bool isReservedHeader(std::string_view lower) { return !isEndToEndRequestHeader(lower); }

std::optional<HostPattern> readHost(YamlWalker& walker, const YamlValue& value) {
  auto text = readString(walker, value);
  if (!text) {
    return std::nullopt;
  }
  auto pattern = HostPattern::parse(*text);
  if (!pattern) {
    walker.error(value.mark, pattern.error());
    return std::nullopt;
  }
  return std::move(pattern.value());
}

// "10.0.0.1/8" -> "10.0.0.0/8": the block the operator most likely meant. "" if `text` does
// not split into an address and a prefix length.
std::string networkOf(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    return "";
  }
  const std::optional<IpAddress> address = IpAddress::parse(text.substr(0, slash));
  auto prefix = parseDecimal(text.substr(slash + 1));
  if (!address || !prefix || prefix.value() > (address->isV4() ? 32U : 128U)) {
    return "";
  }
  const int bits = static_cast<int>(prefix.value());
  IpAddress network;
  if (address->isV4()) {
    const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
    network = IpAddress::fromV4(address->v4() & mask);
  } else {
    std::array<std::uint8_t, 16> bytes = address->bytes();
    for (int i = 0; i < 16; ++i) {
      const int keep = std::min(8, std::max(0, bits - 8 * i));
      bytes[static_cast<std::size_t>(i)] &= static_cast<std::uint8_t>(0xff00 >> keep);
    }
    network = IpAddress::fromV6(bytes);
  }
  return network.toString() + "/" + std::to_string(bits);
}

std::optional<Cidr> readCidr(YamlWalker& walker, const YamlValue& value) {
  auto text = readString(walker, value);
  if (!text) {
    return std::nullopt;
  }
  Cidr::ParseError why = Cidr::ParseError::BadAddress;
  std::optional<Cidr> cidr = Cidr::parse(*text, &why);
  if (cidr) {
    return cidr;
  }
  std::string message;
  switch (why) {
    case Cidr::ParseError::BadPrefix:
      message = quoteForMessage(*text) +
                " has a bad prefix length: 0-32 for IPv4 and 0-128 for IPv6, in plain decimal";
      break;
    case Cidr::ParseError::HostBitsSet: {
      // The text parsed apart from its host bits, so it is printable as it is.
      message = *text + " has host bits set";
      const std::string network = networkOf(*text);
      if (!network.empty()) {
        message += ": did you mean " + network + "?";
      }
      break;
    }
    case Cidr::ParseError::BadAddress:
      message = quoteForMessage(*text) +
                " is not an IP address or CIDR block, e.g. 151.101.0.0/16 or 2a04:4e42::/32";
      break;
  }
  walker.error(value.mark, message);
  return std::nullopt;
}

std::vector<std::string> secretNames(const LoadState& state) {
  std::vector<std::string> names;
  for (const Secret& secret : state.config.secrets) {
    names.push_back(secret.name);
  }
  return names;
}

std::optional<SecretInjection> readInjection(YamlWalker& walker, const YamlValue& value,
                                             const LoadState& state,
                                             std::vector<std::string>& headers) {
  MapReader map(walker, value, {"header", "secret"});
  if (!map.isMap()) {
    return std::nullopt;
  }
  const std::size_t errors = walker.errorCount();
  SecretInjection injection;
  map.readRequired("header", [&](const YamlValue& v) {
    auto text = readString(walker, v);
    if (!text) {
      return;
    }
    auto header = parseHeaderName(*text);
    if (!header) {
      walker.error(v.mark, header.error());
    } else if (isReservedHeader(header.value())) {
      walker.error(v.mark, quoteForMessage(header.value()) +
                               " cannot be injected: sluice writes or removes it itself");
    } else if (std::find(headers.begin(), headers.end(), header.value()) != headers.end()) {
      walker.error(v.mark, quoteForMessage(header.value()) + " is injected twice by this rule");
    } else {
      headers.push_back(header.value());
      injection.header = std::move(header.value());
    }
  });
  map.readRequired("secret", [&](const YamlValue& v) {
    auto name = readString(walker, v);
    if (!name) {
      return;
    }
    const std::vector<std::string> defined = secretNames(state);
    if (std::find(defined.begin(), defined.end(), *name) != defined.end()) {
      injection.secret = *name;
    } else if (state.secrets_readable) {
      walker.error(v.mark, unknownName("secret", *name, defined));
    }
  });
  if (walker.errorCount() != errors || injection.secret.empty()) {
    return std::nullopt;
  }
  return injection;
}

// Reads the list under `key` into `out` when it is present and every item is good.
template <class T, class F>
void readRuleList(YamlWalker& walker, const MapReader& map, std::string_view key,
                  std::vector<T>& out, F read_item) {
  map.read(key, [&](const YamlValue& v) {
    auto list = readList<T>(walker, v, kEmptyList, read_item);
    if (list) {
      out = std::move(*list);
    }
  });
}

// The rule's list keys other than hosts and inject.
void readRuleLimits(YamlWalker& walker, const MapReader& map, Rule& rule) {
  std::vector<std::string> seen_schemes;
  std::vector<std::string> schemes;
  readRuleList(walker, map, "schemes", schemes, [&](const YamlValue& v) {
    auto scheme = readWord(walker, v, "a scheme", {"https", "http"});
    if (!scheme) {
      return scheme;
    }
    if (std::find(seen_schemes.begin(), seen_schemes.end(), *scheme) != seen_schemes.end()) {
      walker.error(v.mark, "duplicate scheme " + quoteForMessage(*scheme));
      return std::optional<std::string>();
    }
    seen_schemes.push_back(*scheme);
    return scheme;
  });
  if (!schemes.empty()) {
    rule.schemes = 0;
    for (const std::string& scheme : schemes) {
      rule.schemes |= static_cast<std::uint8_t>(scheme == "http" ? Scheme::Http : Scheme::Https);
    }
  }
  std::vector<std::uint64_t> seen_ports;
  readRuleList(walker, map, "ports", rule.ports, [&](const YamlValue& v) {
    std::optional<std::uint16_t> port;
    auto n = readInteger(walker, v);
    if (n && (*n == 0 || *n > 65535)) {
      walker.error(v.mark, "port " + std::to_string(*n) + " is out of range 1-65535");
    } else if (n && std::find(seen_ports.begin(), seen_ports.end(), *n) != seen_ports.end()) {
      walker.error(v.mark, "duplicate port " + std::to_string(*n));
    } else if (n) {
      seen_ports.push_back(*n);
      port = static_cast<std::uint16_t>(*n);
    }
    return port;
  });
  readRuleList(walker, map, "methods", rule.methods, [&](const YamlValue& v) {
    auto method = readString(walker, v);
    if (method) {
      if (auto ok = checkMethod(*method); !ok) {
        walker.error(v.mark, ok.error());
        method.reset();
      }
    }
    return method;
  });
  readRuleList(walker, map, "paths", rule.paths, [&](const YamlValue& v) {
    auto path = readString(walker, v);
    if (path && !isValidPathPrefix(*path)) {
      walker.error(v.mark, quoteForMessage(*path) +
                               ": path prefixes start with '/' and contain no '?', '#', "
                               "escape but %2f, dot segments or empty segments");
      path.reset();
    }
    return path;
  });
  readRuleList(walker, map, "ips", rule.ips,
               [&](const YamlValue& v) { return readCidr(walker, v); });
}

// Rule names of one policy so far -> the line of the rule that has it.
using RuleNames = std::unordered_map<std::string, int>;

std::optional<Rule> readRule(YamlWalker& walker, const YamlValue& value, std::size_t index,
                             const LoadState& state, RuleNames& names) {
  MapReader map(
      walker, value,
      {"name", "hosts", "schemes", "ports", "methods", "paths", "ips", "inject", "websocket",
       "registry"});
  if (!map.isMap()) {
    return std::nullopt;
  }
  const std::size_t errors = walker.errorCount();
  Rule rule;
  rule.name = "rule-" + std::to_string(index + 1);
  const int line = value.mark.line + 1;
  const bool named = map.read("name", [&](const YamlValue& v) {
    auto name = readString(walker, v);
    if (!name) {
      return;
    }
    if (!isRuleName(*name)) {
      walker.error(v.mark, quoteForMessage(*name) +
                               " is not a valid rule name: use 1 to 64 printable characters");
      return;
    }
    if (const auto seen = names.find(*name); seen != names.end()) {
      walker.error(v.mark, "duplicate rule name " + quoteForMessage(*name) + " (first at line " +
                               std::to_string(seen->second) + ")");
      return;
    }
    rule.name = *name;
    names.emplace(*name, line);
  });
  if (!named) {
    // "rule-N" can collide with a name written earlier; a rule name must say which rule.
    if (const auto seen = names.find(rule.name); seen != names.end()) {
      walker.error(value.mark, "the default name " + quoteForMessage(rule.name) +
                                   " is taken by the rule at line " + std::to_string(seen->second) +
                                   "; give this rule a name");
    } else {
      names.emplace(rule.name, line);
    }
  }
  map.readRequired("hosts", [&](const YamlValue& v) {
    auto hosts =
        readList<HostPattern>(walker, v, "an empty list allows nothing; list at least one host",
                              [&](const YamlValue& item) { return readHost(walker, item); });
    if (hosts) {
      rule.hosts = std::move(*hosts);
    }
  });
  readRuleLimits(walker, map, rule);
  map.read("websocket",
           [&](const YamlValue& v) { rule.websocket = readBool(walker, v).value_or(false); });
  map.read("registry", [&](const YamlValue& v) { rule.registry = readRegistry(walker, v); });
  std::vector<std::string> headers;
  readRuleList(walker, map, "inject", rule.inject,
               [&](const YamlValue& v) { return readInjection(walker, v, state, headers); });
  const MapEntry* inject = map.find("inject");
  if (inject != nullptr && rule.allowsScheme(Scheme::Http)) {
    walker.error(inject->key_mark,
                 "inject would send the secret over plain http; remove http from schemes");
  }
  if (walker.errorCount() != errors) {
    return std::nullopt;
  }
  return rule;
}

void readPolicy(YamlWalker& walker, const YamlValue& value, const LoadState& state,
                Policy& policy) {
  MapReader map(walker, value, {"rules", "packages"});
  map.read("packages",
           [&](const YamlValue& v) { policy.packages = readPackageSettings(walker, v); });
  const std::size_t errors = walker.errorCount();
  map.readRequired("rules", [&](const YamlValue& v) {
    if (!checkSequence(walker, v)) {
      return;
    }
    // An empty list is a policy that denies everything: allowed, and what it says.
    RuleNames names;
    std::size_t index = 0;
    for (auto it = v.node.begin(); it != v.node.end(); ++it, ++index) {
      const YAML::Node item = *it;
      YamlWalker::Scope scope(walker, index);
      if (auto rule = readRule(walker, YamlValue{item, item.Mark()}, index, state, names)) {
        policy.rules.push_back(std::move(*rule));
      }
    }
  });
  // Package settings judge the requests of registry rules; without one they would judge
  // nothing, and the operator would believe they did.
  const MapEntry* packages = map.find("packages");
  const bool has_registry = std::any_of(policy.rules.begin(), policy.rules.end(),
                                        [](const Rule& rule) { return rule.registry.has_value(); });
  if (packages != nullptr && !has_registry && walker.errorCount() == errors &&
      map.find("rules") != nullptr) {
    YamlWalker::Scope scope(walker, "packages");
    walker.error(packages->key_mark,
                 "packages apply to the requests of rules with a registry, and no rule here has "
                 "one: add `registry: npm` or `registry: pypi` to the rule of each registry");
  }
}

}  // namespace

void readPolicies(YamlWalker& walker, const YamlValue& value, LoadState& state) {
  MapReader map(walker, value, {});
  if (!map.isMap()) {
    state.policies_readable = false;
    return;
  }
  for (const MapEntry& entry : map.entries()) {
    if (auto ok = checkName(entry.key); !ok) {
      walker.error(entry.key_mark, ok.error());
    }
    // Registered even when its body has errors: sandboxes that name it are not at fault.
    auto policy = std::make_shared<Policy>();
    policy->name = entry.key;
    YamlWalker::Scope scope(walker, entry.key);
    readPolicy(walker, entry.value, state, *policy);
    state.policies.push_back(std::move(policy));
  }
}

void readSecrets(YamlWalker& walker, const YamlValue& value, LoadState& state) {
  MapReader map(walker, value, {});
  if (!map.isMap()) {
    state.secrets_readable = false;
    return;
  }
  for (const MapEntry& entry : map.entries()) {
    if (auto ok = checkName(entry.key); !ok) {
      walker.error(entry.key_mark, ok.error());
    }
    YamlWalker::Scope scope(walker, entry.key);
    Secret secret;
    secret.name = entry.key;
    MapReader fields(walker, entry.value, {"env", "file", "placeholder"});
    const bool env = fields.read("env", [&](const YamlValue& v) {
      auto name = readString(walker, v);
      if (name && !isEnvName(*name)) {
        walker.error(v.mark, quoteForMessage(*name) + " is not an environment variable name");
      } else if (name) {
        secret.source = Secret::Source::Env;
        secret.source_value = *name;
      }
    });
    const bool file = fields.read("file", [&](const YamlValue& v) {
      if (auto path = readPath(walker, v)) {
        secret.source = Secret::Source::File;
        secret.source_value = *path;
      }
    });
    if (fields.isMap() && env == file) {
      walker.error(entry.value.mark, "a secret needs exactly one of 'env' or 'file'");
    }
    fields.readRequired("placeholder", [&](const YamlValue& v) {
      auto text = readString(walker, v);
      if (!text) {
        return;
      }
      bool usable = text->size() >= 8;
      for (char c : *text) {
        usable = usable && c > 0x20 && c < 0x7f;
      }
      if (!usable) {
        walker.error(v.mark, quoteForMessage(*text) +
                                 " is not a usable placeholder: use at least 8 printable "
                                 "ASCII characters and no spaces");
        return;
      }
      for (const Secret& other : state.config.secrets) {
        if (other.placeholder == *text) {
          walker.error(v.mark, "placeholder " + quoteForMessage(*text) +
                                   " is already used by secret " + quoteForMessage(other.name));
          return;
        }
      }
      secret.placeholder = *text;
    });
    // Registered even when it has errors: rules that name it are not at fault.
    state.config.secrets.push_back(std::move(secret));
  }
}

}  // namespace sluice::policy::loader
