#pragma once
// The typed, validated, immutable configuration (docs/configuration.md). Built only by
// loadConfig(); shared as std::shared_ptr<const Config>; a reload builds a new one and swaps the
// pointer, so a request keeps the snapshot it started with. Nothing here changes after loading.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/host_pattern.h"
#include "policy/ip_address.h"
#include "policy/package_settings.h"
#include "policy/rule_index.h"

namespace sluice::policy {

using Duration = std::chrono::milliseconds;

enum class Scheme : std::uint8_t { Https = 1, Http = 2 };
std::string_view toString(Scheme s);
// The port a scheme's URL means when it names none (RFC 9110 §4.2).
constexpr std::uint16_t defaultPort(Scheme s) { return s == Scheme::Https ? 443 : 80; }

struct SecretInjection {
  std::string header;  // lower case
  std::string secret;  // name of an entry of Config::secrets
};

struct Rule {
  std::string name;  // as written, or "rule-N" (1-based) when the rule has none
  std::vector<HostPattern> hosts;
  std::uint8_t schemes = static_cast<std::uint8_t>(Scheme::Https);  // bit set of Scheme
  std::vector<std::uint16_t> ports;     // empty: 443 for https, 80 for http
  std::vector<std::string> methods;     // empty: any; compared exactly (case-sensitive)
  std::vector<std::string> paths;       // empty: any; segment-wise prefixes (request_path.h)
  std::vector<Cidr> ips;                // empty: only globally reachable addresses
  std::vector<SecretInjection> inject;
  // WebSocket upgrades may go to these hosts (docs/wire.md#websocket); without it a request that
  // asks for one is denied upgrade_not_allowed, whatever else the rule allows.
  bool websocket = false;
  // The package registry this rule allows (docs/packages.md): its requests are read as package
  // requests and judged by the policy's `packages`, and each record names the package.
  std::optional<RegistrySettings> registry;

  bool allowsScheme(Scheme s) const { return (schemes & static_cast<std::uint8_t>(s)) != 0; }
  bool allowsPort(Scheme s, std::uint16_t port) const;
  bool allowsMethod(std::string_view method) const;
  // `target` must be valid, with no ambiguity but an encoded '/' (examineRequestTarget).
  bool allowsPath(std::string_view target) const;
};

struct Policy {
  std::string name;
  std::vector<Rule> rules;
  RuleIndex index;  // built from `rules` by the loader
  // What the registries of its rules may serve; nullopt: any package (still on record).
  std::optional<PackageSettings> packages;
};

enum class SandboxMode : std::uint8_t { Enforce, Report };
enum class OriginalDst : std::uint8_t { Ignore, RequireMatch };
std::string_view toString(SandboxMode m);
std::string_view toString(OriginalDst o);
// Where a sandbox's tunnel to a target its policy refuses is refused
// (docs/wire.md#refusals-in-band): inside the tunnel, each request answered with the refusal (a client shows that answer), or at
// the CONNECT (a redirected connection: at its ClientHello, with an alert).
enum class Refusal : std::uint8_t { InBand, AtConnect };
std::string_view toString(Refusal r);

// What one sandbox may use of the gateway, so that one busy or flooding sandbox cannot starve
// the others (limits.per_sandbox, overridden key by key by a sandbox's own `limits`). nullopt
// is unlimited. On a Sandbox these are the effective values, resolved by the loader: when
// requests_per_second is set, request_burst is too (default max(1, requests_per_second)); when
// it is not, request_burst is not either.
struct SandboxLimits {
  std::optional<std::uint64_t> max_connections;      // open client connections at once
  std::optional<std::uint64_t> requests_per_second;  // 1..10^9; refill rate of the bucket
  std::optional<std::uint64_t> request_burst;        // bucket size: requests at once after idle
  // Queries to the sandbox's resolver (dns_listen), a second's worth at once; beyond: REFUSED
  // (a resolver that answers without limit is a channel, even one that never
  // forwards, and a flood of it would keep worker 0 from its connections).
  std::optional<std::uint64_t> dns_queries_per_second;
  // HTTP/2 streams in flight on one of its connections (1..100; its SETTINGS_MAX_CONCURRENT_
  // STREAMS). Unset: sluice's own bound, Http2ServerCodec::kMaxConcurrentStreams (100).
  std::optional<std::uint64_t> max_streams;

  bool operator==(const SandboxLimits&) const = default;
};

struct Sandbox {
  std::string name;                   // [a-z0-9._-]+
  std::optional<Endpoint> listen;     // explicit proxy
  std::optional<Endpoint> transparent;
  std::optional<Endpoint> dns_listen;
  std::string ca_dir;                 // absolute, or relative to the working directory
  std::shared_ptr<const Policy> policy;
  SandboxMode mode = SandboxMode::Enforce;
  OriginalDst original_dst = OriginalDst::Ignore;
  Refusal refusal = Refusal::InBand;
  std::optional<std::string> audit_path;
  SandboxLimits limits;               // effective: the sandbox's own, else limits.per_sandbox
  std::string source_file;            // the file the entry came from
  // Every endpoint of this configuration that sluice listens on (all sandboxes and admin).
  // sluice never dials these, whatever a rule's `ips` says: no loops through itself.
  std::shared_ptr<const std::vector<Endpoint>> own_endpoints;
};

struct Secret {
  enum class Source : std::uint8_t { Env, File };
  std::string name;
  Source source = Source::Env;
  std::string source_value;  // the variable name or the file path; never the secret itself
  std::string placeholder;
};

struct DnsSettings {
  std::vector<Endpoint> servers;  // empty: the nameservers of the host's /etc/resolv.conf
  Duration timeout{2000};
  Duration max_ttl{300000};
};

struct UpstreamSettings {
  std::optional<std::string> ca_file;  // empty: OpenSSL's default verify paths
  // Trusted as well as ca_file's (or the default's) certificates: a private origin's CA beside
  // the public ones, without a hand-made bundle (docs/configuration.md#upstream).
  std::vector<std::string> extra_ca_files;
  Duration connect_timeout{5000};
  // Idle upstream connections kept for reuse: in all (shared out between the workers' pools),
  // and of one sandbox (over every pool). Beyond either the oldest idle one goes. 0 keeps none.
  // A connection parked by a keep-alive client between its requests is not idle here: its
  // client holds it, and the client is counted by limits.max_connections.
  std::uint64_t max_idle = 4096;
  std::uint64_t max_idle_per_sandbox = 128;
};

struct AuditSettings {
  std::string path = "-";  // "-" is stdout
  bool hash_bodies = false;
};

struct AdminSettings {
  std::optional<Endpoint> listen;
};

struct Limits {
  std::uint64_t max_connections = 10000;
  std::uint64_t max_header_bytes = 64 * 1024;
  Duration handshake_timeout{10000};
  Duration idle_timeout{60000};
  Duration shutdown_grace{10000};
  SandboxLimits per_sandbox;  // as written: the defaults every Sandbox::limits starts from
};

struct Config {
  std::string source_file;
  DnsSettings dns;
  UpstreamSettings upstream;
  AuditSettings audit;
  AdminSettings admin;
  Limits limits;
  std::optional<std::string> sandboxes_dir;
  std::vector<Sandbox> sandboxes;
  std::vector<std::shared_ptr<const Policy>> policies;
  std::vector<Secret> secrets;

  const Sandbox* findSandbox(std::string_view name) const;
  const Policy* findPolicy(std::string_view name) const;
  const Secret* findSecret(std::string_view name) const;
};

}  // namespace sluice::policy
