#pragma once
// What every worker shares once sluice has started: the config snapshot, each sandbox's CA and
// leaf cache, the TLS contexts, the audit log. Built on the main thread before any worker runs
// and immutable afterwards (the leaf caches and audit sinks are internally thread-safe), so
// workers read it without locks.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "policy/config.h"
#include "proxy/audit/audit_log.h"
#include "proxy/secret_values.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy {

struct SandboxRuntime {
  const policy::Sandbox* sandbox = nullptr;  // points into GatewayState::config
  std::unique_ptr<certs::CertificateAuthority> ca;
  std::unique_ptr<certs::LeafCache> leaves;
  audit::AuditSink* audit = nullptr;
};

struct GatewayState {
  std::shared_ptr<const policy::Config> config;
  std::vector<std::unique_ptr<SandboxRuntime>> sandboxes;
  tls::SslCtxPtr sandbox_tls;   // the sandbox-facing side (leaves set per connection)
  tls::SslCtxPtr upstream_tls;  // verifies upstreams against upstream.ca_file
  std::unique_ptr<audit::AuditLog> audit;
  // The secrets' values (SPEC §5.5), for the rules that inject them.
  SecretValues secrets;
  std::atomic<std::uint64_t> next_connection_id{1};
  std::atomic<std::uint64_t> open_connections{0};
  // Set when connections end or give their buffers back; the main thread then returns the
  // heap's free pages to the OS (Server), so RSS follows the connections held, not the peak.
  std::atomic<bool> heap_shrank{false};

  // Loads or creates every sandbox's CA, builds the TLS contexts and opens the audit log.
  // `notices` receives one line per CA created, for the operator.
  static Result<std::unique_ptr<GatewayState>, std::string> build(
      std::shared_ptr<const policy::Config> config, SecretValues secrets,
      std::vector<std::string>* notices);
};

}  // namespace sluice::proxy
