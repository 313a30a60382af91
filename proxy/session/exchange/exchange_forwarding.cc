// The exchange once it is allowed: an upstream from the connector, the head sluice writes (with
// the rule's injected headers), the body up and the response down with backpressure, masking
// an echoed secret, and the end: the record, the upstream parked or closed, or a failure (the
// stale-connection retry among them).
#include <spdlog/spdlog.h>

#include "proxy/runtime/generation.h"
#include "proxy/session/exchange/credential_brokering.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/session/exchange/exchange.h"
#include "proxy/session/upstream/http2_upstream_session.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy::session {

namespace {

// The methods whose repeat changes nothing at the origin (RFC 9110 section 9.2.1): the only
// ones sent again after an upstream closed without answering (docs/wire.md#upstreams). PUT and
// DELETE are idempotent too, but an origin that acted on the first copy would act on the
// second in a changed state.
bool safeToRepeat(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE";
}

}  // namespace

void Exchange::acquireUpstream(const policy::Decision& decision) {
  if (state_ != ExchangeState::AwaitingUpstream) {
    transition(ExchangeState::AwaitingUpstream);
  }
  if (slot_ == UpstreamSlot::None) {
    if (!host_.budget().takeUpstream(*this)) {
      // The connection's other requests use all the upstream connections it may have: this
      // one waits its turn (onUpstreamFree), and decides again then.
      slot_ = UpstreamSlot::Waiting;
      return;
    }
    slot_ = UpstreamSlot::Held;
  }
  Connector::Target target;
  target.decision = &decision;
  target.host = record_.host;
  target.port = record_.port;
  target.tls = record_.scheme == policy::Scheme::Https;
  target.fresh = origin_ == UpstreamOrigin::Redialled;
  target.h2 = target.tls && upgrade_ == http::Upgrade::None;
  connector_.start(target);
}

// --- what the connector reports

policy::Decision Exchange::decideWith(std::span<const policy::IpAddress> addresses,
                                      const policy::Decision* unresolved) {
  if (unresolved != nullptr) {
    // Decided for this request's facts, which have not changed since: check the addresses.
    return policy::decideAddresses(sandbox(), *unresolved, addresses, record_.port);
  }
  return decideRequest(addresses, true);
}

void Exchange::onAnswer(std::shared_ptr<const dns::Answer> answer) {
  record_.answer = std::move(answer);
}

void Exchange::onConnectedTo(const policy::Endpoint& address) { record_.upstream = address; }

void Exchange::onUpstreamReady(std::unique_ptr<UpstreamConnection> connection,
                               UpstreamOrigin origin, std::optional<const policy::Rule*> rule) {
  origin_ = origin;
  Http2UpstreamSessions* sessions = host_.context().h2_upstreams;
  if (connection->tls && connection->tls->alpn() == tls::kAlpnH2 && sessions != nullptr) {
    // The origin chose HTTP/2: the connection becomes a session the sandbox's later requests
    // to the same key share.
    Http2UpstreamSession* session =
        sessions->adopt(std::move(connection), host_.generation().config->limits.max_header_bytes);
    if (session == nullptr) {
      upstreamFailed(policy::Reason::UpstreamConnect, "cannot start HTTP/2 with the origin");
      return;
    }
    channel_ = &h2_;
    h2_.attachTo(*session, record_.method, downstream_.buffersResponse());
    releaseSlot();  // a stream of a shared session: no connection of its own
  } else {
    channel_ = &h1_;
    h1_.attach(std::move(connection), record_.method, upgrade_);
  }
  upstreamAttached(rule);
}

void Exchange::onSessionReady(Http2UpstreamSession& session,
                              std::optional<const policy::Rule*> rule) {
  origin_ = UpstreamOrigin::Reused;
  channel_ = &h2_;
  h2_.attachTo(session, record_.method, downstream_.buffersResponse());
  releaseSlot();  // a stream of a shared session: no connection of its own
  upstreamAttached(rule);
}

void Exchange::upstreamAttached(std::optional<const policy::Rule*> rule) {
  if (rule) {
    matched_rule_ = *rule;
  }
  record_.upstream_proto = channel_->protocol();
  startForwarding();
}

void Exchange::onUpstreamRefused(const policy::Decision& decision) {
  refuse(decision, record_.host, record_.method, record_.origin_target);
}

void Exchange::onUpstreamRefused(policy::Reason reason, std::string_view detail) {
  deny(reason, detail);
}

// --- the request upstream

