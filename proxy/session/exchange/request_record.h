#pragma once
// What an exchange's audit record will say: the facts it was decided on (owned copies: the
// parser's views die with the next message), where it was sent and what came back. The
// exchange keeps one and resets it for each request, so its strings and digest contexts keep
// their capacity across a keep-alive connection. The connection's own refusals (a CONNECT, a
// ClientHello, a connection over a limit, a head the parser refused) are records too.

#include <openssl/evp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certs/openssl_ptr.h"
#include "policy/decision.h"
#include "proxy/audit/audit_record.h"
#include "proxy/dns/answer.h"
#include "proxy/runtime/package_judgement.h"
#include "proxy/session/context/client_side.h"

namespace sluice::proxy::session {

// The path part of the url in an audit record: the origin-form target, or nothing for
// "OPTIONS *", whose target URI is the authority alone (RFC 9110 section 7.1).
inline std::string_view urlPath(std::string_view target) { return target == "*" ? "" : target; }

struct RequestRecord {
  std::uint64_t started_ms = 0;
  // uv_hrtime() when it began: the latency histograms want better than the loop's millisecond
  // clock.
  std::uint64_t started_ns = 0;
  std::chrono::system_clock::time_point ts;

  // The request, as decided.
  std::string target_host;  // H as received
  std::string host;         // canonical H
  std::uint16_t port = 0;
  policy::Scheme scheme = policy::Scheme::Https;
  std::string method;
  std::string origin_target;               // forwarded target, origin form
  std::optional<std::string> host_header;  // as received
  std::string url;
  policy::Verdict verdict = policy::Verdict::Deny;
  policy::Reason policy_reason = policy::Reason::None;  // report mode: what enforcing would say
  // The refusal being answered: a connection that closes while sluice writes it (a write that
  // fails) records the request with it, as the refusal's own record would have.
  policy::Reason refusal = policy::Reason::None;
  std::string rule;

  // The HTTP of each leg (None: no HTTP there, or nothing went upstream), and whether the
  // request asked for a WebSocket.
  audit::Proto proto = audit::Proto::None;
  audit::Proto upstream_proto = audit::Proto::None;
  bool websocket = false;
  // Why the request or connection ended abnormally (a flood that ended an HTTP/2 connection).
  audit::Error error = audit::Error::None;

  // Where it went: H's addresses as resolved, and the one connected to.
  std::shared_ptr<const dns::Answer> answer;
  std::optional<policy::Endpoint> upstream;

  // ip_denied: each address of H refused, and why (docs/audit.md#the-fields).
  std::vector<audit::DeniedAddress> denied_addrs;

  // The package a request of a registry rule names (kind None: none, or no registry rule),
  // and the verdict on it (docs/packages.md#on-record).
  PackageJudgement package;

  // What came back. A body is read once the request goes upstream (its body is relayed as it
  // comes, if it has one) or a part of it is held, and the response's once its head came: before
  // that, the record says null for it, not 0.
  int status = 0;
  bool req_body_read = false;
  bool resp_body_read = false;
  std::uint64_t req_bytes = 0;
  std::uint64_t resp_bytes = 0;
  bool hashing = false;  // audit.hash_bodies
  certs::EvpMdCtxPtr req_hash;
  certs::EvpMdCtxPtr resp_hash;

  // Clears everything for a new request; digests restart when `hash` is set.
  void reset(std::uint64_t now_ms, std::uint64_t now_ns, bool hash);
  // The reason a record of this request says when it completes or is cut short: the refusal
  // being answered, report mode's reason for a request it forwarded, otherwise none.
  policy::Reason outcomeReason() const {
    if (refusal != policy::Reason::None) {
      return refusal;
    }
    return verdict == policy::Verdict::Report ? policy_reason : policy::Reason::None;
  }
};

// The sandbox's request rate: one token per request, allowed or not.
enum class RateToken : std::uint8_t {
  NotTaken,
  Taken,
  Waived,  // not a request: a connection refused over a limit has that as its reason
};
// Takes `token` from the sandbox's bucket, once per request (a token taken or waived stays so);
// false: the sandbox is over its rate (docs/wire.md#limits-and-timeouts).
bool takeRequestToken(RateToken& token, const SandboxView& view);
// What a refusal for the rate says.
std::string rateLimitDetail(const policy::Sandbox& sandbox);

// One form of url whatever built it (docs/audit.md#the-fields): no port when it is the scheme's
// default ("https://h:443/p" is "https://h/p"). The rest stays as built: canonical once H was,
// as received before. (Idempotent.)
void normaliseUrl(std::string& url);

// Writes `record`'s audit record (with the connection's facts, `verdict`, `reason` and the
// `status` the client got) to the sandbox's audit log, and counts it in the sandbox's metrics,
// which follow the audit log: one request per record, its body bytes. Nothing when the sandbox
// has no audit log. The body digests are finished: a record is written once.
void writeAuditRecord(RequestRecord& record, const ConnectionFacts& connection,
                      const SandboxView& view, SandboxRuntime& runtime, std::uint64_t now_ms,
                      policy::Verdict verdict, policy::Reason reason, int status);

}  // namespace sluice::proxy::session
