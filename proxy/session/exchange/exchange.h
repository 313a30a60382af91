#pragma once
// One request, from its head to its audit record: the facts are decided on (policy::decide()),
// the sandbox's rate token taken, placeholders of secrets looked for (in the head, and with
// secrets configured in the body's first 64 KiB, held before anything is dialled), an upstream
// found (Connector), the head sluice writes sent with the rule's injected headers
// (UpstreamChannel), the body forwarded up and the response down (masked when a secret was
// injected), then the record and the metrics. Its machine is kExchangeMachine
// (exchange_state.h).
//
// It knows nothing of framing: the request head it is given is already parsed and checked by
// the connection's codec, which also writes every byte the client gets (Downstream); the
// upstream channel frames and parses the upstream's side. Its host (ExchangeHost: the codec,
// the connection's for the rest) says who the client is, hears that it is over, and takes back
// the upstream connection between exchanges. It knows no codec (the layering test keeps it so).
//
// Ownership: a codec owns its exchanges; an exchange owns its connector and its upstream
// channel. The HTTP/1.1 codec keeps one Exchange and reuses it for each request, and the
// HTTP/2 codec keeps a few finished streams for reuse, so their buffers keep their capacity
// (no allocation per request once they have grown).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.h"
#include "proxy/http/head_writer.h"
#include "proxy/http/request_parser.h"
#include "proxy/session/exchange/connector.h"
#include "proxy/session/exchange/downstream.h"
#include "proxy/session/exchange/exchange_host.h"
#include "proxy/session/exchange/exchange_state.h"
#include "proxy/session/exchange/metadata_hold.h"
#include "proxy/session/exchange/request_record.h"
#include "proxy/session/exchange/response_relay.h"
#include "proxy/session/upstream/http1_upstream.h"
#include "proxy/session/upstream/http2_upstream_stream.h"

namespace sluice::proxy::session {

// What becomes of the upstream connection when the exchange is over.
enum class UpstreamAfter : std::uint8_t {
  Keep,   // parked for this client's next request (if its response allows keep-alive)
  Close,  // it sent bytes after its response, or answered before the request's end
};

// Whether the request's end was read before its upstream was ready: the whole body was held
// (HoldingBody), or a bodiless request is sent again on a new connection.
enum class RequestEnd : std::uint8_t { Pending, Read };

class Exchange final : private ConnectorClient, private UpstreamEvents, private UpstreamWaiter {
 public:
  // How much of a request body is looked at for placeholders (docs/wire.md#credential-brokering).
  static constexpr std::size_t kBodyScanBytes = 64 * 1024;

  Exchange(ExchangeHost& host, Downstream& downstream, std::size_t max_header_bytes);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  ExchangeState state() const { return state_; }
  bool inFlight() const { return session::inFlight(state_); }
  bool responseBegun() const { return session::responseBegun(state_); }
  // What its record will say; the connection fills in what it knows (a CONNECT's target...).
  RequestRecord& record() { return record_; }

  // --- beginning
  // A new record (for a request, or for a refusal of the connection's own): Deciding.
  void beginRecord(bool hash);
  // A request: its head (valid until the exchange is over: the codec keeps it), the target it
  // names on its connection (request_target.h), then decide(), or its refusal.
  void startRequest(const http::RequestHead& head, bool hash);
  // Refused where no answer can be sent (an HTTP/2 stream reset as malformed): its record, with
  // the token it takes, and the refusal's log line (`detail` says why).
  void refuseWithoutAnswer(policy::Reason reason, std::string_view detail);

  // --- the request's bytes, from the codec
  // HoldingBody, and more of the body may be held (the codec reads on).
  bool holdsMore() const;
  // Request body bytes are taken now (HoldingBody while more may be held, or forwarding), before
  // the upstream's backpressure, which the codec applies: both codecs ask this.
  bool takesBody() const;
  // The connector resolves, dials or handshakes: the request waits.
  bool connectorWorking() const { return connector_.working(); }
  // It waits for an upstream connection of its own (ConnectionBudget::takeUpstream): its idle
  // time does not run meanwhile.
  bool waitsForUpstream() const { return slot_ == UpstreamSlot::Waiting; }
  void onRequestBody(std::span<const char> data);
  // The request's end, with its trailer fields (null: none; valid until the exchange is over:
  // the codec keeps them), forwarded where the upstream's framing has room
  // (docs/wire.md#request-trailers).
  void onRequestEnd(const http::HeaderBlock* trailers = nullptr);
  // HoldingBody is over (64 KiB held, or the whole body): scan, then deny or go upstream.
  bool holdingDone() const;
  void finishHolding();