void Exchange::startForwarding() {
  // Again with the rule that allowed the address actually dialled (it may not be the one that
  // allowed the name).
  if (refuseSecretMisuse()) {
    return;
  }
  transition(ExchangeState::SendingRequest);
  std::string host_value = canonicalAuthority();
  // Credential brokering: the rule's headers replace the sandbox's.
  injectedFields(matched_rule_, *host_.generation().secrets, inject_fields_);
  injected_ = !inject_fields_.empty();
  if (metadata_.planned()) {
    metadata_.requestFields(inject_fields_);  // gzip or identity, whole, a form with times
  }
  channel_->sendHead(*head_, fetchingPublishTime() ? publish_time_target_ : record_.origin_target,
                     host_value, inject_fields_);
  record_.req_body_read = true;  // what body it has is relayed from here
  if (state_ != ExchangeState::SendingRequest || host_.closing()) {
    return;  // the channel failed at once (a write, a stream it could not open): answered
  }
  if (!held_body_.empty()) {
    // What HoldingBody read, in the framing sluice forwards with, ahead of the rest.
    channel_->sendBody(held_body_);
    std::string().swap(held_body_);
  }
  if (request_end_ == RequestEnd::Read) {
    // The whole body was held, or a bodiless request is sent again: its end is here already.
    channel_->sendEnd(request_trailers_, inject_fields_);
    transition(ExchangeState::AwaitingResponse);
  }
  host_.noteProgress();
  host_.armTimer();
  host_.updateReading();
  downstream_.resumeRequest();  // the body, and a bodiless request's end
}

std::string Exchange::canonicalAuthority() const {
  std::string value =
      record_.host.find(':') != std::string::npos ? "[" + record_.host + "]" : record_.host;
  if (record_.port != policy::defaultPort(record_.scheme)) {
    value += ':' + std::to_string(record_.port);
  }
  return value;
}

void Exchange::onRequestBody(std::span<const char> data) {
  record_.req_body_read = true;
  record_.req_bytes += data.size();
  if (record_.hashing) {
    EVP_DigestUpdate(record_.req_hash.get(), data.data(), data.size());
  }
  if (state_ == ExchangeState::HoldingBody) {
    held_body_.append(data.data(), data.size());
    return;
  }
  if (state_ == ExchangeState::FinishingRequest) {
    return;  // the upstream already answered: the rest of the body goes nowhere
  }
  channel_->sendBody(data);
}

bool Exchange::takesBody() const {
  switch (state_) {
    case ExchangeState::HoldingBody:
      return holdsMore();
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
    case ExchangeState::FinishingRequest:
    case ExchangeState::Tunneling:  // the WebSocket's bytes (an HTTP/1.1 codec relays them raw)
      return true;
    default:
      return false;  // deciding, or waiting for an upstream: the body waits
  }
}

void Exchange::onRequestEnd(const http::HeaderBlock* trailers) {
  if (trailers != nullptr && !trailers->empty()) {
    request_trailers_ = trailers;
    if (refuseMisusedTrailers(*trailers)) {
      return;
    }
  }
  switch (state_) {
    case ExchangeState::HoldingBody:
      request_end_ = RequestEnd::Read;  // sent, with its end, when forwarding starts
      return;
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
      channel_->sendEnd(request_trailers_, inject_fields_);
      transition(state_ == ExchangeState::SendingRequest ? ExchangeState::AwaitingResponse
                                                         : ExchangeState::Responding);
      return;
    case ExchangeState::FinishingRequest:
      finish();  // the response was complete already
      return;
    default:
      return;  // (the request is read in no other state)
  }
}

// --- the response down

const SecretPatterns* Exchange::maskPatterns() const {
  return injected_ ? &host_.generation().secrets->patterns() : nullptr;
}

void Exchange::onInterimHead(const http::ResponseHead& head) {
  if (fetchingPublishTime()) {
    return;  // (a 1xx to sluice's own request for a packument is not the client's)
  }
  relay_.interimHead(head, maskPatterns());
}

void Exchange::onResponseHead(const http::ResponseHead& head) {
  if (fetchingPublishTime()) {
    publishTimeHead(head);  // sluice's own request: nothing of its answer is the client's
    return;
  }
  record_.status = head.status;
  record_.resp_body_read = true;
  if (head.framing == http::ResponseFraming::Switched) {
    switchToWebSocket(head);
    return;
  }
  if (upgrade_ == http::Upgrade::WebSocket && head.status / 100 == 2 &&
      downstream_.successMeansSwitched()) {
    // The origin declined the WebSocket with an ordinary answer (200 and a body): to an HTTP/2
    // client that 2xx would say the tunnel is open, and the body would read as its bytes.
    deny(policy::Reason::UpstreamConnect, "the origin answered the WebSocket upgrade with " +
                                              std::to_string(head.status) +
                                              ", not 101 Switching Protocols");
    return;
  }
  if (refuseEncodedResponse(head)) {
    return;
  }
  if (metadata_.planned()) {
    std::string detail;
    if (const policy::Reason refused = metadata_.holdHead(head, detail);
        refused != policy::Reason::None) {
      deny(refused, detail);
      return;
    }
    if (metadata_.holding()) {
      transition(ExchangeState::HoldingResponse);  // (a GET of metadata has no body to send)
      return;
    }
  }
  relay_.head(head, maskPatterns());
  if (host_.closing()) {
    return;
  }
  transition(state_ == ExchangeState::SendingRequest ? ExchangeState::RespondingWhileSending
                                                     : ExchangeState::Responding);
}

