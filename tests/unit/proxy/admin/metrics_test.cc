// The counters and their Prometheus text: the exact bytes of a small case, label escaping,
// cumulative buckets with inclusive bounds, and increments from two threads that all arrive.
#include "proxy/admin/metrics.h"

#include <array>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace sluice::proxy::admin {
namespace {

using policy::Reason;

// Every line of `text` that starts with `prefix`, joined by newlines.
std::string linesStartingWith(const std::string& text, std::string_view prefix) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end;
    std::string_view line(text.data() + at, end - at);
    if (line.starts_with(prefix)) {
      out.append(line);
      out += '\n';
    }
    at = end + 1;
  }
  return out;
}

// The zero buckets of a default histogram, for the families a test leaves untouched.
std::string emptyHistogram(std::string_view name, std::string_view labels) {
  std::string out;
  const std::string open = labels.empty() ? "{" : "{" + std::string(labels) + ",";
  for (const char* le : {"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                         "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}) {
    out += std::string(name) + "_bucket" + open + "le=\"" + le + "\"} 0\n";
  }
  const std::string plain = labels.empty() ? "" : "{" + std::string(labels) + "}";
  out += std::string(name) + "_sum" + plain + " 0\n";
  out += std::string(name) + "_count" + plain + " 0\n";
  return out;
}

