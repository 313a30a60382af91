#pragma once
// The state of one request as it goes through a Session: the facts it was decided on (owned
// copies: the parser's views die with the next message), where it was sent, what came back,
// and what its audit record will say. One per session, reset for each request, so its strings
// and digest contexts keep their capacity across a keep-alive connection.

#include <openssl/evp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/decision.h"
#include "proxy/dns/answer.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"
#include "proxy/session/exchange_state.h"

namespace sluice::proxy::session {

struct EvpMdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, EvpMdCtxFree>;

// Where the upstream connection of an exchange came from.
enum class UpstreamOrigin : std::uint8_t {
  Dialled,    // connected for this request
  Reused,     // the client's parked connection or a pooled one, re-checked for this request
  Redialled,  // a reused one closed unanswered: sent again, once, on a connection dialled for it
};

// What becomes of the upstream connection when the exchange is over.
enum class UpstreamAfter : std::uint8_t {
  Keep,   // parked for this client's next request (if its response allows keep-alive)
  Close,  // it sent bytes after its response, or answered before the request's end
};

// The sandbox's request rate: one token per request, allowed or not.
enum class RateToken : std::uint8_t { NotTaken, Taken };

// Whether the request's end was read before its upstream was ready: the whole body was held
// (HoldingBody), or a bodiless request is sent again on a new connection.
enum class RequestEnd : std::uint8_t { Pending, Read };

struct Exchange {
  ExchangeState state = ExchangeState::Idle;
  std::uint64_t started_ms = 0;
  // uv_hrtime() when it began, and when its DNS lookup or connect began: the latency
  // histograms want better than the loop's millisecond clock.
  std::uint64_t started_ns = 0;
  std::uint64_t phase_started_ns = 0;
  std::chrono::system_clock::time_point ts;

  // The request, as decided.
  std::string target_host;      // H as received
  std::string host;             // canonical H
  std::uint16_t port = 0;
  policy::Scheme scheme = policy::Scheme::Https;
  std::string method;
  std::string origin_target;    // forwarded target, origin form
  std::optional<std::string> host_header;  // as received
  std::string url;
  http::BodyFraming request_framing = http::BodyFraming::None;
  bool request_keep_alive = true;
  policy::Verdict verdict = policy::Verdict::Deny;
  policy::Reason policy_reason = policy::Reason::None;  // report mode: what enforcing would say
  std::string rule;
  // The rule of the latest decision that forwards it (after the addresses, when resolved): the
  // one whose `inject` applies.
  const policy::Rule* matched_rule = nullptr;
  bool injected = false;  // the head carries a secret: wipe the buffers it passed through
  RequestEnd request_end = RequestEnd::Pending;

  // Where it went.
  std::shared_ptr<const dns::Answer> answer;
  std::vector<policy::IpAddress> usable;
  std::size_t next_address = 0;
  bool saw_timeout = false;  // a dial ran out of connect_timeout: the failure is a timeout
  std::optional<policy::Endpoint> upstream;
  UpstreamOrigin origin = UpstreamOrigin::Dialled;
  UpstreamAfter after = UpstreamAfter::Keep;
  RateToken rate = RateToken::NotTaken;

  // What came back.
  int status = 0;
  http::ResponseFraming to_client = http::ResponseFraming::None;
  std::uint64_t req_bytes = 0;
  std::uint64_t resp_bytes = 0;
  bool hashing = false;  // audit.hash_bodies
  EvpMdCtxPtr req_hash;
  EvpMdCtxPtr resp_hash;

  bool inFlight() const { return session::inFlight(state); }
  bool responseBegun() const { return session::responseBegun(state); }

  // Clears everything for a new request (the state is the caller's); digests restart when
  // `hash` is set.
  void reset(std::uint64_t now_ms, bool hash);
};

}  // namespace sluice::proxy::session