// The origin accepted the WebSocket (a 101 to it: the parser takes no other): the head goes to
// the client, then bytes flow both ways, counted as the request's and the response's, until the
// origin closes (the client's close is passed on to it: onClientClosed) or idle_timeout. Frames
// are relayed, not inspected or masked (docs/wire.md#websocket).
void Exchange::switchToWebSocket(const http::ResponseHead& head) {
  if (state_ != ExchangeState::AwaitingResponse) {
    upstreamFailed(policy::Reason::UpstreamConnect, "101 before the request was complete");
    return;
  }
  after_ = UpstreamAfter::Close;  // the upstream connection is the WebSocket's
  relay_.head(head, nullptr);
  if (host_.closing()) {
    return;
  }
  downstream_.switchedProtocols();
  transition(ExchangeState::Tunneling);
  downstream_.resumeRequest();  // what the client sent before the 101, then as it comes
}

// A content coding (gzip, br, deflate, zstd, an encrypted one...) hides an echoed secret from the
// masking, which reads the bytes as they come. sluice asked for identity, so an answer coded
// anyway is not forwarded: 502 before its head goes out, with upstream_connect, the stable
// reason for an upstream that gave sluice nothing it can forward (as for a malformed answer).
bool Exchange::refuseEncodedResponse(const http::ResponseHead& head) {
  if (!injected_ || !codedBody(head)) {
    return false;
  }
  // The coding's name is the upstream's text: it stays out of the answer and the log.
  deny(policy::Reason::UpstreamConnect,
       "the upstream answered with a Content-Encoding (compressed or otherwise encoded) "
       "although sluice asked for identity: a secret it echoes could not be masked, so the "
       "answer is not forwarded");
  return true;
}

void Exchange::onResponseBody(std::span<const char> data) {
  if (state_ == ExchangeState::HoldingResponse) {
    if (downstream_.buffersResponse()) {
      channel_->bodyTaken(data.size());  // held here, charged to the sandbox: not the client's
    }
    std::string detail;
    if (const policy::Reason refused = metadata_.feed(data, detail);
        refused != policy::Reason::None) {
      after_ = UpstreamAfter::Close;  // (its answer is cut off mid-body)
      deny(refused, detail);
    }
    return;
  }
  record_.resp_bytes += data.size();
  if (record_.hashing) {
    EVP_DigestUpdate(record_.resp_hash.get(), data.data(), data.size());
  }
  relay_.body(data, record_.resp_bytes);
}

void Exchange::onResponseComplete(bool more) {
  // Bytes after the response: the upstream is in no known state, never reuse it.
  after_ = more ? UpstreamAfter::Close : UpstreamAfter::Keep;
  if (state_ == ExchangeState::HoldingResponse && fetchingPublishTime()) {
    publishTimeFetched();
    return;
  }
  if (state_ == ExchangeState::HoldingResponse) {
    if (!serveHeldMetadata()) {
      return;
    }
  } else {
    relay_.end(channel_->trailers());
  }
  if (state_ == ExchangeState::RespondingWhileSending) {
    // The upstream answered before the request body ended (a 413, a redirect). Neither
    // connection is in a known state any more: finish this exchange and close both.
    after_ = UpstreamAfter::Close;
    downstream_.requestCutShort();
  }
  finish();
}

void Exchange::onResponseEndedByClose() {
  if (state_ == ExchangeState::HoldingResponse && fetchingPublishTime()) {
    after_ = UpstreamAfter::Close;
    publishTimeFetched();
    return;
  }
  if (state_ == ExchangeState::HoldingResponse) {
    after_ = UpstreamAfter::Close;
    if (serveHeldMetadata()) {
      finish();
    }
    return;
  }
  relay_.end();
  if (state_ == ExchangeState::RespondingWhileSending) {
    // The rest of the request body is read and dropped; the exchange completes at its end.
    transition(ExchangeState::FinishingRequest);
    channel_->release(false, after_ == UpstreamAfter::Keep);
    return;
  }
  channel_->release(false, after_ == UpstreamAfter::Keep);
  finish();
}