  // --- endings
  // sluice's own answer (status, reason, record), unless the response began; the connection
  // then ends (HTTP/1.1).
  void deny(policy::Reason reason, std::string_view detail);
  // deny() for a decision that does not forward, explained from the request's `host`, `method`
  // and `target`; for ip_denied, the addresses refused go on record and into the explanation.
  void refuse(const policy::Decision& decision, std::string_view host, std::string_view method,
              std::string_view target);
  // The client closed its side while this exchange was in flight.
  void onClientClosed();
  // The connection closes under the exchange: its record says what was sent so far.
  void abandon();
  // idle_timeout (or the connector's deadline) ran out while it waited or forwarded. True if
  // it acted.
  bool onTimeout(bool connector_deadline_over);
  // The connection ends politely: the connector stops; the upstream's corked bytes are written
  // and it is closed.
  void releaseUpstream();
  // The connection closes now: the connector stops, the upstream is closed as it is.
  void dropUpstream();

  // --- the connection's reading and writing
  bool upstreamBackedUp() const { return channel_->backedUp(); }
  // The client took `bytes` of the answer its downstream held (Downstream::buffersResponse).
  // (A filtered document's bytes were never the origin's to count: its window reopened as
  // they were held.)
  void onResponseTaken(std::size_t bytes) {
    if (!metadata_.replacesOriginBody()) {
      channel_->bodyTaken(bytes);
    }
  }
  void updateUpstreamReading(bool client_backed_up);
  void flushCorkedUpstream() { channel_->flushCorked(); }
  void discardCorkedUpstream() { channel_->discardCorked(); }
  // The earliest deadline of the exchange (its connector's; 0: none).
  std::uint64_t deadline() const { return connector_.deadline(); }
  void releaseBuffers();
  // Writes the record (verdict, reason, status) with the connection's facts.
  void writeRecord(policy::Verdict verdict, policy::Reason reason, int status);

 private:
  // --- ConnectorClient
  policy::Decision decideWith(std::span<const policy::IpAddress> addresses,
                              const policy::Decision* unresolved) override;
  void onAnswer(std::shared_ptr<const dns::Answer> answer) override;
  void onConnectedTo(const policy::Endpoint& address) override;
  void onUpstreamReady(std::unique_ptr<UpstreamConnection> connection, UpstreamOrigin origin,
                       std::optional<const policy::Rule*> rule) override;
  void onSessionReady(Http2UpstreamSession& session,
                      std::optional<const policy::Rule*> rule) override;
  void onUpstreamRefused(const policy::Decision& decision) override;
  void onUpstreamRefused(policy::Reason reason, std::string_view detail) override;
  // --- UpstreamEvents (and ConnectorClient::onUpstreamFailed)
  void onInterimHead(const http::ResponseHead& head) override;
  void onResponseHead(const http::ResponseHead& head) override;
  void onResponseBody(std::span<const char> data) override;
  void onResponseComplete(bool more) override;
  void onResponseEndedByClose() override;
  void onUpstreamFailed(policy::Reason reason, std::string_view detail) override;
  // --- UpstreamWaiter: its turn for an upstream connection came
  void onUpstreamFree() override;
  // Gives back the connection's share of upstream connections it held (or waited for).
  void releaseSlot();