TEST(RenderPrometheus, ExactTextForOneSandbox) {
  GatewayMetrics gateway;
  SandboxMetrics sandbox;
  sandbox.countRequest("allow", Reason::None);
  sandbox.countRequest("allow", Reason::None);
  sandbox.countRequest("deny", Reason::NotAllowedHost);
  sandbox.connections_active.fetch_add(3);
  sandbox.websocket_sessions_active.fetch_add(1);
  sandbox.h2_client_streams_active.fetch_add(5);
  sandbox.h2_origin_streams_active.fetch_add(2);
  sandbox.countError(sluice::proxy::audit::Error::H2RapidReset);
  sandbox.addBytes(10, 2000);
  sandbox.request_duration.observe(1500);     // 1.5 ms
  sandbox.request_duration.observe(3000000);  // 3 s
  sandbox.countResolverAnswer(ResolverAnswer::Allowed);
  sandbox.countResolverAnswer(ResolverAnswer::Refused);
  sandbox.countResolverAnswer(ResolverAnswer::Refused);
  gateway.countDnsQuery(DnsResult::Ok);
  gateway.countDnsQuery(DnsResult::Cached);
  gateway.countDnsQuery(DnsResult::Cached);
  gateway.countReload(true);
  gateway.dns_lookup.observe(400);
  const SandboxSample samples[] = {{"agent-1", &sandbox, 4}};
  const AuditSample audits[] = {{"/var/log/sluice/a.jsonl", true, 3, 1400, 7, 2, 5},
                                {"-", false, 0, 0, 0, 0}};

  const std::string expected =
      "# HELP sluice_build_info The running sluice; the value is always 1.\n"
      "# TYPE sluice_build_info gauge\n"
      "sluice_build_info{version=\"0.1.0\"} 1\n"
      "# HELP sluice_requests_total Requests by sandbox, audit decision and reason (empty when "
      "none).\n"
      "# TYPE sluice_requests_total counter\n"
      "sluice_requests_total{sandbox=\"agent-1\",decision=\"allow\",reason=\"\"} 2\n"
      "sluice_requests_total{sandbox=\"agent-1\",decision=\"deny\",reason=\"not_allowed_host\"} "
      "1\n"
      "# HELP sluice_connections_active Client connections open now.\n"
      "# TYPE sluice_connections_active gauge\n"
      "sluice_connections_active{sandbox=\"agent-1\"} 3\n"
      "# HELP sluice_websocket_sessions_active WebSocket sessions relaying now.\n"
      "# TYPE sluice_websocket_sessions_active gauge\n"
      "sluice_websocket_sessions_active{sandbox=\"agent-1\"} 1\n"
      "# HELP sluice_h2_streams_active HTTP/2 streams open now, by leg (client: the sandbox's; "
      "origin: sluice's).\n"
      "# TYPE sluice_h2_streams_active gauge\n"
      "sluice_h2_streams_active{sandbox=\"agent-1\",leg=\"client\"} 5\n"
      "sluice_h2_streams_active{sandbox=\"agent-1\",leg=\"origin\"} 2\n"
      "# HELP sluice_connection_errors_total Connections the sandbox made end abnormally, by "
      "the audit record's error.\n"
      "# TYPE sluice_connection_errors_total counter\n"
      "sluice_connection_errors_total{sandbox=\"agent-1\",error=\"h2_rapid_reset\"} 1\n"
      "# HELP sluice_bytes_total Body bytes of requests and responses (the audit record's "
      "req_bytes, resp_bytes).\n"
      "# TYPE sluice_bytes_total counter\n"
      "sluice_bytes_total{sandbox=\"agent-1\",direction=\"request\"} 10\n"
      "sluice_bytes_total{sandbox=\"agent-1\",direction=\"response\"} 2000\n"
      "# HELP sluice_dns_queries_total Lookups of the gateway's own resolver by result (cached: "
      "answered from cache).\n"
      "# TYPE sluice_dns_queries_total counter\n"
      "sluice_dns_queries_total{result=\"ok\"} 1\n"
      "sluice_dns_queries_total{result=\"nodata\"} 0\n"
      "sluice_dns_queries_total{result=\"nxdomain\"} 0\n"
      "sluice_dns_queries_total{result=\"timeout\"} 0\n"
      "sluice_dns_queries_total{result=\"error\"} 0\n"
      "sluice_dns_queries_total{result=\"cached\"} 2\n"
      "# HELP sluice_certs_minted_total Leaf certificates minted by the sandbox's CA.\n"
      "# TYPE sluice_certs_minted_total counter\n"
      "sluice_certs_minted_total{sandbox=\"agent-1\"} 4\n"
      "# HELP sluice_sandbox_resolver_answers_total Queries to a sandbox's own resolver "
      "(dns_listen) by answer (only non-zero).\n"
      "# TYPE sluice_sandbox_resolver_answers_total counter\n"
      "sluice_sandbox_resolver_answers_total{sandbox=\"agent-1\",answer=\"allowed\"} 1\n"
      "sluice_sandbox_resolver_answers_total{sandbox=\"agent-1\",answer=\"refused\"} 2\n"
      "# HELP sluice_config_reloads_total Configuration reloads: applied (ok) or refused, the "
      "running one kept (failed).\n"
      "# TYPE sluice_config_reloads_total counter\n"
      "sluice_config_reloads_total{result=\"ok\"} 1\n"
      "sluice_config_reloads_total{result=\"failed\"} 0\n"
      "# HELP sluice_package_advisories Advisories a policy's package firewall loaded (distinct "
      "ids), with the fingerprint its log line names.\n"
      "# TYPE sluice_package_advisories gauge\n"
      "sluice_package_advisories{policy=\"mirrors\",fingerprint=\"0123456789abcdef\"} 123\n"
      "# HELP sluice_dns_lookup_seconds Duration of the gateway resolver's lookups.\n"
      "# TYPE sluice_dns_lookup_seconds histogram\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.0005\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.001\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.0025\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.005\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.01\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.025\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.05\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.1\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.25\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"0.5\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"1\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"2.5\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"5\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"10\"} 1\n"
      "sluice_dns_lookup_seconds_bucket{le=\"+Inf\"} 1\n"
      "sluice_dns_lookup_seconds_sum 0.0004\n"
      "sluice_dns_lookup_seconds_count 1\n"
      "# HELP sluice_upstream_connect_seconds Duration of TCP connects to upstream addresses.\n"
      "# TYPE sluice_upstream_connect_seconds histogram\n" +
      emptyHistogram("sluice_upstream_connect_seconds", "") +
      "# HELP sluice_request_duration_seconds Duration of requests, from the head received to "
      "the response complete.\n"
      "# TYPE sluice_request_duration_seconds histogram\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.0005\"} 0\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.001\"} 0\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.0025\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.005\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.01\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.025\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.05\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.1\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.25\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"0.5\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"1\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"2.5\"} 1\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"5\"} 2\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"10\"} 2\n"
      "sluice_request_duration_seconds_bucket{sandbox=\"agent-1\",le=\"+Inf\"} 2\n"
      "sluice_request_duration_seconds_sum{sandbox=\"agent-1\"} 3.0015\n"
      "sluice_request_duration_seconds_count{sandbox=\"agent-1\"} 2\n"
      "# HELP sluice_audit_unavailable 1 while the audit file cannot be written: the sandboxes "
      "writing to it are refused (503 audit_unavailable).\n"
      "# TYPE sluice_audit_unavailable gauge\n"
      "sluice_audit_unavailable{path=\"/var/log/sluice/a.jsonl\"} 1\n"
      "sluice_audit_unavailable{path=\"-\"} 0\n"
      "# HELP sluice_audit_pending_records Records kept in memory because the audit file did not "
      "take them yet.\n"
      "# TYPE sluice_audit_pending_records gauge\n"
      "sluice_audit_pending_records{path=\"/var/log/sluice/a.jsonl\"} 3\n"
      "sluice_audit_pending_records{path=\"-\"} 0\n"
      "# HELP sluice_audit_pending_bytes Bytes of the records kept in memory.\n"
      "# TYPE sluice_audit_pending_bytes gauge\n"
      "sluice_audit_pending_bytes{path=\"/var/log/sluice/a.jsonl\"} 1400\n"
      "sluice_audit_pending_bytes{path=\"-\"} 0\n"
      "# HELP sluice_audit_write_failures_total Attempts to write to the audit file that failed "
      "(each is retried).\n"
      "# TYPE sluice_audit_write_failures_total counter\n"
      "sluice_audit_write_failures_total{path=\"/var/log/sluice/a.jsonl\"} 7\n"
      "sluice_audit_write_failures_total{path=\"-\"} 0\n"
      "# HELP sluice_audit_refused_connections_total Connections closed unread because too many "
      "records were kept for the audit file.\n"
      "# TYPE sluice_audit_refused_connections_total counter\n"
      "sluice_audit_refused_connections_total{path=\"/var/log/sluice/a.jsonl\"} 2\n"
      "sluice_audit_refused_connections_total{path=\"-\"} 0\n"
      "# HELP sluice_audit_refused_streams_total HTTP/2 streams refused unrecorded "
      "(REFUSED_STREAM) while the audit file could not be written, their connection having kept "
      "its one refusal.\n"
      "# TYPE sluice_audit_refused_streams_total counter\n"
      "sluice_audit_refused_streams_total{path=\"/var/log/sluice/a.jsonl\"} 5\n"
      "sluice_audit_refused_streams_total{path=\"-\"} 0\n";
  const AdvisorySample advisories[] = {{"mirrors", 123, "0123456789abcdef"}};
  EXPECT_EQ(renderPrometheus(gateway, samples, "0.1.0", audits, advisories), expected);
}

