#pragma once
// One generation of the running configuration, and what outlives generations.
//
// A reload (SIGHUP, or the config file or sandboxes_dir changing) builds a whole new Generation
// on the main thread, and only if every step succeeds does it replace the running one: a bad
// file, a CA that cannot be made or an audit file that cannot be opened leaves everything as it
// was. A Generation is immutable once built and shared by shared_ptr: a session takes the
// worker's current one when a request starts and keeps it until the request is over, so a
// request in flight finishes under the configuration it started with, and the next request on
// the same keep-alive connection is judged by the new one.
//
// What must not change under a sandbox's open connections outlives generations, matched by
// sandbox name and CA directory: its CA and leaf cache (the sandbox trusts that CA), its
// counters and its request-rate bucket (a reload must not hand a flooding sandbox a fresh
// burst). Audit sinks are shared by path for the whole process (AuditLog), so one file keeps
// one hash chain across reloads.

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "policy/config.h"
#include "proxy/admin/metrics.h"
#include "proxy/audit/audit_log.h"
#include "proxy/limits/log_budget.h"
#include "proxy/limits/request_rate.h"
#include "proxy/runtime/file_identity.h"
#include "proxy/runtime/origin_protocols.h"
#include "proxy/runtime/package_advisories.h"
#include "proxy/runtime/publish_times.h"
#include "proxy/runtime/secret_values.h"

namespace sluice::proxy {

// Which ca.pem and ca.key a CA was loaded from (nullopt: not there).
struct CaFiles {
  std::optional<FileIdentity> cert;
  std::optional<FileIdentity> key;
  friend bool operator==(const CaFiles&, const CaFiles&) = default;
};

// A sandbox's long-lived part: one per (name, CA directory, CA files) for as long as any
// generation or session refers to it.
struct SandboxRuntime {
  std::uint64_t id = 0;  // unique in the process: keys the upstream pool (never reused)
  std::string name;
  std::string ca_dir;
  // Its ca.pem as the user is shown it (certs/shown_path.h): what a line that says "give the
  // client this file" names.
  std::string ca_pem_shown;
  CaFiles ca_files;
  std::unique_ptr<certs::CertificateAuthority> ca;
  std::unique_ptr<certs::LeafCache> leaves;
  admin::SandboxMetrics metrics;
  // The lines that say a client refused sluice's certificate, per name and alert, across the
  // workers (docs/audit.md#errors).
  limits::LogBudget certificate_refusals;
  // The lines that say a request was refused, per host and reason (docs/cli.md#logs).
  limits::LogBudget denial_lines;
  // Its idle upstream connections in every worker's pool (upstream.max_idle_per_sandbox);
  // shared with each of them, as a pooled connection may outlive the runtime.
  std::shared_ptr<std::atomic<std::size_t>> idle_upstreams =
      std::make_shared<std::atomic<std::size_t>>(0);
  // Bytes of registry metadata its requests hold for filtering, across the workers
  // (docs/packages.md#metadata): at most PackageSettings::kMetadataDocumentsHeld times its
  // policy's max_metadata, else package_metadata_busy.
  std::shared_ptr<std::atomic<std::size_t>> metadata_held =
      std::make_shared<std::atomic<std::size_t>>(0);
  // The publish times its filtered metadata gave, for the age rule on its files
  // (docs/packages.md#the-decision).
  std::shared_ptr<PublishTimes> publish_times = std::make_shared<PublishTimes>();
  // What its origins chose when offered h2, for every worker: a burst of its requests to one
  // waits for one dial unless it answers HTTP/1.1 (OriginProtocols).
  OriginProtocols origin_protocols;
};

// A sandbox as one generation sees it.
struct SandboxView {
  const policy::Sandbox* sandbox = nullptr;  // points into Generation::config
  std::shared_ptr<SandboxRuntime> runtime;
  audit::AuditSink* audit = nullptr;  // one of Generation::audit_sinks
  // Null: no request-rate limit. Shared with the previous generation when unchanged.
  std::shared_ptr<limits::RequestRate> rate;
  // The same for the queries to the sandbox's resolver (dns_queries_per_second).
  std::shared_ptr<limits::RequestRate> dns_rate;
  // The advisories its policy lists (docs/packages.md#advisories), or null: owned by
  // Generation::advisories.
  const packages::AdvisoryIndex* advisories = nullptr;
};

struct Generation {
  std::uint64_t number = 0;  // 1 at start, +1 per successful reload
  std::shared_ptr<const policy::Config> config;
  std::shared_ptr<const SecretValues> secrets;
  // Verifies upstreams against upstream.ca_file (or the default) and upstream.extra_ca_files.
  std::shared_ptr<SSL_CTX> upstream_tls;
  std::uint64_t upstream_trust_id = 0;  // changes with upstream_tls
  // The files upstream_tls read: upstream.ca_file's (if any), then each extra one's.
  std::vector<std::optional<FileIdentity>> upstream_trust_files;
  std::vector<SandboxView> sandboxes;
  std::vector<std::shared_ptr<audit::AuditSink>> audit_sinks;  // each path once
  std::shared_ptr<const PolicyAdvisories> advisories;
  // Sandbox name -> index in `sandboxes`: every accepted connection, and every query to a
  // sandbox's resolver, finds its sandbox by name, and a host may serve hundreds of them.
  std::unordered_map<std::string_view, std::size_t> by_name;

  const SandboxView* find(std::string_view name) const;
};

// Builds the generation after `previous` (null at start) from a loaded config and its secrets:
// reuses the previous generation's runtimes, rate buckets and upstream TLS context where they
// still fit, loads or creates the CAs of new sandboxes, and takes audit sinks from `audit`.
// `notices` receives one line per CA created, for the operator.
Result<std::shared_ptr<const Generation>, std::string> buildGeneration(
    std::shared_ptr<const policy::Config> config, SecretValues secrets, const Generation* previous,
    audit::AuditLog& audit, std::vector<std::string>* notices);

}  // namespace sluice::proxy
