#pragma once
// The gateway's counters (docs/metrics.md) and their Prometheus text rendering.
//
// Worker threads update them on the request path: every update is one or two relaxed atomic
// adds, with no lock and no allocation. The admin endpoint reads them on the main thread when
// scraped; a scrape taken while workers update may see one counter's increment and not yet a
// related one's (relaxed order), which Prometheus' rates tolerate, but a histogram's _count
// always equals its +Inf bucket (both are derived from the same bucket counters).
//
// Lifetime: SandboxMetrics lives as long as its sandbox (across reloads, so counters never go
// backwards while the sandbox exists); GatewayMetrics lives as long as the process. Neither is
// copyable or movable (atomics): hold them by pointer, by shared_ptr, or as a member.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "policy/reason.h"
#include "proxy/audit/audit_record.h"

namespace sluice::proxy::admin {

// Upper bounds of the latency buckets, in seconds (Prometheus' base unit), from 0.5 ms: a
// cached DNS answer or a loopback connect lands in the first buckets, a slow upstream in the
// last ones.
inline constexpr std::array<double, 14> kLatencyBounds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

// A Prometheus histogram with fixed buckets. Observations are whole microseconds (what
// uv_now()/steady_clock differences give), so bucket bounds and the sum are exact.
class Histogram {
 public:
  static constexpr std::size_t kMaxBounds = 16;

  // `bounds_seconds`: strictly increasing, positive, whole microseconds, at most kMaxBounds;
  // the +Inf bucket is implicit.
  explicit Histogram(std::span<const double> bounds_seconds = kLatencyBounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void observe(std::uint64_t micros) noexcept;

  struct Snapshot {
    std::size_t bounds = 0;  // finite buckets in use; index `bounds` is +Inf
    std::array<std::uint64_t, kMaxBounds> bound_micros{};
    // Cumulative, as Prometheus wants them: cumulative[i] = observations <= bound i;
    // cumulative[bounds] = every observation (the +Inf bucket, and _count).
    std::array<std::uint64_t, kMaxBounds + 1> cumulative{};
    std::uint64_t sum_micros = 0;
    std::uint64_t count() const { return cumulative[bounds]; }
  };
  Snapshot snapshot() const;

 private:
  std::size_t size_ = 0;
  std::array<std::uint64_t, kMaxBounds> bound_micros_{};
  // Per bucket, not cumulative: one increment per observation. The last used one is +Inf.
  std::array<std::atomic<std::uint64_t>, kMaxBounds + 1> buckets_{};
  std::atomic<std::uint64_t> sum_micros_{0};
};

// The audit record's decisions (docs/audit.md): "allow", "deny", "report", as counter indices.
inline constexpr std::array<std::string_view, 3> kDecisions = {"allow", "deny", "report"};

// What the sandbox's own resolver (dns_listen) answered: a name its policy allows, NXDOMAIN,
// or REFUSED (over dns_queries_per_second). The `answer` label.
enum class ResolverAnswer : std::uint8_t { Allowed, NxDomain, Refused };
inline constexpr std::array<std::string_view, 3> kResolverAnswers = {"allowed", "nxdomain",
                                                                     "refused"};

// One sandbox's counters.
struct SandboxMetrics {
  // One request with its audit record's decision ("allow" | "deny" | "report") and reason
  // (Reason::None: no reason, rendered as reason=""). Another decision text is a caller bug:
  // asserted, and not counted in a release build.
  void countRequest(std::string_view decision, policy::Reason reason) noexcept;
  // Body bytes of one request, as in the audit record's req_bytes and resp_bytes.
  void addBytes(std::uint64_t request_body, std::uint64_t response_body) noexcept;

  // One audit record whose `error` says the request or connection ended abnormally.
  void countError(audit::Error error) noexcept;
  std::uint64_t errors(audit::Error error) const;

  void countResolverAnswer(ResolverAnswer answer) noexcept;
  std::uint64_t resolverAnswers(ResolverAnswer answer) const;

