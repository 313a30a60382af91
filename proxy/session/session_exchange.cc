// The request half of the session: deciding each request head, resolving H, connecting to the
// usable addresses (or taking a pooled connection), upstream TLS, and forwarding the exchange
// in both directions with backpressure, then its audit record.
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "policy/authority.h"
#include "policy/secret_use.h"
#include "proxy/gateway_state.h"
#include "proxy/generation.h"
#include "proxy/http/head_writer.h"
#include "proxy/session/denial.h"
#include "proxy/session/session.h"

namespace sluice::proxy::session {

namespace {

constexpr std::size_t kPlainChunk = 16 * 1024;
thread_local char t_upstream_plain[kPlainChunk];

// How long a keep-alive connection idles before its buffers are given back.
constexpr std::uint64_t kReleaseIdleBuffersMs = 1000;

// The path part of the url in an audit record: the origin-form target, or nothing for
// "OPTIONS *", whose target URI is the authority alone (RFC 9110 §7.1).
std::string_view urlPath(std::string_view target) { return target == "*" ? "" : target; }

std::uint16_t defaultPort(policy::Scheme scheme) {
  return scheme == policy::Scheme::Https ? 443 : 80;
}

// The methods whose repeat changes nothing at the origin (RFC 9110 §9.2.1): the only ones sent
// again after an upstream closed without answering (README "Sending a request again"). PUT and
// DELETE are idempotent too, but an origin that acted on the first copy would act on the second in
// a changed state.
bool safeToRepeat(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE";
}

}  // namespace

void Exchange::reset(std::uint64_t now_ms, bool hash) {
  started_ms = now_ms;
  started_ns = uv_hrtime();
  phase_started_ns = 0;
  ts = std::chrono::system_clock::now();
  target_host.clear();
  host.clear();
  port = 0;
  scheme = policy::Scheme::Https;
  method.clear();
  origin_target.clear();
  host_header.reset();
  url.clear();
  request_framing = http::BodyFraming::None;
  request_keep_alive = true;
  verdict = policy::Verdict::Deny;
  policy_reason = policy::Reason::None;
  rule.clear();
  matched_rule = nullptr;
  injected = false;
  request_end = RequestEnd::Pending;
  answer.reset();
  usable.clear();
  next_address = 0;
  saw_timeout = false;
  upstream.reset();
  origin = UpstreamOrigin::Dialled;
  after = UpstreamAfter::Keep;
  rate = RateToken::NotTaken;
  status = 0;
  to_client = http::ResponseFraming::None;
  req_bytes = 0;
  resp_bytes = 0;
  hashing = hash;
  if (hash) {
    if (!req_hash) {
      req_hash.reset(EVP_MD_CTX_new());
      resp_hash.reset(EVP_MD_CTX_new());
    }
    EVP_DigestInit_ex(req_hash.get(), EVP_sha256(), nullptr);
    EVP_DigestInit_ex(resp_hash.get(), EVP_sha256(), nullptr);
  }
}

void Session::beginRecord(bool hash) {
  exchange_.reset(uv_now(ctx_.loop), hash);
  transition(ExchangeState::Deciding);
}

// ---------------------------------------------------------------------------------------------
// Deciding a request.

// The facts of the request whose head the parser holds, for decide(). `addresses` once H is
// resolved. The parser is paused at the head, so its views stay valid.
policy::Decision Session::decideRequest(std::span<const policy::IpAddress> addresses,
                                        bool resolved) {
  const http::RequestHead& head = request_parser_.head();
  policy::RequestHead request;
  request.method = head.method;
  request.target = exchange_.origin_target;
  request.host_count = static_cast<int>(head.host_count);
  request.host = head.host;
  request.absolute_form = head.absolute_form;
  request.uri_authority = head.uri_authority;
  policy::RequestFacts facts;
  facts.target_host = exchange_.target_host;
  facts.port = exchange_.port;
  facts.scheme = exchange_.scheme;
  if (tunnel()) {
    facts.sni_state = sni_state_;
    facts.sni = sni_;
  }
  facts.request = &request;
  facts.resolved = resolved;
  facts.addresses = addresses;
  return policy::decide(sandbox(), facts);
}

// Every request of the sandbox takes a token, allowed or not (a refused one costs a record):
// a sandbox over its rate gets 429s, and the others keep their share of the gateway.
bool Session::chargeRequest() {
  if (exchange_.rate == RateToken::Taken) {
    return true;
  }
  exchange_.rate = RateToken::Taken;
  return view_->rate == nullptr || view_->rate->take(uv_hrtime());
}

std::string Session::rateLimitDetail() const {
  return "sandbox '" + sandbox().name + "' is over its limit of " +
         std::to_string(sandbox().limits.requests_per_second.value_or(0)) + " requests per second";
}

bool Session::overRequestRate() {
  if (chargeRequest()) {
    return false;
  }
  exchange_.rule.clear();
  deny(policy::Reason::RateLimited, rateLimitDetail());
  return true;
}

void Session::onRequestHead() {
  if (!takeUpCurrentGeneration() || refuseIfAuditUnavailable()) {
    return;
  }
  const http::RequestHead& head = request_parser_.head();
  release_deadline_ms_ = 0;
  beginRecord(config().audit.hash_bodies);
  exchange_.method.assign(head.method);
  exchange_.request_framing = head.framing;
  exchange_.request_keep_alive = head.keep_alive;
  if (head.host_count >= 1) {
    exchange_.host_header.emplace(head.host_count == 1 ? head.host
                                                       : head.headers.find("host").value_or(""));
  }
  exchange_.origin_target.assign(head.absolute_form ? head.origin_target : head.target);

  if (tunnel()) {
    exchange_.scheme = policy::Scheme::Https;
    exchange_.target_host = connect_host_;
    exchange_.port = connect_port_;
    exchange_.url = "https://" + connect_authority_ + std::string(urlPath(exchange_.origin_target));
    // Inside the tunnel an absolute-form target may only name the tunnel's own https origin
    // (BYPASSES S5); decide() checks its authority against H like the Host header.
    if (head.absolute_form && !http::ascii::iequals(head.uri_scheme, "https")) {
      deny(policy::Reason::BadRequest, "absolute-form target of another scheme inside TLS");
      return;
    }
  } else if (mode_ == audit::Mode::Transparent) {
    // Transparent plain HTTP: H is the Host, the port the one the sandbox dialled. The address
    // it dialled is never used (BYPASSES S4): sluice resolves the Host itself.
    exchange_.scheme = policy::Scheme::Http;
    exchange_.port = orig_dst_ ? orig_dst_->port : 80;
    exchange_.url =
        "http://" + std::string(head.host) + std::string(urlPath(exchange_.origin_target));
    if (head.host_count == 0) {
      deny(policy::Reason::HostMissing, "the request has no Host header");
      return;
    }
    if (head.host_count > 1) {
      deny(policy::Reason::HostDuplicate, "the request has more than one Host header");
      return;
    }
    if (head.absolute_form && !http::ascii::iequals(head.uri_scheme, "http")) {
      deny(policy::Reason::BadRequest, "absolute-form target of another scheme");
      return;
    }
    auto authority = policy::parseAuthority(head.host, policy::PortRule::Optional);
    exchange_.target_host.assign(authority ? authority->host : head.host);
  } else {
    exchange_.url.assign(head.target);
    if (!head.absolute_form) {
      deny(policy::Reason::BadRequest, "a request to a proxy needs an absolute URL");
      return;
    }
    if (http::ascii::iequals(head.uri_scheme, "https")) {
      deny(policy::Reason::BadRequest, "https URLs go through CONNECT");
      return;
    }
    if (!http::ascii::iequals(head.uri_scheme, "http")) {
      deny(policy::Reason::NotAllowedScheme, head.uri_scheme);
      return;
    }
    auto authority = policy::parseAuthority(head.uri_authority, policy::PortRule::Optional);
    if (!authority) {
      deny(policy::Reason::BadRequest, policy::toString(authority.error()));
      return;
    }
    exchange_.scheme = policy::Scheme::Http;
    exchange_.target_host.assign(authority->host);
    exchange_.port = authority->port.value_or(80);
  }

  policy::Decision d = decideRequest({}, false);
  exchange_.host.assign(d.host.text());
  exchange_.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!exchange_.host.empty()) {
    exchange_.url = (exchange_.scheme == policy::Scheme::Https ? "https://" : "http://") +
                    d.host.authorityText();
    if (exchange_.port != defaultPort(exchange_.scheme)) {
      exchange_.url += ':' + std::to_string(exchange_.port);
    }
    exchange_.url += urlPath(exchange_.origin_target);
  }
  if (overRequestRate()) {
    return;
  }
  if (!d.forwards()) {
    deny(d.reason, explainDenial(d.reason, sandbox().name,
                                 exchange_.host.empty() ? exchange_.target_host : exchange_.host,
                                 exchange_.method, exchange_.origin_target));
    return;
  }
  exchange_.verdict = d.verdict;
  exchange_.policy_reason = d.reason;
  exchange_.matched_rule = d.rule;
  if (refuseSecretMisuse()) {
    return;  // before any DNS query or connection for it
  }
  held_body_.clear();
  if (!config().secrets.empty() && exchange_.request_framing != http::BodyFraming::None) {
    // A placeholder may also be in the body (SPEC §5.5): its first 64 KiB is read and looked at
    // before anything is forwarded or even resolved. A client waiting for 100-continue gets it
    // from sluice, or it would wait for an upstream that is not asked yet.
    transition(ExchangeState::HoldingBody);
    if (head.expect_continue) {
      sendClient("HTTP/1.1 100 Continue\r\n\r\n");
    }
    return;  // processClientPlaintext() reads the body on, then finishHolding()
  }
  acquireUpstream(d);
}

