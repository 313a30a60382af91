#pragma once
// One vocabulary for why (docs/wire.md#denials). Every denial sluice makes carries one of these; a
// single table maps each to the `Sluice-Reason` token, the HTTP status sent (when one can be), and
// the RFC 9209 `Proxy-Status` error type. The tokens are stable: audit pipelines match on them.

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::policy {

enum class Reason : std::uint8_t {
  None,  // allowed
  NotAllowedHost,
  NotAllowedPort,
  NotAllowedScheme,
  NotAllowedMethod,
  NotAllowedPath,
  BadHost,
  IpLiteral,
  IpDenied,
  SniMissing,
  SniMismatch,
  HostMissing,
  HostDuplicate,
  HostMismatch,
  DnsFailed,
  DnsMismatch,
  NotTls,
  BadRequest,
  HeaderTooLarge,
  UpstreamConnect,
  UpstreamCert,
  UpstreamTimeout,
  SecretMisuse,
  // Per-sandbox limits (limits.per_sandbox, a sandbox's `limits`): one busy sandbox must not
  // starve the others. Not policy reasons: a report-mode sandbox is limited all the same.
  RateLimited,         // more requests than requests_per_second (and request_burst) allow
  TooManyConnections,  // more open connections than the sandbox's max_connections
  // A WebSocket upgrade that no matching rule allows (`websocket: true`).
  UpgradeNotAllowed,
  // The sandbox's audit file cannot be written: its records are kept and retried, and its new
  // requests are refused until they can be (no request goes unrecorded).
  AuditUnavailable,
  // The package firewall (docs/packages.md): a name the policy's lists refuse, a version an
  // advisory it blocks names.
  PackageDenied,
  PackageMalicious,
  // A request in a registry's namespace that names a package in no shape sluice reads
  // (docs/packages.md#requests): the registry might serve a package sluice did not judge.
  PackageUnrecognized,
  // A version younger than the policy's `packages.min_age`, or whose publish time sluice does
  // not know (docs/packages.md#the-decision).
  PackageTooNew,
  // A registry's metadata that sluice must filter (docs/packages.md#metadata) and cannot: it
  // is not the format sluice reads, it is larger than the policy's `max_metadata`, or the
  // sandbox already has as much held for filtering as it may. Never passed on unfiltered. Not
  // policy reasons: what the origin sent, or the sandbox's share of memory, not the rules.
  PackageMetadataInvalid,
  PackageMetadataTooLarge,
  PackageMetadataBusy,
};

inline constexpr int kReasonCount = static_cast<int>(Reason::PackageMetadataBusy) + 1;

struct ReasonInfo {
  std::string_view token;         // "not_allowed_host"; "" for None
  std::uint16_t http_status;      // status of the answer sluice sends; 0: none (close/alert)
  std::string_view proxy_status;  // RFC 9209 error type, e.g. "destination_ip_prohibited"
};

const ReasonInfo& reasonInfo(Reason r);
inline std::string_view toString(Reason r) { return reasonInfo(r).token; }
std::optional<Reason> reasonFromToken(std::string_view token);

// Reasons a report-mode sandbox records and forwards anyway: the rule-matching ones (point 4
// of docs/wire.md#the-invariant). Everything else is a broken invariant (a bad or mismatched name,
// an address sluice will not dial) and is denied in every mode.
bool isPolicyReason(Reason r);

}  // namespace sluice::policy
