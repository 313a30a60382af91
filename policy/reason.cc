#include "policy/reason.h"

#include <array>

namespace sluice::policy {

namespace {

// The one table. Statuses follow docs/wire.md#denials: denials are 403 (over TLS when inside the
// tunnel), framing errors 400, an oversized head 431, upstream failures 502/504. A sandbox over its
// own limits gets 429 (request rate) or 503 (connections), and so does every sandbox whose audit
// file cannot be written (503 audit_unavailable) or that holds all the package metadata it may
// (503 package_metadata_busy): "try again later", not "never". Registry metadata sluice cannot
// filter is the origin's failure: 502. A status of 0 means the connection is closed (with a TLS
// alert where one can be sent) because no HTTP answer can be framed: not_tls has no HTTP to
// answer, sni_missing no certificate to answer over.
constexpr std::array<ReasonInfo, kReasonCount> kReasons = {{
    {"", 200, ""},                                              // None
    {"not_allowed_host", 403, "http_request_denied"},           //
    {"not_allowed_port", 403, "http_request_denied"},           //
    {"not_allowed_scheme", 403, "http_request_denied"},         //
    {"not_allowed_method", 403, "http_request_denied"},         //
    {"not_allowed_path", 403, "http_request_denied"},           //
    {"bad_host", 403, "http_request_denied"},                   //
    {"ip_literal", 403, "destination_ip_prohibited"},           //
    {"ip_denied", 403, "destination_ip_prohibited"},            //
    {"sni_missing", 0, "tls_protocol_error"},                   //
    {"sni_mismatch", 403, "http_request_denied"},               //
    {"host_missing", 403, "http_request_denied"},               //
    {"host_duplicate", 403, "http_request_denied"},             //
    {"host_mismatch", 403, "http_request_denied"},              //
    {"dns_failed", 502, "dns_error"},                           //
    {"dns_mismatch", 403, "destination_ip_prohibited"},         //
    {"not_tls", 0, "tls_protocol_error"},                       //
    {"bad_request", 400, "http_request_error"},                 //
    {"header_too_large", 431, "http_request_error"},            //
    {"upstream_connect", 502, "destination_unavailable"},       //
    {"upstream_cert", 502, "tls_certificate_error"},            //
    {"upstream_timeout", 504, "connection_timeout"},            //
    {"secret_misuse", 403, "http_request_denied"},              //
    {"rate_limited", 429, "http_request_denied"},               //
    {"too_many_connections", 503, "connection_limit_reached"},  //
    {"upgrade_not_allowed", 403, "http_request_denied"},        //
    {"audit_unavailable", 503, "proxy_internal_error"},         //
    {"package_denied", 403, "http_request_denied"},             //
    {"package_malicious", 403, "http_request_denied"},          //
    {"package_unrecognized", 403, "http_request_denied"},       //
    {"package_too_new", 403, "http_request_denied"},            //
    {"package_metadata_invalid", 502, "http_protocol_error"},   //
    {"package_metadata_too_large", 502, "http_response_body_size"},
    {"package_metadata_busy", 503, "proxy_internal_error"},  //
}};

}  // namespace

const ReasonInfo& reasonInfo(Reason r) { return kReasons[static_cast<std::size_t>(r)]; }

std::optional<Reason> reasonFromToken(std::string_view token) {
  for (std::size_t i = 1; i < kReasons.size(); ++i) {
    if (kReasons[i].token == token) {
      return static_cast<Reason>(i);
    }
  }
  return std::nullopt;
}

bool isPolicyReason(Reason r) {
  switch (r) {
    case Reason::NotAllowedHost:
    case Reason::NotAllowedPort:
    case Reason::NotAllowedScheme:
    case Reason::NotAllowedMethod:
    case Reason::NotAllowedPath:
    case Reason::UpgradeNotAllowed:
    case Reason::PackageDenied:
    case Reason::PackageMalicious:
    case Reason::PackageUnrecognized:
    case Reason::PackageTooNew:
      return true;
    default:
      return false;
  }
}

}  // namespace sluice::policy