TEST(RenderPrometheus, NoSandboxesStillListsEveryFamilyAndTheFixedZeros) {
  GatewayMetrics gateway;
  const std::string text = renderPrometheus(gateway, {}, "v");
  for (const char* family :
       {"sluice_build_info gauge", "sluice_requests_total counter",
        "sluice_connections_active gauge", "sluice_websocket_sessions_active gauge",
        "sluice_connection_errors_total counter", "sluice_bytes_total counter",
        "sluice_dns_queries_total counter", "sluice_certs_minted_total counter",
        "sluice_config_reloads_total counter", "sluice_dns_lookup_seconds histogram",
        "sluice_upstream_connect_seconds histogram", "sluice_request_duration_seconds histogram",
        "sluice_audit_unavailable gauge", "sluice_audit_pending_records gauge",
        "sluice_audit_pending_bytes gauge", "sluice_audit_write_failures_total counter",
        "sluice_audit_refused_connections_total counter",
        "sluice_audit_refused_streams_total counter"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  }
  EXPECT_EQ(linesStartingWith(text, "sluice_requests_total"), "");
  EXPECT_EQ(linesStartingWith(text, "sluice_request_duration_seconds_"), "");
  EXPECT_EQ(linesStartingWith(text, "sluice_dns_queries_total"),
            "sluice_dns_queries_total{result=\"ok\"} 0\n"
            "sluice_dns_queries_total{result=\"nodata\"} 0\n"
            "sluice_dns_queries_total{result=\"nxdomain\"} 0\n"
            "sluice_dns_queries_total{result=\"timeout\"} 0\n"
            "sluice_dns_queries_total{result=\"error\"} 0\n"
            "sluice_dns_queries_total{result=\"cached\"} 0\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_config_reloads_total"),
            "sluice_config_reloads_total{result=\"ok\"} 0\n"
            "sluice_config_reloads_total{result=\"failed\"} 0\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_dns_lookup_seconds_"),
            emptyHistogram("sluice_dns_lookup_seconds", ""));
}

