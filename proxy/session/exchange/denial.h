#pragma once
// sluice's own answers: the response for a denial or an upstream failure (docs/wire.md#denials),
// built from the one reasons table (policy/reason.h): status line, `Sluice-Reason`, RFC 9209
// `Proxy-Status`, a one-line text body, and `Connection: close` (a denied connection is not
// kept: nothing pipelined behind a denied request is read).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.h"
#include "policy/reason.h"
#include "proxy/audit/audit_record.h"
#include "proxy/limits/log_budget.h"

namespace sluice::proxy::session {

// What a request refused while its sandbox's audit log cannot be written is told
// (docs/audit.md#when-the-audit-file-cannot-be-written).
inline constexpr std::string_view kAuditUnavailableDetail =
    "the audit log cannot be written; try again later";

// The standard reason phrase of the statuses sluice sends itself.
std::string_view reasonPhrase(int status);
// The status line's reason phrase of sluice's answer: the standard phrase, then who refused and
// why ("Forbidden by sluice: not_allowed_host"). apt, npm and Python print only the status line
// of a failure (docs/wire.md#denials).
std::string denialPhrase(int status, policy::Reason reason);

// What was asked, for the explanation of its refusal.
struct DeniedRequest {
  std::string_view sandbox;
  std::string_view host;  // canonical H (or H as received when it is not a valid name)
  std::uint16_t port = 0;
  policy::Scheme scheme = policy::Scheme::Https;
  std::string_view method;  // "CONNECT" for a tunnel
  std::string_view target;  // the origin-form target (a tunnel: its authority)
};

// A one-line explanation of a policy denial for the response body and the log line: what was
// asked, why it is not allowed and, where one key of a rule would allow it, that key
// (docs/wire.md#denials): a user reading the refusal in the client's error knows what to ask
// the operator for.
std::string explainDenial(policy::Reason reason, const DeniedRequest& request);

// ip_denied: the addresses of H the checks refused (the first kMaxAddresses of `addresses`, all
// refused when the reason is ip_denied), each with why, into `out` (cleared first).
void listDeniedAddresses(const policy::Sandbox& sandbox, const policy::Rule* rule,
                         std::span<const policy::IpAddress> addresses, std::uint16_t port,
                         std::vector<audit::DeniedAddress>& out);
// The explanation of an ip_denied: H, then each refused address with its class and why
// (docs/policy.md#addresses), so that the user sees what the resolver answered without
// `sluice explain`: "h resolves only to addresses sluice does not connect to: 192.0.2.7
// (documentation, not globally reachable)". The first few addresses, then how many more.
std::string explainIpDenied(std::string_view host, std::span<const audit::DeniedAddress> denied,
                            const policy::Rule* rule);

// The line at the default level (info) that says a sandbox was refused (docs/cli.md#logs):
// sandbox, method, url, reason and why, at most once a minute per (sandbox, host, reason), with
// how many were left out since, so that a sandbox hammering one refused host costs one line a
// minute. What came from the sandbox (method, url, why) is cut to a few hundred bytes, its
// control and non-ASCII bytes shown as '?': a log line is never the sandbox's to shape.
void logDenial(limits::LogBudget& budget, std::uint64_t now_ms, std::string_view sandbox,
               std::string_view host, std::string_view method, std::string_view url,
               policy::Reason reason, std::string_view detail);

// The one-line text body of sluice's answer: "sluice: <reason>: <detail>\n", hostile bytes of
// `detail` replaced. (HTTP/2 answers carry the same text: docs/wire.md#http2.)
std::string denialBody(policy::Reason reason, std::string_view detail);
// The RFC 9209 Proxy-Status value for `reason`.
std::string proxyStatusValue(policy::Reason reason);
// Appends the whole response for `reason` to `out`. `detail` is a short human explanation
// (hostile bytes in it are replaced, so it cannot break the header or body framing).
void appendDenial(std::string& out, policy::Reason reason, std::string_view detail);

}  // namespace sluice::proxy::session