// The document sent in place of the origin's: its head, then its body whole, counted and
// hashed as the bytes the client got (docs/audit.md). The trailers of the origin's are not
// its: none are sent.
bool Exchange::serveHeldMetadata() {
  PublishTimes& known = *host_.runtime().publish_times;
  const MetadataFacts facts{host_.sandboxView().advisories, unixTimeMs(), &known};
  const ServedMetadata& served = metadata_.finish(*sandbox().policy->packages, facts);
  known.learn(record_.package.package.ecosystem, record_.package.package.name, served.published);
  known.learnPypiFiles(record_.package.package.name, served.uploaded);
  record_.package.filtered = true;
  record_.package.removed = served.removed;
  if (served.reason != policy::Reason::None) {
    record_.package.advisory = served.advisory;
    deny(served.reason, served.detail);
    return false;
  }
  transition(ExchangeState::Responding);
  relay_.head(metadata_.servedHead(), maskPatterns());
  if (host_.closing()) {
    return false;
  }
  const std::span<const char> body = metadata_.servedBody();
  record_.resp_bytes = body.size();
  if (record_.hashing) {
    EVP_DigestUpdate(record_.resp_hash.get(), body.data(), body.size());
  }
  // All but its last byte as ordinary body bytes, then the byte that completes the response: a
  // connection gathers a response's completing bytes until its callback ends, which suits a
  // read's worth, not a document of many MiB.
  if (body.size() > 1) {
    relay_.body(body.first(body.size() - 1), body.size() - 1);
  }
  if (!body.empty() && !host_.closing()) {
    relay_.body(body.last(1), body.size());
  }
  if (host_.closing()) {
    return false;
  }
  relay_.end();
  return !host_.closing();
}

void Exchange::finish() {
  if (!inFlight() || host_.closing()) {
    return;
  }
  writeRecord(record_.verdict, record_.outcomeReason(), record_.status);
  releaseAnsweredUpstream();
  if (host_.closing()) {
    return;  // (writing what was corked for the upstream failed)
  }
  transition(ExchangeState::Complete);
  host_.onExchangeOver(ExchangeState::Complete);
}

void Exchange::releaseAnsweredUpstream() {
  const bool reusable =
      channel_->attached() && channel_->responseKeepsAlive() && after_ == UpstreamAfter::Keep;
  channel_->release(reusable, after_ == UpstreamAfter::Keep);
}

// A failure on the way to or from the upstream. Before the response head went out, the client
// gets sluice's own answer (502/504 with the reason); after, the only honest signal left is to
// cut the connection, and the audit record says why.
void Exchange::onUpstreamFailed(policy::Reason reason, std::string_view detail) {
  upstreamFailed(reason, detail);
}

void Exchange::upstreamFailed(policy::Reason reason, std::string_view detail) {
  if (host_.closing()) {
    return;
  }
  SPDLOG_DEBUG("[C{}] upstream failed ({}): {}", host_.facts().id, policy::toString(reason),
               detail);
  if (!inFlight()) {
    host_.close(detail);  // (no request to answer)
    return;
  }
  // A reused connection that the upstream closed (or had closed) without a byte of answer to a
  // whole bodiless request: the connection may have died idle, or the origin may have read the
  // request, acted on it and gone. sluice cannot tell which, so only a request that is safe to
  // repeat is sent again: once, on a connection dialled for it (the connector skips the pool).
  // Any other gets its 502 here and has reached the origin at most once.
  const bool stale = origin_ == UpstreamOrigin::Reused &&
                     state_ == ExchangeState::AwaitingResponse &&
                     framing_ != http::BodyFraming::Chunked && record_.req_bytes == 0 &&
                     reason == policy::Reason::UpstreamConnect;
  if (stale && safeToRepeat(record_.method)) {
    origin_ = UpstreamOrigin::Redialled;
    request_end_ = RequestEnd::Read;
    channel_->drop();
    acquireUpstream(decideRequest({}, false));
    return;
  }
  if (stale) {
    deny(reason, "a reused upstream connection ended before the answer (" + std::string(detail) +
                     "); a " + record_.method +
                     " is not sent again: the origin may have acted on it");
    return;
  }
  if (!responseBegun()) {
    deny(reason, detail);
    return;
  }
  writeRecord(record_.verdict, reason, record_.status);
  transition(ExchangeState::Failed);
  host_.close(detail);
}

}  // namespace sluice::proxy::session
