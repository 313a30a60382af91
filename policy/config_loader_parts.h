#pragma once
// Internal to loadConfig(): the state one load builds up, shared by the files the loader is
// split into (config_loader.cc: documents, the root and the settings; config_loader_rules.cc:
// policies and secrets; config_loader_sandboxes.cc: sandboxes and their endpoints). Not for
// use outside the loader.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "policy/config_loader.h"
#include "policy/yaml_walker.h"

namespace sluice::policy::loader {

// An address sluice will listen on, and who asked for it, for the overlap check.
struct EndpointUse {
  Endpoint endpoint;
  std::string owner;  // "sandbox 'a' (listen)", "admin.listen"
  std::string file;
  YAML::Mark mark;
  std::string path;  // the key path of the value, for the error
};

// Where a sandbox name was first defined, for the duplicate check.
struct SandboxName {
  std::string name;
  std::string file;
  int line = 0;
};

// Where a value was written, for an error found only after the whole load was read.
struct ValuePosition {
  std::string file;
  YAML::Mark mark;
  std::string path;  // the key path of the value
};

// Per-sandbox limits as written (limits.per_sandbox, or a sandbox's `limits`) and where
// request_burst was: whether a burst has a rate is known only once the defaults and the
// sandbox are both read, and the top-level `limits` may come after `sandboxes`.
struct WrittenLimits {
  SandboxLimits values;
  std::optional<ValuePosition> burst;
};

struct LoadState {
  explicit LoadState(const LoadOptions& load_options) : options(load_options) {}

  const LoadOptions& options;
  std::vector<ConfigError> errors;
  Config config;
  // Mutable until the load succeeds: the rule indexes are built last.
  std::vector<std::shared_ptr<Policy>> policies;
  // false when `policies` / `secrets` is there but unreadable: a name that refers to one is
  // then not reported as unknown (one error, not one per reference).
  bool policies_readable = true;
  bool secrets_readable = true;
  std::vector<EndpointUse> endpoints;
  std::vector<SandboxName> sandbox_names;
  // limits.per_sandbox, and each sandbox's own `limits` (one per entry of config.sandboxes, in
  // the same order), merged into Sandbox::limits by resolveSandboxLimits() at the end.
  WrittenLimits per_sandbox_limits;
  std::vector<WrittenLimits> sandbox_limits;
  // Files in the order they were read: the main file, then those of sandboxes_dir. Errors are
  // sorted by file in this order, then by position.
  std::vector<std::string> files;
};

// config_loader_rules.cc. Secrets are read before policies, policies before sandboxes: each
// checks its references against what was read before it.
void readSecrets(YamlWalker& walker, const YamlValue& value, LoadState& state);
void readPolicies(YamlWalker& walker, const YamlValue& value, LoadState& state);

// config_loader_sandboxes.cc. One entry of `sandboxes`, or the root of a sandboxes_dir file.
void readSandbox(YamlWalker& walker, const YamlValue& value, LoadState& state);
// Sorts state.endpoints into document order and reports each one that overlaps an earlier one.
void checkEndpointOverlaps(LoadState& state);
// The map of limits.per_sandbox or of a sandbox's `limits`: max_connections,
// requests_per_second, request_burst.
void readSandboxLimits(YamlWalker& walker, const YamlValue& value, WrittenLimits& out);
// Sets each Sandbox::limits to its effective values (its own, else the defaults; a burst
// resolved from the rate), and reports a request_burst left without requests_per_second. Runs
// once everything is read.
void resolveSandboxLimits(LoadState& state);

// config_loader_packages.cc. A rule's `registry` (a word, or a map with its path) and a
// policy's `packages`.
std::optional<RegistrySettings> readRegistry(YamlWalker& walker, const YamlValue& value);
std::optional<PackageSettings> readPackageSettings(YamlWalker& walker, const YamlValue& value);

// config_loader_upstream.cc. The `upstream` map.
void readUpstream(YamlWalker& walker, const YamlValue& value, UpstreamSettings& upstream);

// config_loader.cc, shared helpers.
// A duration greater than 0.
std::optional<Duration> readPositiveDuration(YamlWalker& walker, const YamlValue& value);
// The position of `file` in state.files (files.size() if absent).
std::size_t fileRank(const LoadState& state, const std::string& file);

// `path` as written in `file`, joined to the file's directory when relative; pure string work.
std::string resolvePath(std::string_view file, std::string_view path);
// A non-empty path string, resolved against the walker's file. "-" (stdout) is kept as it is
// when allow_stdout.
std::optional<std::string> readPath(YamlWalker& walker, const YamlValue& value,
                                    bool allow_stdout = false);
// An IP literal endpoint. With port_required false a bare address gets default_port.
std::optional<Endpoint> readEndpoint(YamlWalker& walker, const YamlValue& value, bool port_required,
                                     std::uint16_t default_port = 0);
// One of `words`, else "'x' is not <what>: write a, b or c".
std::optional<std::string> readWord(YamlWalker& walker, const YamlValue& value,
                                    std::string_view what,
                                    std::initializer_list<std::string_view> words);
// "unknown policy 'x' (defined: a, b)", "(none are defined)" when `defined` is empty.
std::string unknownName(std::string_view kind, std::string_view name,
                        const std::vector<std::string>& defined);

}  // namespace sluice::policy::loader