void Session::finishHolding() {
  std::string_view scanned(held_body_);
  scanned = scanned.substr(0, kBodyScanBytes);
  const policy::Rule* rule = exchange_.matched_rule;
  if (const policy::Secret* misused = policy::misusedSecret(config().secrets, rule, scanned)) {
    deny(policy::Reason::SecretMisuse,
         "the request body carries the placeholder of secret '" + misused->name + "', which " +
             (rule != nullptr ? "rule '" + rule->name + "' does not inject"
                              : std::string("no rule injects here")));
    return;
  }
  acquireUpstream(decideRequest({}, false));
}

// SPEC §5.5: a placeholder in any header value or in the target, of a secret the allowing rule
// does not inject, is `secret_misuse`: denied before anything is forwarded, and on record.
bool Session::refuseSecretMisuse() {
  const auto& secrets = config().secrets;
  if (secrets.empty()) {
    return false;
  }
  const http::RequestHead& head = request_parser_.head();
  const policy::Rule* rule = exchange_.matched_rule;
  const policy::Secret* misused = policy::misusedSecret(secrets, rule, head.target);
  for (std::size_t i = 0; misused == nullptr && i < head.headers.size(); ++i) {
    misused = policy::misusedSecret(secrets, rule, head.headers.value(i));
  }
  if (misused == nullptr) {
    return false;
  }
  deny(policy::Reason::SecretMisuse,
       "the request carries the placeholder of secret '" + misused->name + "', which " +
           (rule != nullptr ? "rule '" + rule->name + "' does not inject"
                            : std::string("no rule injects here")));
  return true;
}

