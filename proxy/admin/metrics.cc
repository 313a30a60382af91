#include "proxy/admin/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>

namespace sluice::proxy::admin {

namespace {

constexpr std::size_t kReasons = static_cast<std::size_t>(policy::kReasonCount);
constexpr std::uint64_t kMicrosPerSecond = 1'000'000;

std::size_t reasonIndex(policy::Reason reason) {
  const auto index = static_cast<std::size_t>(reason);
  assert(index < kReasons);
  return index;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Histogram

Histogram::Histogram(std::span<const double> bounds_seconds) {
  assert(bounds_seconds.size() <= kMaxBounds);
  size_ = std::min(bounds_seconds.size(), kMaxBounds);
  for (std::size_t i = 0; i < size_; ++i) {
    // Compared with whole microseconds, so the bound is one too; rounding keeps 0.0005 at 500
    // although the double is a hair below it.
    bound_micros_[i] = static_cast<std::uint64_t>(std::llround(bounds_seconds[i] * 1e6));
    assert(bound_micros_[i] > 0 && (i == 0 || bound_micros_[i] > bound_micros_[i - 1]));
  }
}

void Histogram::observe(std::uint64_t micros) noexcept {
  // Prometheus buckets are "less than or equal": the first bound not below the value. None
  // found gives size_, the +Inf bucket.
  const auto* begin = bound_micros_.data();
  const auto index =
      static_cast<std::size_t>(std::lower_bound(begin, begin + size_, micros) - begin);
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(micros, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = size_;
  s.bound_micros = bound_micros_;
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= size_; ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.sum_micros = sum_micros_.load(std::memory_order_relaxed);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Counters

void SandboxMetrics::countRequest(std::string_view decision, policy::Reason reason) noexcept {
  const auto* found = std::find(kDecisions.begin(), kDecisions.end(), decision);
  assert(found != kDecisions.end());
  if (found == kDecisions.end()) {
    return;
  }
  const auto d = static_cast<std::size_t>(found - kDecisions.begin());
  requests_[d * kReasons + reasonIndex(reason)].fetch_add(1, std::memory_order_relaxed);
}

void SandboxMetrics::addBytes(std::uint64_t request_body, std::uint64_t response_body) noexcept {
  request_bytes_.fetch_add(request_body, std::memory_order_relaxed);
  response_bytes_.fetch_add(response_body, std::memory_order_relaxed);
}

void SandboxMetrics::countError(audit::Error error) noexcept {
  errors_[static_cast<std::size_t>(error)].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t SandboxMetrics::errors(audit::Error error) const {
  return errors_[static_cast<std::size_t>(error)].load(std::memory_order_relaxed);
}

void SandboxMetrics::countResolverAnswer(ResolverAnswer answer) noexcept {
  resolver_answers_[static_cast<std::size_t>(answer)].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t SandboxMetrics::resolverAnswers(ResolverAnswer answer) const {
  return resolver_answers_[static_cast<std::size_t>(answer)].load(std::memory_order_relaxed);
}

std::uint64_t SandboxMetrics::requests(std::size_t decision_index, policy::Reason reason) const {
  assert(decision_index < kDecisions.size());
  return requests_[decision_index * kReasons + reasonIndex(reason)].load(std::memory_order_relaxed);
}

std::string_view toString(DnsResult result) {
  switch (result) {
    case DnsResult::Ok:
      return "ok";
    case DnsResult::NoData:
      return "nodata";
    case DnsResult::NxDomain:
      return "nxdomain";
    case DnsResult::Timeout:
      return "timeout";
    case DnsResult::Error:
      return "error";
    case DnsResult::Cached:
      return "cached";
  }
  return "error";
}

void GatewayMetrics::countDnsQuery(DnsResult result) noexcept {
  dns_queries_[static_cast<std::size_t>(result)].fetch_add(1, std::memory_order_relaxed);
}

void GatewayMetrics::countReload(bool ok) noexcept {
  (ok ? reloads_ok_ : reloads_failed_).fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t GatewayMetrics::dnsQueries(DnsResult result) const {
  return dns_queries_[static_cast<std::size_t>(result)].load(std::memory_order_relaxed);
}

std::uint64_t GatewayMetrics::reloads(bool ok) const {
  return (ok ? reloads_ok_ : reloads_failed_).load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// The text format (https://prometheus.io/docs/instrumenting/exposition_formats/, 0.0.4)

namespace {

struct Label {
  std::string_view name;
  std::string_view value;
};

// Label values may hold anything (a sandbox name is checked by the loader, but the renderer
// does not rely on it): the three escapes the format defines keep each sample on one line.
void appendEscaped(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

template <class Integer>
void appendInteger(std::string& out, Integer value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

// Microseconds as decimal seconds, exactly ("0.0005", "2.5", "10"): no float on the way, so a
// bucket's le is the bound it was compared with and the sum carries no rounding.
void appendSeconds(std::string& out, std::uint64_t micros) {
  appendInteger(out, micros / kMicrosPerSecond);
  std::uint64_t fraction = micros % kMicrosPerSecond;
  if (fraction == 0) {
    return;
  }
  char digits[6];
  for (int i = 5; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + fraction % 10);
    fraction /= 10;
  }
  std::size_t length = 6;
  while (digits[length - 1] == '0') {
    --length;
  }
  out += '.';
  out.append(digits, length);
}

void appendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// `name{a="x",b="y"} ` up to the value.
void appendSeries(std::string& out, std::string_view name, std::string_view suffix,
                  std::span<const Label> labels) {
  out += name;
  out += suffix;
  if (!labels.empty()) {
    out += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      out += labels[i].name;
      out += "=\"";
      appendEscaped(out, labels[i].value);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
}

template <class Integer>
void appendSample(std::string& out, std::string_view name, std::span<const Label> labels,
                  Integer value) {
  appendSeries(out, name, "", labels);
  appendInteger(out, value);
  out += '\n';
}

// One histogram's series: cumulative buckets with their le, then _sum and _count. `labels`
// are the series' own (at most one here); le is added after them.
void appendHistogram(std::string& out, std::string_view name, std::span<const Label> labels,
                     const Histogram& histogram) {
  const Histogram::Snapshot s = histogram.snapshot();
  std::array<Label, 4> with_le{};
  assert(labels.size() < with_le.size());
  std::copy(labels.begin(), labels.end(), with_le.begin());
  const std::span<const Label> bucket_labels(with_le.data(), labels.size() + 1);
  std::string le;
  for (std::size_t i = 0; i <= s.bounds; ++i) {
    le.clear();
    if (i < s.bounds) {
      appendSeconds(le, s.bound_micros[i]);
    } else {
      le = "+Inf";
    }
    with_le[labels.size()] = Label{"le", le};
    appendSeries(out, name, "_bucket", bucket_labels);
    appendInteger(out, s.cumulative[i]);
    out += '\n';
  }
  appendSeries(out, name, "_sum", labels);
  appendSeconds(out, s.sum_micros);
  out += '\n';
  appendSeries(out, name, "_count", labels);
  appendInteger(out, s.count());
  out += '\n';
}

}  // namespace

std::string renderPrometheus(const GatewayMetrics& gateway,
                             std::span<const SandboxSample> sandboxes, std::string_view version,
                             std::span<const AuditSample> audits,
                             std::span<const AdvisorySample> advisories) {
  std::string out;
  out.reserve(4096 + sandboxes.size() * 2048);

  appendFamily(out, "sluice_build_info", "gauge", "The running sluice; the value is always 1.");
  const Label version_label[] = {{"version", version}};
  appendSample(out, "sluice_build_info", version_label, 1);

  appendFamily(out, "sluice_requests_total", "counter",
               "Requests by sandbox, audit decision and reason (empty when none).");
  for (const SandboxSample& sandbox : sandboxes) {
    assert(sandbox.metrics != nullptr);
    for (std::size_t d = 0; d < kDecisions.size(); ++d) {
      for (std::size_t r = 0; r < kReasons; ++r) {
        const auto reason = static_cast<policy::Reason>(r);
        const std::uint64_t n = sandbox.metrics->requests(d, reason);
        if (n == 0) {
          continue;  // 3 x kReasonCount mostly empty series per sandbox would drown a scrape
        }
        const Label labels[] = {
            {"sandbox", sandbox.name}, {"decision", kDecisions[d]}, {"reason", toString(reason)}};
        appendSample(out, "sluice_requests_total", labels, n);
      }
    }
  }

  appendFamily(out, "sluice_connections_active", "gauge", "Client connections open now.");
  for (const SandboxSample& sandbox : sandboxes) {
    const Label labels[] = {{"sandbox", sandbox.name}};
    appendSample(out, "sluice_connections_active", labels,
                 sandbox.metrics->connections_active.load(std::memory_order_relaxed));
  }

  appendFamily(out, "sluice_websocket_sessions_active", "gauge",
               "WebSocket sessions relaying now.");
  for (const SandboxSample& sandbox : sandboxes) {
    const Label labels[] = {{"sandbox", sandbox.name}};
    appendSample(out, "sluice_websocket_sessions_active", labels,
                 sandbox.metrics->websocket_sessions_active.load(std::memory_order_relaxed));
  }

  appendFamily(out, "sluice_h2_streams_active", "gauge",
               "HTTP/2 streams open now, by leg (client: the sandbox's; origin: sluice's).");
  for (const SandboxSample& sandbox : sandboxes) {
    const Label client[] = {{"sandbox", sandbox.name}, {"leg", "client"}};
    appendSample(out, "sluice_h2_streams_active", client,
                 sandbox.metrics->h2_client_streams_active.load(std::memory_order_relaxed));
    const Label origin[] = {{"sandbox", sandbox.name}, {"leg", "origin"}};
    appendSample(out, "sluice_h2_streams_active", origin,
                 sandbox.metrics->h2_origin_streams_active.load(std::memory_order_relaxed));
  }

  appendFamily(out, "sluice_connection_errors_total", "counter",
               "Connections the sandbox made end abnormally, by the audit record's error.");
  for (const SandboxSample& sandbox : sandboxes) {
    for (std::size_t e = 1; e < audit::kErrorCount; ++e) {
      const auto error = static_cast<audit::Error>(e);
      if (const std::uint64_t n = sandbox.metrics->errors(error); n != 0) {
        const Label labels[] = {{"sandbox", sandbox.name}, {"error", audit::toString(error)}};
        appendSample(out, "sluice_connection_errors_total", labels, n);
      }
    }
  }

  appendFamily(out, "sluice_bytes_total", "counter",
               "Body bytes of requests and responses (the audit record's req_bytes, resp_bytes).");
  for (const SandboxSample& sandbox : sandboxes) {
    const Label request[] = {{"sandbox", sandbox.name}, {"direction", "request"}};
    appendSample(out, "sluice_bytes_total", request, sandbox.metrics->requestBytes());
    const Label response[] = {{"sandbox", sandbox.name}, {"direction", "response"}};
    appendSample(out, "sluice_bytes_total", response, sandbox.metrics->responseBytes());
  }

  appendFamily(out, "sluice_dns_queries_total", "counter",
               "Lookups of the gateway's own resolver by result (cached: answered from cache).");
  for (std::size_t i = 0; i < kDnsResultCount; ++i) {
    const auto result = static_cast<DnsResult>(i);
    const Label labels[] = {{"result", toString(result)}};
    appendSample(out, "sluice_dns_queries_total", labels, gateway.dnsQueries(result));
  }

  appendFamily(out, "sluice_certs_minted_total", "counter",
               "Leaf certificates minted by the sandbox's CA.");
  for (const SandboxSample& sandbox : sandboxes) {
    const Label labels[] = {{"sandbox", sandbox.name}};
    appendSample(out, "sluice_certs_minted_total", labels, sandbox.certs_minted);
  }

  appendFamily(out, "sluice_sandbox_resolver_answers_total", "counter",
               "Queries to a sandbox's own resolver (dns_listen) by answer (only non-zero).");
  for (const SandboxSample& sandbox : sandboxes) {
    for (std::size_t a = 0; a < kResolverAnswers.size(); ++a) {
      const std::uint64_t n = sandbox.metrics->resolverAnswers(static_cast<ResolverAnswer>(a));
      if (n != 0) {
        const Label labels[] = {{"sandbox", sandbox.name}, {"answer", kResolverAnswers[a]}};
        appendSample(out, "sluice_sandbox_resolver_answers_total", labels, n);
      }
    }
  }

  appendFamily(out, "sluice_config_reloads_total", "counter",
               "Configuration reloads: applied (ok) or refused, the running one kept (failed).");
  const Label ok[] = {{"result", "ok"}};
  appendSample(out, "sluice_config_reloads_total", ok, gateway.reloads(true));
  const Label failed[] = {{"result", "failed"}};
  appendSample(out, "sluice_config_reloads_total", failed, gateway.reloads(false));

  appendFamily(out, "sluice_package_advisories", "gauge",
               "Advisories a policy's package firewall loaded (distinct ids), with the "
               "fingerprint its log line names.");
  for (const AdvisorySample& loaded : advisories) {
    const Label labels[] = {{"policy", loaded.policy}, {"fingerprint", loaded.fingerprint}};
    appendSample(out, "sluice_package_advisories", labels, loaded.advisories);
  }

  appendFamily(out, "sluice_dns_lookup_seconds", "histogram",
               "Duration of the gateway resolver's lookups.");
  appendHistogram(out, "sluice_dns_lookup_seconds", {}, gateway.dns_lookup);

  appendFamily(out, "sluice_upstream_connect_seconds", "histogram",
               "Duration of TCP connects to upstream addresses.");
  appendHistogram(out, "sluice_upstream_connect_seconds", {}, gateway.upstream_connect);

  appendFamily(out, "sluice_request_duration_seconds", "histogram",
               "Duration of requests, from the head received to the response complete.");
  for (const SandboxSample& sandbox : sandboxes) {
    const Label labels[] = {{"sandbox", sandbox.name}};
    appendHistogram(out, "sluice_request_duration_seconds", labels,
                    sandbox.metrics->request_duration);
  }

  // The audit files: a record that cannot be written is kept, and the sandboxes that write
  // there are refused meanwhile, so an operator must see which file and how much it keeps.
  struct AuditFamily {
    std::string_view name;
    std::string_view type;
    std::string_view help;
    std::uint64_t (*value)(const AuditSample&);
  };
  static constexpr AuditFamily kAuditFamilies[] = {
      {"sluice_audit_unavailable", "gauge",
       "1 while the audit file cannot be written: the sandboxes writing to it are refused "
       "(503 audit_unavailable).",
       [](const AuditSample& a) -> std::uint64_t { return a.unavailable ? 1 : 0; }},
      {"sluice_audit_pending_records", "gauge",
       "Records kept in memory because the audit file did not take them yet.",
       [](const AuditSample& a) { return a.pending_records; }},
      {"sluice_audit_pending_bytes", "gauge", "Bytes of the records kept in memory.",
       [](const AuditSample& a) { return a.pending_bytes; }},
      {"sluice_audit_write_failures_total", "counter",
       "Attempts to write to the audit file that failed (each is retried).",
       [](const AuditSample& a) { return a.write_failures; }},
      {"sluice_audit_refused_connections_total", "counter",
       "Connections closed unread because too many records were kept for the audit file.",
       [](const AuditSample& a) { return a.refused_connections; }},
      {"sluice_audit_refused_streams_total", "counter",
       "HTTP/2 streams refused unrecorded (REFUSED_STREAM) while the audit file could not be "
       "written, their connection having kept its one refusal.",
       [](const AuditSample& a) { return a.refused_streams; }},
  };
  for (const AuditFamily& family : kAuditFamilies) {
    appendFamily(out, family.name, family.type, family.help);
    for (const AuditSample& audit : audits) {
      const Label labels[] = {{"path", audit.path}};
      appendSample(out, family.name, labels, family.value(audit));
    }
  }
  return out;
}

}  // namespace sluice::proxy::admin