TEST(RenderPrometheus, EscapesBackslashQuoteAndNewlineInLabelValues) {
  GatewayMetrics gateway;
  SandboxMetrics sandbox;
  sandbox.countRequest("report", Reason::NotAllowedPath);
  const SandboxSample samples[] = {{"a\"b\\c\nd", &sandbox, 7}};
  const std::string text = renderPrometheus(gateway, samples, "1.0 \"rc\\1\"\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_build_info{"),
            "sluice_build_info{version=\"1.0 \\\"rc\\\\1\\\"\\n\"} 1\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_requests_total{"),
            "sluice_requests_total{sandbox=\"a\\\"b\\\\c\\nd\",decision=\"report\","
            "reason=\"not_allowed_path\"} 1\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_certs_minted_total{"),
            "sluice_certs_minted_total{sandbox=\"a\\\"b\\\\c\\nd\"} 7\n");
  // Every sample stays on its own line: no raw newline leaked into a label.
  EXPECT_EQ(linesStartingWith(text, "d\""), "");
}

TEST(RenderPrometheus, RequestsListOnlyNonZeroSeriesPerSandbox) {
  GatewayMetrics gateway;
  SandboxMetrics quiet;
  SandboxMetrics busy;
  busy.countRequest("deny", Reason::SecretMisuse);
  const SandboxSample samples[] = {{"quiet", &quiet, 0}, {"busy", &busy, 0}};
  const std::string text = renderPrometheus(gateway, samples, "v");
  EXPECT_EQ(linesStartingWith(text, "sluice_requests_total{"),
            "sluice_requests_total{sandbox=\"busy\",decision=\"deny\",reason=\"secret_misuse\"} "
            "1\n");
  // ...while the per-sandbox families list both.
  EXPECT_EQ(linesStartingWith(text, "sluice_connections_active{"),
            "sluice_connections_active{sandbox=\"quiet\"} 0\n"
            "sluice_connections_active{sandbox=\"busy\"} 0\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_request_duration_seconds_count"),
            "sluice_request_duration_seconds_count{sandbox=\"quiet\"} 0\n"
            "sluice_request_duration_seconds_count{sandbox=\"busy\"} 0\n");
}

TEST(RenderPrometheus, NegativeGaugeIsRenderedSigned) {
  // A gauge is whatever the wiring made of it; a sign must not turn into 2^64 - 1.
  GatewayMetrics gateway;
  SandboxMetrics sandbox;
  sandbox.connections_active.fetch_sub(1);
  const SandboxSample samples[] = {{"s", &sandbox, 0}};
  EXPECT_EQ(linesStartingWith(renderPrometheus(gateway, samples, "v"), "sluice_connections_"),
            "sluice_connections_active{sandbox=\"s\"} -1\n");
}

// ---- Histogram ---------------------------------------------------------------------------

constexpr std::array<double, 3> kSmallBounds = {0.001, 0.01, 0.1};

TEST(Histogram, BucketsAreCumulativeAndBoundsInclusive) {
  Histogram h(kSmallBounds);
  h.observe(0);
  h.observe(1000);  // exactly 1 ms: le="0.001" (Prometheus buckets are <=)
  h.observe(1001);
  h.observe(10000);
  h.observe(500000);  // above every bound: +Inf only
  const Histogram::Snapshot s = h.snapshot();
  ASSERT_EQ(s.bounds, 3u);
  EXPECT_EQ(s.bound_micros[0], 1000u);
  EXPECT_EQ(s.bound_micros[1], 10000u);
  EXPECT_EQ(s.bound_micros[2], 100000u);
  EXPECT_EQ(s.cumulative[0], 2u);
  EXPECT_EQ(s.cumulative[1], 4u);
  EXPECT_EQ(s.cumulative[2], 4u);
  EXPECT_EQ(s.cumulative[3], 5u);
  EXPECT_EQ(s.count(), 5u);
  EXPECT_EQ(s.sum_micros, 0u + 1000 + 1001 + 10000 + 500000);
}

TEST(Histogram, SubMillisecondBoundIsExact) {
  // 0.0005 as a double is a hair below 500 µs; an observation of exactly 500 µs still belongs
  // to its bucket.
  Histogram h;
  h.observe(500);
  h.observe(501);
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.bound_micros[0], 500u);
  EXPECT_EQ(s.cumulative[0], 1u);
  EXPECT_EQ(s.cumulative[1], 2u);
}