void Session::onRequestComplete() {
  switch (exchange_.state) {
    case ExchangeState::HoldingBody:
      exchange_.request_end = RequestEnd::Read;  // sent, with its end, when the exchange starts
      return;
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
      if (exchange_.request_framing == http::BodyFraming::Chunked) {
        sendUpstream(http::kLastChunk);
      }
      transition(exchange_.state == ExchangeState::SendingRequest ? ExchangeState::AwaitingResponse
                                                                  : ExchangeState::Responding);
      return;
    case ExchangeState::FinishingRequest:
      // The response was complete already: the exchange is.
      updateReading();
      finishExchange();
      return;
    default:
      return;  // (the parser runs in no other state)
  }
}

// ---------------------------------------------------------------------------------------------
// The exchange: the head sluice writes, the body up, the response down.

void Session::startExchange() {
  // Again with the rule that allowed the address actually dialled (it may not be the one that
  // allowed the name).
  if (refuseSecretMisuse()) {
    return;
  }
  transition(ExchangeState::SendingRequest);
  ++upstream_->exchanges;
  const http::RequestHead& head = request_parser_.head();
  std::string host_value = canonicalAuthority();
  injectSecrets();  // credential brokering: the rule's headers replace the sandbox's
  scratch_.clear();
  http::writeRequestHead(scratch_, head, exchange_.origin_target, host_value, inject_fields_);
  sendUpstream(scratch_);
  wipeIfSecret(scratch_);
  if (!held_body_.empty()) {
    // What HoldingBody read, in the framing sluice forwards with, ahead of the rest.
    if (exchange_.request_framing == http::BodyFraming::Chunked) {
      scratch_.clear();
      http::writeChunk(scratch_, held_body_);
      sendUpstream(scratch_);
    } else {
      sendUpstream(held_body_);
    }
    std::string().swap(held_body_);
  }
  if (exchange_.request_end == RequestEnd::Read) {
    // The whole body was held, or a bodiless request is sent again: its end is here already.
    if (exchange_.request_framing == http::BodyFraming::Chunked) {
      sendUpstream(http::kLastChunk);
    }
    transition(ExchangeState::AwaitingResponse);
  }
  response_parser_.reset();
  response_parser_.expect(exchange_.method);
  noteProgress();
  armTimer();
  updateReading();
  processClientPlaintext();  // the body, and a bodiless request's end
}

