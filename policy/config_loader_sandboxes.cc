// Sandboxes and the endpoints sluice listens on (docs/configuration.md#sandboxes). Part of
// loadConfig(); see config_loader_parts.h. An entry of `sandboxes` and the root of a sandboxes_dir
// file are read by the same function, so the two can never accept different keys.

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "policy/config_loader_parts.h"
#include "policy/config_scalars.h"

namespace sluice::policy::loader {
namespace {

std::string joinDir(std::string_view base, std::string_view name) {
  if (base.empty()) {
    return std::string(name);
  }
  std::string out(base);
  if (out.back() != '/') {
    out += '/';
  }
  return out + std::string(name);
}

void readName(YamlWalker& walker, const YamlValue& value, LoadState& state, Sandbox& sandbox) {
  auto name = readString(walker, value);
  if (!name) {
    return;
  }
  if (auto ok = checkName(*name); !ok) {
    walker.error(value.mark, ok.error());
    return;
  }
  sandbox.name = *name;
  for (const SandboxName& seen : state.sandbox_names) {
    if (seen.name == *name) {
      walker.error(value.mark, "duplicate sandbox name " + quoteForMessage(*name) + " (first at " +
                                   seen.file + ":" + std::to_string(seen.line) + ")");
      return;
    }
  }
  state.sandbox_names.push_back(SandboxName{*name, walker.file(), value.mark.line + 1});
}

void readPolicyName(YamlWalker& walker, const YamlValue& value, const LoadState& state,
                    Sandbox& sandbox) {
  auto name = readString(walker, value);
  if (!name) {
    return;
  }
  std::vector<std::string> defined;
  for (const std::shared_ptr<Policy>& policy : state.policies) {
    if (policy->name == *name) {
      sandbox.policy = policy;
      return;
    }
    defined.push_back(policy->name);
  }
  if (state.policies_readable) {
    walker.error(value.mark, unknownName("policy", *name, defined));
  }
}

}  // namespace

void readSandbox(YamlWalker& walker, const YamlValue& value, LoadState& state) {
  MapReader map(walker, value,
                {"name", "listen", "transparent", "dns_listen", "ca", "policy", "mode",
                 "original_dst", "refusal", "audit", "limits"});
  if (!map.isMap()) {
    return;
  }
  Sandbox sandbox;
  sandbox.source_file = walker.file();
  map.readRequired("name", [&](const YamlValue& v) { readName(walker, v, state, sandbox); });

  // Who owns an endpoint, for the overlap message; the path when the name is unusable.
  const std::string owner = !sandbox.name.empty()    ? "sandbox " + quoteForMessage(sandbox.name)
                            : !walker.path().empty() ? "the sandbox at " + walker.path()
                                                     : "the sandbox in " + walker.file();
  auto readListener = [&](std::string_view key, std::optional<Endpoint>& out) {
    return map.read(key, [&](const YamlValue& v) {
      out = readEndpoint(walker, v, true);
      if (out) {
        state.endpoints.push_back(EndpointUse{*out, owner + " (" + std::string(key) + ")",
                                              walker.file(), v.mark, walker.path()});
      }
    });
  };
  const bool listen = readListener("listen", sandbox.listen);
  const bool transparent = readListener("transparent", sandbox.transparent);
  readListener("dns_listen", sandbox.dns_listen);
  if (!listen && !transparent) {
    walker.error(value.mark, "a sandbox needs 'listen', 'transparent' or both");
  }

  if (!map.read("ca",
                [&](const YamlValue& v) { sandbox.ca_dir = readPath(walker, v).value_or(""); })) {
    sandbox.ca_dir = joinDir(state.options.default_ca_base, sandbox.name);
  }
  map.readRequired("policy",
                   [&](const YamlValue& v) { readPolicyName(walker, v, state, sandbox); });
  map.read("mode", [&](const YamlValue& v) {
    if (auto mode = readWord(walker, v, "a mode", {"enforce", "report"})) {
      sandbox.mode = *mode == "report" ? SandboxMode::Report : SandboxMode::Enforce;
    }
  });
  map.read("original_dst", [&](const YamlValue& v) {
    if (!transparent) {
      walker.error(map.find("original_dst")->key_mark,
                   "applies only to a sandbox with 'transparent'");
      return;
    }
    if (auto setting =
            readWord(walker, v, "an original_dst setting", {"ignore", "require_match"})) {
      sandbox.original_dst =
          *setting == "require_match" ? OriginalDst::RequireMatch : OriginalDst::Ignore;
    }
  });
  map.read("refusal", [&](const YamlValue& v) {
    if (auto setting = readWord(walker, v, "a refusal setting", {"in_band", "at_connect"})) {
      sandbox.refusal = *setting == "at_connect" ? Refusal::AtConnect : Refusal::InBand;
    }
  });
  map.read("audit", [&](const YamlValue& v) {
    sandbox.audit_path = readPath(walker, v, /*allow_stdout=*/true);
  });
  WrittenLimits limits;
  map.read("limits", [&](const YamlValue& v) { readSandboxLimits(walker, v, limits); });
  state.config.sandboxes.push_back(std::move(sandbox));
  state.sandbox_limits.push_back(std::move(limits));
}

void readSandboxLimits(YamlWalker& walker, const YamlValue& value, WrittenLimits& out) {
  MapReader map(walker, value,
                {"max_connections", "requests_per_second", "request_burst",
                 "dns_queries_per_second", "max_streams"});
  // Each a plain decimal count; 0 would be a sandbox that can do nothing at all, more likely a
  // mistake for "unlimited" (which is leaving the key out).
  auto readCount = [&](std::string_view key, std::optional<std::uint64_t>& field,
                       std::uint64_t max, std::string_view left_out = "no limit") {
    map.read(key, [&](const YamlValue& v) {
      auto n = readInteger(walker, v);
      if (n && *n == 0) {
        walker.error(v.mark,
                     "must be at least 1 (leave the key out for " + std::string(left_out) + ")");
      } else if (n && *n > max) {
        walker.error(v.mark, "must be at most " + std::to_string(max));
      } else if (n) {
        field = *n;
      }
    });
  };
  constexpr std::uint64_t kNoMax = std::numeric_limits<std::uint64_t>::max();
  readCount("max_connections", out.values.max_connections, kNoMax);
  // The rate limiter counts time in nanoseconds: a faster rate than one per nanosecond would
  // not be a limit it can keep.
  readCount("requests_per_second", out.values.requests_per_second, 1000000000);
  readCount("request_burst", out.values.request_burst, kNoMax);
  readCount("dns_queries_per_second", out.values.dns_queries_per_second, 1000000000);
  // The budget of an HTTP/2 connection (windows, upstreams) is made for at most 100 streams:
  // docs/wire.md#http2.
  readCount("max_streams", out.values.max_streams, 100, "100");
  const MapEntry* burst = map.find("request_burst");
  if (burst != nullptr && out.values.request_burst) {
    const std::string path =
        walker.path().empty() ? "request_burst" : walker.path() + ".request_burst";
    out.burst = ValuePosition{walker.file(), burst->value.mark, path};
  }
}

void resolveSandboxLimits(LoadState& state) {
  // A burst in the defaults without a rate is reported once, at the burst, naming the first
  // sandbox it is left without a rate in (others might well set their own rate).
  bool default_burst_reported = false;
  const WrittenLimits& defaults = state.per_sandbox_limits;
  for (std::size_t i = 0; i < state.config.sandboxes.size(); ++i) {
    Sandbox& sandbox = state.config.sandboxes[i];
    const WrittenLimits& own = state.sandbox_limits[i];
    const SandboxLimits& d = defaults.values;
    const SandboxLimits& o = own.values;
    SandboxLimits& effective = sandbox.limits;
    effective.max_connections = o.max_connections ? o.max_connections : d.max_connections;
    effective.requests_per_second =
        o.requests_per_second ? o.requests_per_second : d.requests_per_second;
    effective.request_burst = o.request_burst ? o.request_burst : d.request_burst;
    effective.dns_queries_per_second =
        o.dns_queries_per_second ? o.dns_queries_per_second : d.dns_queries_per_second;
    effective.max_streams = o.max_streams ? o.max_streams : d.max_streams;
    if (effective.requests_per_second) {
      if (!effective.request_burst) {
        // A second's worth at once: a client that sends each second's requests together, not
        // spread over the second, is still within its rate.
        effective.request_burst = std::max<std::uint64_t>(1, *effective.requests_per_second);
      }
      continue;
    }
    if (!effective.request_burst) {
      continue;
    }
    effective.request_burst.reset();
    if (own.burst) {
      state.errors.push_back(makeConfigError(
          own.burst->file, own.burst->mark, own.burst->path,
          "a burst needs a rate: set requests_per_second here or in limits.per_sandbox"));
    } else if (defaults.burst && !default_burst_reported) {
      default_burst_reported = true;
      const std::string who =
          sandbox.name.empty() ? "a sandbox" : "sandbox " + quoteForMessage(sandbox.name);
      state.errors.push_back(makeConfigError(
          defaults.burst->file, defaults.burst->mark, defaults.burst->path,
          "a burst needs a rate: " + who +
              " has none; set limits.per_sandbox.requests_per_second or the sandbox's own"));
    }
  }
}

void checkEndpointOverlaps(LoadState& state) {
  // Document order decides which of two is "already" there.
  std::stable_sort(state.endpoints.begin(), state.endpoints.end(),
                   [&](const EndpointUse& a, const EndpointUse& b) {
                     const std::size_t ra = fileRank(state, a.file);
                     const std::size_t rb = fileRank(state, b.file);
                     if (ra != rb) {
                       return ra < rb;
                     }
                     if (a.mark.line != b.mark.line) {
                       return a.mark.line < b.mark.line;
                     }
                     return a.mark.column < b.mark.column;
                   });
  for (std::size_t i = 0; i < state.endpoints.size(); ++i) {
    const EndpointUse& later = state.endpoints[i];
    for (std::size_t j = 0; j < i; ++j) {
      const EndpointUse& earlier = state.endpoints[j];
      if (!Endpoint::overlaps(earlier.endpoint, later.endpoint)) {
        continue;
      }
      // Different texts overlap when one is a wildcard: name both addresses.
      const std::string message =
          earlier.endpoint == later.endpoint
              ? later.endpoint.toString() + " is already used by " + earlier.owner
              : later.endpoint.toString() + " overlaps " + earlier.endpoint.toString() +
                    ", used by " + earlier.owner;
      state.errors.push_back(makeConfigError(later.file, later.mark, later.path, message));
      break;
    }
  }
}

}  // namespace sluice::policy::loader