TEST(Histogram, RenderedSumIsExactSeconds) {
  GatewayMetrics gateway;
  gateway.upstream_connect.observe(12'345'678);
  gateway.upstream_connect.observe(1);
  const std::string text = renderPrometheus(gateway, {}, "v");
  EXPECT_EQ(linesStartingWith(text, "sluice_upstream_connect_seconds_sum"),
            "sluice_upstream_connect_seconds_sum 12.345679\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_upstream_connect_seconds_bucket{le=\"10\"}"),
            "sluice_upstream_connect_seconds_bucket{le=\"10\"} 1\n");
  EXPECT_EQ(linesStartingWith(text, "sluice_upstream_connect_seconds_bucket{le=\"+Inf\"}"),
            "sluice_upstream_connect_seconds_bucket{le=\"+Inf\"} 2\n");
}

// ---- Concurrency -------------------------------------------------------------------------

TEST(Metrics, UpdatesFromTwoThreadsAllArrive) {
  constexpr int kPerThread = 200000;
  GatewayMetrics gateway;
  SandboxMetrics sandbox;
  auto work = [&](Reason reason, DnsResult dns) {
    for (int i = 0; i < kPerThread; ++i) {
      sandbox.countRequest("allow", Reason::None);
      sandbox.countRequest("deny", reason);
      sandbox.addBytes(1, 2);
      sandbox.connections_active.fetch_add(1, std::memory_order_relaxed);
      sandbox.request_duration.observe(static_cast<std::uint64_t>(i % 3) * 1000);
      sandbox.connections_active.fetch_sub(1, std::memory_order_relaxed);
      gateway.countDnsQuery(dns);
      gateway.countDnsQuery(DnsResult::Cached);
      gateway.countReload(i % 2 == 0);
    }
  };
  std::thread a(work, Reason::IpDenied, DnsResult::Ok);
  std::thread b(work, Reason::IpDenied, DnsResult::NxDomain);
  a.join();
  b.join();

  constexpr std::uint64_t kTotal = 2 * kPerThread;
  EXPECT_EQ(sandbox.requests(0, Reason::None), kTotal);
  EXPECT_EQ(sandbox.requests(1, Reason::IpDenied), kTotal);
  EXPECT_EQ(sandbox.requests(2, Reason::IpDenied), 0u);
  EXPECT_EQ(sandbox.requestBytes(), kTotal);
  EXPECT_EQ(sandbox.responseBytes(), 2 * kTotal);
  EXPECT_EQ(sandbox.connections_active.load(), 0);
  const Histogram::Snapshot s = sandbox.request_duration.snapshot();
  EXPECT_EQ(s.count(), kTotal);
  // i % 3 over 0..kPerThread-1: 0 ms, 1 ms, 2 ms in turn.
  std::uint64_t sum = 0;
  std::uint64_t at_most_1ms = 0;
  for (int i = 0; i < kPerThread; ++i) {
    sum += static_cast<std::uint64_t>(i % 3) * 1000;
    at_most_1ms += i % 3 < 2 ? 1 : 0;
  }
  EXPECT_EQ(s.sum_micros, 2 * sum);
  EXPECT_EQ(s.cumulative[1], 2 * at_most_1ms);  // le="0.001"
  EXPECT_EQ(gateway.dnsQueries(DnsResult::Ok), static_cast<std::uint64_t>(kPerThread));
  EXPECT_EQ(gateway.dnsQueries(DnsResult::NxDomain), static_cast<std::uint64_t>(kPerThread));
  EXPECT_EQ(gateway.dnsQueries(DnsResult::Cached), kTotal);
  EXPECT_EQ(gateway.reloads(true), static_cast<std::uint64_t>(kPerThread));
  EXPECT_EQ(gateway.reloads(false), static_cast<std::uint64_t>(kPerThread));
}

TEST(DnsResult, LabelsAreTheDocumentedOnes) {
  EXPECT_EQ(toString(DnsResult::Ok), "ok");
  EXPECT_EQ(toString(DnsResult::NoData), "nodata");
  EXPECT_EQ(toString(DnsResult::NxDomain), "nxdomain");
  EXPECT_EQ(toString(DnsResult::Timeout), "timeout");
  EXPECT_EQ(toString(DnsResult::Error), "error");
  EXPECT_EQ(toString(DnsResult::Cached), "cached");
}

}  // namespace
}  // namespace sluice::proxy::admin