// "host[:port]" as sluice writes it upstream: canonical H, the port only when not the default.
std::string Session::canonicalAuthority() const {
  std::string value =
      exchange_.host.find(':') != std::string::npos ? "[" + exchange_.host + "]" : exchange_.host;
  if (exchange_.port != defaultPort(exchange_.scheme)) {
    value += ':' + std::to_string(exchange_.port);
  }
  return value;
}

// Writes what corked sendUpstream() calls gathered. The buffer is swapped out while it is
// written (a failed write may come back here) and keeps its capacity.
void Session::flushCorkedUpstream() {
  if (upstream_out_.empty()) {
    return;
  }
  std::string pending;
  pending.swap(upstream_out_);
  writeUpstreamNow(pending);
  wipeIfSecret(pending);
  pending.clear();
  upstream_out_.swap(pending);
}

void Session::wipeIfSecret(std::string& buffer) {
  if (exchange_.injected) {
    OPENSSL_cleanse(buffer.data(), buffer.capacity());
  }
}

void Session::sendUpstream(std::string_view bytes) {
  if (!upstream_) {
    return;
  }
  if (cork_depth_ > 0 && !bytes.empty()) {
    upstream_out_.append(bytes);
    if (upstream_out_.size() >= 16 * 1024) {
      flushCorked();
    }
    return;
  }
  if (!upstream_out_.empty()) {
    flushCorked();
  }
  writeUpstreamNow(bytes);
}

void Session::writeUpstreamNow(std::string_view bytes) {
  if (!upstream_ || bytes.empty()) {
    return;
  }
  if (!upstream_->tls) {
    upstream_->stream.write(bytes);
    return;
  }
  if (!upstream_->tls->write(std::span<const char>(bytes.data(), bytes.size()))) {
    upstreamFailed(policy::Reason::UpstreamConnect, "TLS write to upstream failed");
    return;
  }
  flushUpstreamTls();
}