  // Client connections open now: +1 on accept, -1 when closed.
  std::atomic<std::int64_t> connections_active{0};
  // WebSocket sessions relaying now: +1 on the origin's 101, -1 when the session ends.
  std::atomic<std::int64_t> websocket_sessions_active{0};
  // HTTP/2 streams open now, on the sandbox's connections and toward origins: +1 when the
  // stream opens, -1 when it closes (docs/metrics.md).
  std::atomic<std::int64_t> h2_client_streams_active{0};
  std::atomic<std::int64_t> h2_origin_streams_active{0};
  // Head received to response complete, in microseconds.
  Histogram request_duration;

  // Readers, for the renderer and tests.
  std::uint64_t requests(std::size_t decision_index, policy::Reason reason) const;
  std::uint64_t requestBytes() const { return request_bytes_.load(std::memory_order_relaxed); }
  std::uint64_t responseBytes() const { return response_bytes_.load(std::memory_order_relaxed); }

 private:
  // [decision index * kReasonCount + reason]
  std::array<std::atomic<std::uint64_t>, kDecisions.size() * policy::kReasonCount> requests_{};
  std::array<std::atomic<std::uint64_t>, kResolverAnswers.size()> resolver_answers_{};
  std::array<std::atomic<std::uint64_t>, audit::kErrorCount> errors_{};
  std::atomic<std::uint64_t> request_bytes_{0};
  std::atomic<std::uint64_t> response_bytes_{0};
};

// How one DNS lookup of the gateway's resolver ended (a cache hit is its own result: no query
// went out).
enum class DnsResult : std::uint8_t { Ok, NoData, NxDomain, Timeout, Error, Cached };
inline constexpr std::size_t kDnsResultCount = 6;
// The `result` label: "ok", "nodata", "nxdomain", "timeout", "error", "cached".
std::string_view toString(DnsResult result);

// The process's counters.
struct GatewayMetrics {
  void countDnsQuery(DnsResult result) noexcept;
  // A configuration reload (SIGHUP) that was applied (ok) or refused (the running config kept).
  void countReload(bool ok) noexcept;

  Histogram dns_lookup;        // the gateway resolver's lookups, cache hits included
  Histogram upstream_connect;  // connect() to an upstream address, until connected or failed

  std::uint64_t dnsQueries(DnsResult result) const;
  std::uint64_t reloads(bool ok) const;

 private:
  std::array<std::atomic<std::uint64_t>, kDnsResultCount> dns_queries_{};
  std::atomic<std::uint64_t> reloads_ok_{0};
  std::atomic<std::uint64_t> reloads_failed_{0};
};

// One sandbox as a scrape sees it. `metrics` is non-null and outlives the render call;
// `certs_minted` comes from the sandbox's leaf cache. Names must be unique within one render
// (Prometheus refuses duplicate series).
struct SandboxSample {
  std::string_view name;
  const SandboxMetrics* metrics = nullptr;
  std::uint64_t certs_minted = 0;
};

// One audit file as a scrape sees it (proxy/audit/audit_log.h AuditSink::Status): whether it
// can be written and what it keeps meanwhile. Paths must be unique within one render.
struct AuditSample {
  std::string_view path;  // as configured; "-" is stdout
  bool unavailable = false;
  std::uint64_t pending_records = 0;
  std::uint64_t pending_bytes = 0;
  std::uint64_t write_failures = 0;       // failed attempts to write, ever
  std::uint64_t refused_connections = 0;  // closed unread: too much kept
  std::uint64_t refused_streams = 0;      // HTTP/2 streams refused unrecorded while failing
};

// The advisories one policy's package firewall loaded (docs/packages.md#advisories): how many
// distinct advisories, and the fingerprint the log line names (16 hex digits).
struct AdvisorySample {
  std::string_view policy;
  std::uint64_t advisories = 0;
  std::string_view fingerprint;
};

// Everything, in the Prometheus text exposition format 0.0.4, every family with # HELP and
// # TYPE; label values escaped (\\, \", \n). `version` goes into sluice_build_info. Series per
// family: requests only where non-zero; per-sandbox gauges, counters and histograms for every
// sandbox given; per-file audit gauges and counters for every audit file given; one advisory
// gauge per policy given; DNS results and reload results always, zeros included.
std::string renderPrometheus(const GatewayMetrics& gateway,
                             std::span<const SandboxSample> sandboxes, std::string_view version,
                             std::span<const AuditSample> audits = {},
                             std::span<const AdvisorySample> advisories = {});

// The Content-Type of renderPrometheus()'s output.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace sluice::proxy::admin