  bool transition(ExchangeState next);
  // The request's head and the facts it gives (then its target, then decide()).
  void beginRequest(const http::RequestHead& head, bool hash);
  // The request's facts are complete: decide(), the rate token, placeholders; then deny, hold
  // the body, or look for an upstream.
  void decide();
  // Takes this request's token of the sandbox's rate, once per request; false: there was none.
  bool chargeRequest();
  const policy::Sandbox& sandbox() const;
  // The package firewall on a request of a registry rule; true when it refused the request.
  // A request it serves whose metadata is filtered gets its plan (metadata_).
  bool refusePackage(policy::Decision& d);
  // The age rule on a file whose publish time the sandbox never learned (a lockfile install,
  // a direct URL): its package's metadata (npm's packument, PyPI's simple page) is fetched
  // first from the same origin, on the same upstream, to learn it
  // (docs/packages.md#the-age-rule). True when the fetch is planned.
  bool planPublishTimeFetch(const policy::Rule& rule);
  bool fetchingPublishTime() const { return !publish_time_target_.empty(); }
  // The metadata's head, then its whole body: held, the times learned, then the file refused
  // or requested in its turn.
  void publishTimeHead(const http::ResponseHead& head);
  void publishTimeFetched();
  // The held metadata's body is whole: the filtered document goes to the client with its own
  // head (Responding), or its refusal (false: Denied, or the connection closed).
  bool serveHeldMetadata();
  const policy::Config& config() const;
  // decide() on the request's facts; `addresses` once H is resolved.
  policy::Decision decideRequest(std::span<const policy::IpAddress> addresses, bool resolved);
  // Takes the token; without one, answers 429 rate_limited (true).
  bool overRequestRate();
  // A placeholder in the target or a header value, of a secret the matched rule does not
  // inject: secret_misuse (true).
  bool refuseSecretMisuse();
  // The same in the request's trailers, read after its head went upstream: the origin never
  // gets the request's end (true).
  bool refuseMisusedTrailers(const http::HeaderBlock& trailers);
  // secret_misuse's detail: `where` carries the placeholder of `secret`.
  std::string misuseDetail(std::string_view where, const policy::Secret& secret) const;
  void acquireUpstream(const policy::Decision& decision);
  // The upstream is ready: the channel is attached (`rule`: the one whose `inject` applies).
  void upstreamAttached(std::optional<const policy::Rule*> rule);
  // The head sluice writes, what HoldingBody read, and then the rest of the request.
  void startForwarding();
  // "host[:port]" as sluice writes it upstream: canonical H, the port only when not the default.
  std::string canonicalAuthority() const;
  // The answer to an injecting exchange has a content coding sluice cannot look into: 502
  // instead of forwarding it. True when it did.
  bool refuseEncodedResponse(const http::ResponseHead& head);
  void switchToWebSocket(const http::ResponseHead& head);
  // The secrets the response is masked for: those of this generation when the exchange
  // injected any, else none.
  const SecretPatterns* maskPatterns() const;
  // Both the request and the response are over: the record, then the next request or the end.
  void finish();
  // The response is over: the upstream is parked for this client when it may carry another
  // request, else closed.
  void releaseAnsweredUpstream();
  // A failure on the way to or from the upstream (the stale-connection retry included).
  void upstreamFailed(policy::Reason reason, std::string_view detail);

  ExchangeHost& host_;
  Downstream& downstream_;
  ExchangeState state_ = ExchangeState::Idle;
  RequestRecord record_;
  const http::RequestHead* head_ = nullptr;  // the request's, while it is in flight
  http::BodyFraming framing_ = http::BodyFraming::None;
  // The rule of the latest decision that forwards it (after the addresses, when resolved): the
  // one whose `inject` applies.
  const policy::Rule* matched_rule_ = nullptr;
  RequestEnd request_end_ = RequestEnd::Pending;
  const http::HeaderBlock* request_trailers_ = nullptr;  // with the request's end, if any
  // WebSocket: the request asked for one and was allowed it; asked of the origin.
  http::Upgrade upgrade_ = http::Upgrade::None;
  UpstreamOrigin origin_ = UpstreamOrigin::Dialled;
  UpstreamAfter after_ = UpstreamAfter::Keep;
  RateToken rate_ = RateToken::NotTaken;
  // Its share of the connection's upstream connections (ConnectionBudget::kUpstreams): none,
  // waited for, or held from the connector's start until it forwards on a shared HTTP/2
  // session or is over.
  enum class UpstreamSlot : std::uint8_t { None, Waiting, Held };
  UpstreamSlot slot_ = UpstreamSlot::None;
  // HoldingBody: the decoded start of the body (a little over 64 KiB at most), scanned for
  // placeholders before anything is forwarded; sent ahead of the rest once forwarding starts.
  std::string held_body_;
  std::vector<http::HeaderField> inject_fields_;  // the rule's injected headers; reused
  // The rule injected a secret (inject_fields_ also carries the fields asked for metadata): the
  // response is masked.
  bool injected_ = false;
  // A package's metadata to hold and filter (docs/packages.md#metadata).
  MetadataHold metadata_;
  // While the packument of a file's package is fetched for its publish time: its target.
  std::string publish_time_target_;
  ResponseRelay relay_;
  Connector connector_;
  // The request's upstream: h1_ on an HTTP/1.1 connection, h2_ a stream of a shared HTTP/2
  // session (docs/wire.md#http2-toward-origins); channel_ is the one in use (h1_ when none).
  Http1Upstream h1_;
  Http2UpstreamStream h2_;
  UpstreamChannel* channel_ = &h1_;
};

}  // namespace sluice::proxy::session