void Session::onRequestBody(std::span<const char> data) {
  exchange_.req_bytes += data.size();
  if (exchange_.hashing) {
    EVP_DigestUpdate(exchange_.req_hash.get(), data.data(), data.size());
  }
  if (exchange_.state == ExchangeState::HoldingBody) {
    held_body_.append(data.data(), data.size());
    return;
  }
  if (exchange_.state == ExchangeState::FinishingRequest) {
    return;  // the upstream already answered: the rest of the body goes nowhere
  }
  if (exchange_.request_framing == http::BodyFraming::Chunked) {
    scratch_.clear();
    http::writeChunk(scratch_, data);
    sendUpstream(scratch_);
  } else {
    sendUpstream(std::string_view(data.data(), data.size()));
  }
}

void Session::onUpstreamBytes(std::span<const char> data) {
  if (connector_state_ == ConnectorState::Handshaking) {
    upstream_->tls->feed(data);
    pumpUpstreamTls();
    return;
  }
  if (!forwarding(exchange_.state)) {
    return;
  }
  if (!upstream_->tls) {
    processUpstreamPlaintext(data);
  } else {
    upstream_->tls->feed(data);
    for (;;) {
      std::size_t n = 0;
      tls::ReadStatus status =
          upstream_->tls->read(std::span<char>(t_upstream_plain, kPlainChunk), &n);
      if (status == tls::ReadStatus::Data) {
        processUpstreamPlaintext(std::span<const char>(t_upstream_plain, n));
        if (!upstream_ || !forwarding(exchange_.state)) {
          return;
        }
        continue;
      }
      flushUpstreamTls();
      if (status == tls::ReadStatus::WantIo) {
        break;
      }
      if (status == tls::ReadStatus::Closed) {
        onEof(upstream_->stream);  // close_notify ends an until-close body like a FIN
        return;
      }
      upstreamFailed(policy::Reason::UpstreamConnect, upstream_->tls->failure().detail);
      return;
    }
  }
  updateReading();
}

void Session::processUpstreamPlaintext(std::span<const char> data) {
  // After a head the parser may report the message's end without another byte (HEAD, 204,
  // 304, Content-Length: 0), so it is fed once more even when `data` is used up.
  bool end_pending = false;
  while ((!data.empty() || end_pending) && upstream_ && forwarding(exchange_.state)) {
    end_pending = false;
    http::ParseEvent event = response_parser_.feed(data, *this);
    bool more = data.size() > event.consumed;
    data = data.subspan(event.consumed);
    if (closing() || !upstream_) {
      return;
    }
    switch (event.kind) {
      case http::EventKind::NeedMore:
        return;
      case http::EventKind::InterimHead:
        // (103 Early Hints may echo the request too)
        response_mask_.reset(exchange_.injected ? &generation_->secrets->patterns() : nullptr);
        scratch_.clear();
        http::writeResponseHead(scratch_, response_parser_.head(), http::ResponseFraming::None,
                                false);
        sendResponseHead(scratch_, false);
        break;
      case http::EventKind::HeadComplete:
        onResponseHead();
        end_pending = true;
        break;
      case http::EventKind::MessageComplete:
        // Bytes after the response: the upstream is in no known state, never reuse it.
        exchange_.after = more ? UpstreamAfter::Close : UpstreamAfter::Keep;
        onResponseComplete();
        return;
      default:
        upstreamFailed(policy::Reason::UpstreamConnect, event.detail);
        return;
    }
  }
}

