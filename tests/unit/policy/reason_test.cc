// The reasons table (docs/wire.md#denials): tokens are stable (audit pipelines match on them), and
// each maps to one HTTP status and one RFC 9209 Proxy-Status error type.
#include "policy/reason.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::policy {
namespace {

struct Row {
  Reason reason;
  std::string_view token;
  int http_status;
  std::string_view proxy_status;
  bool policy;  // isPolicyReason: forwarded anyway in report mode
};

// Every reason, in enum order: a reason added without a row fails AllReasonsHaveARow.
const std::vector<Row> kRows = {
    {Reason::NotAllowedHost, "not_allowed_host", 403, "http_request_denied", true},
    {Reason::NotAllowedPort, "not_allowed_port", 403, "http_request_denied", true},
    {Reason::NotAllowedScheme, "not_allowed_scheme", 403, "http_request_denied", true},
    {Reason::NotAllowedMethod, "not_allowed_method", 403, "http_request_denied", true},
    {Reason::NotAllowedPath, "not_allowed_path", 403, "http_request_denied", true},
    {Reason::BadHost, "bad_host", 403, "http_request_denied", false},
    {Reason::IpLiteral, "ip_literal", 403, "destination_ip_prohibited", false},
    {Reason::IpDenied, "ip_denied", 403, "destination_ip_prohibited", false},
    {Reason::SniMissing, "sni_missing", 0, "tls_protocol_error", false},
    {Reason::SniMismatch, "sni_mismatch", 403, "http_request_denied", false},
    {Reason::HostMissing, "host_missing", 403, "http_request_denied", false},
    {Reason::HostDuplicate, "host_duplicate", 403, "http_request_denied", false},
    {Reason::HostMismatch, "host_mismatch", 403, "http_request_denied", false},
    {Reason::DnsFailed, "dns_failed", 502, "dns_error", false},
    {Reason::DnsMismatch, "dns_mismatch", 403, "destination_ip_prohibited", false},
    {Reason::NotTls, "not_tls", 0, "tls_protocol_error", false},
    {Reason::BadRequest, "bad_request", 400, "http_request_error", false},
    {Reason::HeaderTooLarge, "header_too_large", 431, "http_request_error", false},
    {Reason::UpstreamConnect, "upstream_connect", 502, "destination_unavailable", false},
    {Reason::UpstreamCert, "upstream_cert", 502, "tls_certificate_error", false},
    {Reason::UpstreamTimeout, "upstream_timeout", 504, "connection_timeout", false},
    {Reason::SecretMisuse, "secret_misuse", 403, "http_request_denied", false},
    // Per-sandbox limits hold in report mode too: they protect the other sandboxes.
    {Reason::RateLimited, "rate_limited", 429, "http_request_denied", false},
    {Reason::TooManyConnections, "too_many_connections", 503, "connection_limit_reached", false},
    // A rule that matches all but `websocket: true`: a policy reason (report mode records it).
    {Reason::UpgradeNotAllowed, "upgrade_not_allowed", 403, "http_request_denied", true},
    // A record that cannot be written stops the sandbox in every mode.
    {Reason::AuditUnavailable, "audit_unavailable", 503, "proxy_internal_error", false},
    // The package firewall: what a policy's `packages` refuses is a policy reason (report mode
    // records and forwards it).
    {Reason::PackageDenied, "package_denied", 403, "http_request_denied", true},
    {Reason::PackageMalicious, "package_malicious", 403, "http_request_denied", true},
    {Reason::PackageUnrecognized, "package_unrecognized", 403, "http_request_denied", true},
    {Reason::PackageTooNew, "package_too_new", 403, "http_request_denied", true},
    // Metadata sluice must filter and cannot: the origin's fault (502), or the sandbox's share
    // of memory (503). Not the rules: refused in report mode too (which holds no metadata).
    {Reason::PackageMetadataInvalid, "package_metadata_invalid", 502, "http_protocol_error", false},
    {Reason::PackageMetadataTooLarge, "package_metadata_too_large", 502, "http_response_body_size",
     false},
    {Reason::PackageMetadataBusy, "package_metadata_busy", 503, "proxy_internal_error", false},
};

TEST(Reason, Table) {
  for (const Row& row : kRows) {
    SCOPED_TRACE(std::string(row.token));
    const ReasonInfo& info = reasonInfo(row.reason);
    EXPECT_EQ(info.token, row.token);
    EXPECT_EQ(toString(row.reason), row.token);
    EXPECT_EQ(info.http_status, row.http_status);
    EXPECT_EQ(info.proxy_status, row.proxy_status);
    EXPECT_EQ(isPolicyReason(row.reason), row.policy);
    EXPECT_EQ(reasonFromToken(row.token), row.reason);
  }
}

TEST(Reason, AllReasonsHaveARow) {
  ASSERT_EQ(kRows.size() + 1, static_cast<std::size_t>(kReasonCount));
  for (std::size_t i = 0; i < kRows.size(); ++i) {
    EXPECT_EQ(static_cast<int>(kRows[i].reason), static_cast<int>(i) + 1) << kRows[i].token;
  }
  std::set<std::string_view> tokens;
  for (int i = 1; i < kReasonCount; ++i) {
    EXPECT_TRUE(tokens.insert(reasonInfo(static_cast<Reason>(i)).token).second) << i;
  }
}

TEST(Reason, NoneAllows) {
  EXPECT_EQ(toString(Reason::None), "");
  EXPECT_EQ(reasonInfo(Reason::None).http_status, 200);
  EXPECT_FALSE(isPolicyReason(Reason::None));
}

TEST(Reason, UnknownTokens) {
  for (std::string_view token : {"", "rate-limited", "RATE_LIMITED", "too_many", "none"}) {
    EXPECT_EQ(reasonFromToken(token), std::nullopt) << token;
  }
}

}  // namespace
}  // namespace sluice::policy
