#pragma once
// What every worker shares for the whole life of the process: the sandbox-facing TLS context,
// the audit files, the counters, and which generation of the configuration (generation.h) is
// in force.

#include <atomic>
#include <cstdint>
#include <memory>

#include "proxy/admin/metrics.h"
#include "proxy/audit/audit_log.h"
#include "proxy/runtime/published_generation.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy {

struct GatewayState {
  tls::SslCtxPtr sandbox_tls;  // the sandbox-facing side (leaves set per connection)
  audit::AuditLog audit;
  PublishedGeneration generation;
  admin::GatewayMetrics metrics;
  std::atomic<std::uint64_t> next_connection_id{1};
  std::atomic<std::uint64_t> open_connections{0};
  // Set when connections end or give their buffers back; the main thread then returns the
  // heap's free pages to the OS (Server), so RSS follows the connections held, not the peak.
  std::atomic<bool> heap_shrank{false};
};

}  // namespace sluice::proxy