void Session::onResponseHead() {
  const http::ResponseHead& head = response_parser_.head();
  exchange_.status = head.status;
  switch (head.framing) {
    case http::ResponseFraming::ContentLength:
      exchange_.to_client = http::ResponseFraming::ContentLength;
      break;
    case http::ResponseFraming::Chunked:
    case http::ResponseFraming::UntilClose:
      exchange_.to_client = http::ResponseFraming::Chunked;  // re-chunked: the client keeps
      break;                                                 // its connection
    case http::ResponseFraming::None:
      // A HEAD or 304 answer has no body but keeps its Content-Length: the length the GET
      // would have had (RFC 9110 §8.6). Nothing but the header is sent.
      exchange_.to_client = head.has_content_length ? http::ResponseFraming::ContentLength
                                                    : http::ResponseFraming::None;
      break;
  }
  if (!exchange_.request_keep_alive) {
    closeAfterExchange();
  }
  if (refuseEncodedResponse(head)) {
    return;
  }
  // An upstream that echoes the request must not hand the sandbox the secret, in any form the
  // masking knows (README, "Credential brokering").
  response_mask_.reset(exchange_.injected ? &generation_->secrets->patterns() : nullptr);
  scratch_.clear();
  http::writeResponseHead(scratch_, head, exchange_.to_client,
                          after_exchange_ != AfterExchange::ReadNext);
  // A bodiless answer (HEAD, 204, 304, Content-Length: 0) is complete with its head.
  bool bodiless =
      head.framing == http::ResponseFraming::None ||
      (head.framing == http::ResponseFraming::ContentLength && head.content_length == 0);
  sendResponseHead(scratch_, bodiless);
  if (closing()) {
    return;
  }
  transition(exchange_.state == ExchangeState::SendingRequest
                 ? ExchangeState::RespondingWhileSending
                 : ExchangeState::Responding);
}

void Session::onResponseBody(std::span<const char> data) {
  exchange_.resp_bytes += data.size();
  if (exchange_.hashing) {
    EVP_DigestUpdate(exchange_.resp_hash.get(), data.data(), data.size());
  }
  // The last bytes of a Content-Length body complete the response (a chunked one ends with the
  // last chunk, onResponseComplete).
  bool last = exchange_.to_client == http::ResponseFraming::ContentLength &&
              exchange_.resp_bytes >= response_parser_.head().content_length;
  if (response_mask_.active()) {
    masked_.clear();
    response_mask_.feed(data, masked_);
    sendResponseBody(masked_, last);
    return;
  }
  sendResponseBody(data, last);
}

void Session::sendResponseBody(std::span<const char> data, bool completes_response) {
  if (data.empty()) {
    return;  // (an empty chunk would end a chunked body)
  }
  std::string_view bytes(data.data(), data.size());
  if (exchange_.to_client == http::ResponseFraming::Chunked) {
    scratch_.clear();
    http::writeChunk(scratch_, data);
    bytes = scratch_;
  }
  if (completes_response) {
    sendClientFinal(bytes);
  } else {
    sendClient(bytes);
  }
}

void Session::flushResponseMask() {
  if (response_mask_.active()) {
    masked_.clear();
    response_mask_.finish(masked_);
    sendResponseBody(masked_, true);  // only ever at the response's end
    response_mask_.reset(nullptr);
  }
}

void Session::onResponseComplete() {
  flushResponseMask();
  if (exchange_.to_client == http::ResponseFraming::Chunked) {
    sendClientFinal(http::kLastChunk);
  }
  if (exchange_.state == ExchangeState::RespondingWhileSending) {
    // The upstream answered before the request body ended (a 413, a redirect). Neither
    // connection is in a known state any more: finish this exchange and close both.
    exchange_.after = UpstreamAfter::Close;
    closeAfterExchange();
  }
  finishExchange();
}

void Session::onResponseEndedByClose() {
  if (exchange_.state == ExchangeState::RespondingWhileSending) {
    // The rest of the request body is read and dropped; the exchange completes at its end.
    transition(ExchangeState::FinishingRequest);
    releaseUpstream(false);
    return;
  }
  releaseUpstream(false);
  finishExchange();
}

// Both the request and the response are over: the record, then the next request (or the end).
void Session::finishExchange() {
  if (!exchange_.inFlight() || closing()) {
    return;
  }
  writeAudit(
      exchange_.verdict,
      exchange_.verdict == policy::Verdict::Report ? exchange_.policy_reason : policy::Reason::None,
      exchange_.status);
  bool reusable = upstream_ && response_parser_.head().keep_alive &&
                  exchange_.after == UpstreamAfter::Keep;
  releaseUpstream(reusable);
  if (closing()) {
    return;  // (writing what was corked for the upstream failed)
  }
  transition(ExchangeState::Complete);
  if (after_exchange_ != AfterExchange::ReadNext || !exchange_.request_keep_alive) {
    finishConnection();
    return;
  }
  noteProgress();
  release_deadline_ms_ = last_progress_ms_ + kReleaseIdleBuffersMs;
  armTimer();
  processClientPlaintext();  // a pipelined request may already be here
}

void Session::releaseUpstream(bool reusable) {
  if (!upstream_) {
    return;
  }
  // Corked bytes for this upstream (a last chunk) go before it is pooled or closed.
  flushCorkedUpstream();
  if (!upstream_) {
    return;  // the write failed and the upstream is gone
  }
  if (upstream_->tls && upstream_->exchanges == 1 && exchange_.after == UpstreamAfter::Keep) {
    // After its first response a connection has read the TLS 1.3 tickets: keep one for the
    // next connection to this key (once per connection, not per request).
    ctx_.pool->remember(upstream_->key, upstream_->tls->session());
  }
  if (reusable && after_exchange_ != AfterExchange::Drain && !ctx_.draining) {
    unpark();  // (none in practice: an exchange starts by taking the parked one)
    parked_ = std::move(upstream_);
    // Read while parked, as the pool does: EOF or stray bytes from an idle upstream retire it
    // here instead of failing the next request.
    parked_->stream.startReading();
    return;
  }
  retireUpstream();
}

void Session::unpark() {
  if (!parked_) {
    return;
  }
  if (after_exchange_ == AfterExchange::Drain || ctx_.draining) {
    retireParked();
    return;
  }
  ctx_.pool->put(std::move(parked_));
}

void Session::retireParked() {
  if (!parked_) {
    return;
  }
  parked_->stream.close();
  closing_upstreams_.push_back(std::move(parked_));
  ++open_handles_;
}

// A failure on the way to or from the upstream. Before the response head went out, the client
// gets sluice's own answer (502/504 with the reason); after, the only honest signal left is to
// cut the connection, and the audit record says why.
void Session::upstreamFailed(policy::Reason reason, std::string_view detail) {
  if (closing()) {
    return;
  }
  SPDLOG_DEBUG("[C{}] upstream failed ({}): {}", id_, policy::toString(reason), detail);
  if (!exchange_.inFlight()) {
    close(detail);  // (no request to answer)
    return;
  }
  // A reused connection that the upstream closed (or had closed) without a byte of answer to a
  // whole bodiless request: the connection may have died idle, or the origin may have read the
  // request, acted on it and gone. sluice cannot tell which, so only a request that is safe to
  // repeat is sent again: once, on a connection dialled for it (acquireUpstream skips the pool).
  // Any other gets its 502 here and has reached the origin at most once.
  bool stale = exchange_.origin == UpstreamOrigin::Reused &&
               exchange_.state == ExchangeState::AwaitingResponse &&
               exchange_.request_framing != http::BodyFraming::Chunked &&
               exchange_.req_bytes == 0 && reason == policy::Reason::UpstreamConnect;
  if (stale && safeToRepeat(exchange_.method)) {
    exchange_.origin = UpstreamOrigin::Redialled;
    exchange_.request_end = RequestEnd::Read;
    retireUpstream();
    policy::Decision d = decideRequest({}, false);
    acquireUpstream(d);
    return;
  }
  if (stale) {
    deny(reason, "a reused upstream connection ended before the answer (" + std::string(detail) +
                     "); a " + exchange_.method +
                     " is not sent again: the origin may have acted on it");
    return;
  }
  if (!exchange_.responseBegun()) {
    deny(reason, detail);
    return;
  }
  writeAudit(exchange_.verdict, reason, exchange_.status);
  transition(ExchangeState::Failed);
  close(detail);
}

}  // namespace sluice::proxy::session
