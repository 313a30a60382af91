// The connection half of the session: accepting, the proxy head (CONNECT or absolute-form),
// the tunnel's ClientHello and TLS, sluice's own answers, timers and closing. The request half
// (deciding, resolving, connecting, forwarding) is session_exchange.cc.
#include "proxy/session/session.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "policy/authority.h"
#include "proxy/gateway_state.h"
#include "proxy/generation.h"
#include "proxy/http/head_writer.h"
#include "proxy/session/denial.h"
#include "proxy/session/state_change.h"
#include "proxy/tls/client_hello.h"

namespace sluice::proxy::session {

namespace {

// After sluice's last bytes, how long the input is drained before the socket closes: closing
// with unread input makes the kernel send RST, which can destroy the answer in flight.
constexpr std::uint64_t kLingerMs = 2000;

// Plaintext of requests pipelined behind the one in progress that sluice holds before it stops
// reading the client.
constexpr std::size_t kPipelineBudget = 16 * 1024;

}  // namespace

Session::Session(WorkerContext& context, std::shared_ptr<const Generation> generation,
                 const SandboxView& sandbox, std::uint64_t id, Listener listener)
    : ctx_(context),
      generation_(std::move(generation)),
      view_(&sandbox),
      runtime_(sandbox.runtime),
      id_(id),
      client_(context.loop, this),
      timer_(context.loop),
      request_parser_(generation_->config->limits.max_header_bytes),
      response_parser_(generation_->config->limits.max_header_bytes) {
  open_handles_ = 2;  // client_ and timer_ exist (initialised) from here on
  if (listener == Listener::Transparent) {
    mode_ = audit::Mode::Transparent;
    state_ = ConnectionState::Sniffing;  // where a redirected connection starts (not a move)
  }
  started_ms_ = last_progress_ms_ = uv_now(ctx_.loop);
  opened_as_.gateway = ctx_.state->open_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  opened_as_.sandbox =
      runtime_->metrics.connections_active.fetch_add(1, std::memory_order_relaxed) + 1;
}

Session::~Session() {
  ctx_.state->open_connections.fetch_sub(1, std::memory_order_relaxed);
  runtime_->metrics.connections_active.fetch_sub(1, std::memory_order_relaxed);
}

bool Session::start(int fd) {
  if (client_.adopt(fd) != 0) {
    ::close(fd);
    close("accept failed");
    return false;
  }
  client_address_ = client_.peer();
  if (mode_ == audit::Mode::Transparent) {
    orig_dst_ = client_.originalDestination();
  }
  phase_deadline_ms_ =
      started_ms_ + static_cast<std::uint64_t>(config().limits.handshake_timeout.count());
  SPDLOG_DEBUG("[C{}] accepted from {} for sandbox {} on worker {}", id_,
               client_address_.toString(), sandbox().name, ctx_.worker);
  updateReading();
  armTimer();
  return true;
}

bool Session::transition(ConnectionState next) {
  if (!changeState(ctx_, id_, kConnectionMachine, state_, next)) {
    return false;
  }
  updateReading();
  return true;
}

bool Session::transition(ExchangeState next) {
  if (!changeState(ctx_, id_, kExchangeMachine, exchange_.state, next)) {
    return false;
  }
  updateReading();
  return true;
}

bool Session::transition(ConnectorState next) {
  if (!changeState(ctx_, id_, kConnectorMachine, connector_state_, next)) {
    return false;
  }
  updateReading();
  return true;
}

const policy::Sandbox& Session::sandbox() const { return *view_->sandbox; }

const policy::Config& Session::config() const { return *generation_->config; }

bool Session::takeUpCurrentGeneration() {
  const std::shared_ptr<const Generation>& current = ctx_.currentGeneration();
  if (current == generation_) {
    return true;
  }
  const SandboxView* now = current->find(runtime_->name);
  if (now == nullptr || now->runtime != runtime_) {
    SPDLOG_DEBUG("[C{}] sandbox {} was removed or replaced by a reload: closing", id_,
                 runtime_->name);
    finishConnection();
    return false;
  }
  generation_ = current;
  view_ = now;
  return true;
}

void Session::drain() {
  after_exchange_ = AfterExchange::Drain;
  // Idle between requests (nothing half-read): nothing in flight to finish.
  if ((state_ == ConnectionState::Serving || state_ == ConnectionState::ReadingProxyHead) &&
      client_plain_.size() == client_plain_offset_ && !exchange_.inFlight()) {
    finishConnection();
  }
}

void Session::closeAfterExchange() {
  if (after_exchange_ == AfterExchange::ReadNext) {
    after_exchange_ = AfterExchange::Close;
  }
}

void Session::abort() { close("shutdown"); }

void Session::refuseConnection(policy::Reason reason, bool answer) {
  beginRecord(false);
  exchange_.rate = RateToken::Taken;  // not a request: the connection limit is its reason
  std::string detail = "sandbox '" + sandbox().name + "' has all the connections it may have";
  if (answer && mode_ != audit::Mode::Transparent) {
    deny(reason, detail);
    return;
  }
  SPDLOG_DEBUG("[C{}] refused: {}", id_, policy::toString(reason));
  writeAudit(policy::Verdict::Deny, reason, 0);
  transition(ExchangeState::Denied);
  flushAudit();
  close("over limits.max_connections");
}

// ---------------------------------------------------------------------------------------------
// Reading and writing the client side.

// Which peers are read. A peer is never read while its own write queue is backed up (over the
// high watermark, until it drains): whatever it sends may make sluice answer it (a TLS KeyUpdate,
// an alert, 100-continue, the response to a pipelined request), so a peer that does not read
// would otherwise grow that queue without bound. That holds in every state, on both legs, tunnel
// or not; onDrained() calls here again, so reading always resumes. On top of it, the state says
// what it needs, and a side is not read while what it sends is forwarded to a backed-up other
// side. None of this costs an epoll_ctl while nothing is backed up: start and stop are no-ops
// when reading already is as wanted.
void Session::updateReading() {
  if (closing()) {
    return;
  }
  bool upstream_backed_up = upstream_ && upstream_->stream.backedUp();
  if (clientWanted(upstream_backed_up) && !client_.backedUp()) {
    client_.startReading();
  } else {
    client_.stopReading();
  }
  if (upstream_) {
    bool upstream_wanted = connector_state_ == ConnectorState::Handshaking ||
                           (forwarding(exchange_.state) && !client_.backedUp());
    if (upstream_wanted && !upstream_backed_up) {
      upstream_->stream.startReading();
    } else {
      upstream_->stream.stopReading();
    }
  }
}

bool Session::clientWanted(bool upstream_backed_up) const {
  switch (state_) {
    case ConnectionState::Sniffing:
    case ConnectionState::ReadingProxyHead:
    case ConnectionState::ReadingClientHello:
    case ConnectionState::TlsHandshake:
    case ConnectionState::Lingering:
      return true;
    case ConnectionState::Serving:
      return exchangeWantsClientBytes(upstream_backed_up);
    case ConnectionState::Closing:
    case ConnectionState::Closed:
      return false;
  }
  return false;
}

bool Session::exchangeWantsClientBytes(bool upstream_backed_up) const {
  switch (exchange_.state) {
    case ExchangeState::Idle:
    case ExchangeState::Deciding:
    case ExchangeState::Complete:
    case ExchangeState::Denied:
    case ExchangeState::Failed:
      return true;  // the next request head
    case ExchangeState::HoldingBody:
      return held_body_.size() < kBodyScanBytes && exchange_.request_end == RequestEnd::Pending;
    case ExchangeState::AwaitingUpstream:
      return false;  // a head is waiting for DNS or a connection: read nothing more meanwhile
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
    case ExchangeState::FinishingRequest:
      // The body is read as fast as the upstream takes it.
      return !upstream_backed_up;
    case ExchangeState::AwaitingResponse:
    case ExchangeState::Responding:
      // The request is complete. Reading goes on, so that the next request of a keep-alive
      // client does not cost two epoll_ctl calls to stop and restart, but only while little is
      // buffered: a pipelining client gets at most kPipelineBudget plus one read held for it.
      return client_plain_.size() - client_plain_offset_ < kPipelineBudget;
  }
  return false;
}

bool Session::parserMayRun() const {
  if (state_ == ConnectionState::ReadingProxyHead) {
    return true;
  }
  if (state_ != ConnectionState::Serving) {
    return false;
  }
  switch (exchange_.state) {
    case ExchangeState::Idle:
    case ExchangeState::Complete:
    case ExchangeState::Denied:
    case ExchangeState::Failed:
      return true;  // the next head
    case ExchangeState::HoldingBody:
      return exchange_.request_end == RequestEnd::Pending && held_body_.size() < kBodyScanBytes;
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
    case ExchangeState::FinishingRequest:
      return true;  // the body
    default:
      return false;
  }
}

void Session::onRead(io::TcpStream& stream, std::span<const char> data) {
  Cork cork(*this);
  if (&stream == &client_) {
    if (opening(state_)) {
      // The proxy head, the ClientHello and the TLS handshake: bounded by handshake_timeout.
      noteProgress();
    }
    onClientBytes(data);
  } else if (upstream_ && &stream == &upstream_->stream) {
    if (forwarding(exchange_.state)) {
      noteProgress();  // the response (or the origin's TLS, bounded on its own: read())
    }
    onUpstreamBytes(data);
  } else if (parked_ && &stream == &parked_->stream) {
    retireParked();  // an idle upstream talking out of turn is in no known state
    return;
  }
  // What was just forwarded may have filled the other side's queue: stop reading this side
  // until it drains (onDrained), so a fast sender never makes sluice buffer a whole body.
  updateReading();
}

void Session::onClientBytes(std::span<const char> data) {
  switch (state_) {
    case ConnectionState::Sniffing:
      onFirstBytes(data);
      return;
    case ConnectionState::ReadingProxyHead:
    case ConnectionState::Serving:
      if (exchange_.state == ExchangeState::AwaitingUpstream) {
        // Reading is stopped while a head waits for DNS or a connection, but one read may
        // already have been under way. Keep the bytes for the parser.
        if (client_tls_) {
          client_tls_->feed(data);
        } else {
          client_plain_.append(data.data(), data.size());
        }
        return;
      }
      if (client_tls_) {
        client_tls_->feed(data);
        pumpClientTls();
      } else {
        client_plain_.append(data.data(), data.size());
        processClientPlaintext();
      }
      return;
    case ConnectionState::ReadingClientHello:
      hello_.append(data.data(), data.size());
      processClientHello();
      return;
    case ConnectionState::TlsHandshake:
      client_tls_->feed(data);
      pumpClientTls();
      return;
    case ConnectionState::Lingering:
    case ConnectionState::Closing:
    case ConnectionState::Closed:
      return;  // drained and dropped: sluice has said its last word
  }
}

// While corked, pieces that fit together in this many bytes are gathered into one TLS record;
// larger ones are encrypted as they come.
constexpr std::size_t kGatherLimit = 4 * 1024;
// Encrypted records waiting for the end of a corked callback are written once they reach this.
constexpr std::size_t kWriteBatch = 64 * 1024;

void Session::sendClient(std::string_view bytes) {
  if (cork_depth_ > 0 && !bytes.empty()) {
    if (client_out_.size() + bytes.size() <= kGatherLimit) {
      client_out_.append(bytes);
      return;
    }
    if (!client_out_.empty()) {
      flushAudit();  // what is gathered may end a response (sendClientFinal): its record first
      sealClient(client_out_);
      client_out_.clear();
    }
    sealClient(bytes);
    if (client_tls_ && client_tls_->pendingCiphertext() >= kWriteBatch) {
      pushClientCiphertext();
    }
    return;
  }
  if (!client_out_.empty()) {
    flushCorked();
  }
  writeClientNow(bytes);
}

void Session::sendClientFinal(std::string_view bytes) {
  if (cork_depth_ > 0) {
    client_out_.append(bytes);  // at most one read's worth: the Cork sends it, record first
    return;
  }
  sendClient(bytes);  // (every callback that can end a response is corked)
}

void Session::flushCorked() {
  if (closing()) {
    client_out_.clear();
    upstream_out_.clear();
    return;
  }
  flushCorkedUpstream();
  if (!client_out_.empty()) {
    sealClient(client_out_);
    client_out_.clear();
  }
  pushClientCiphertext();
}

void Session::writeClientNow(std::string_view bytes) {
  sealClient(bytes);
  pushClientCiphertext();
}

void Session::sealClient(std::string_view bytes) {
  if (bytes.empty() || closing()) {
    return;
  }
  if (!client_tls_) {
    client_.write(bytes);
    return;
  }
  if (!client_tls_->write(std::span<const char>(bytes.data(), bytes.size()))) {
    close("tls write to client failed");
  }
}

void Session::pushClientCiphertext() {
  if (!client_tls_ || closing()) {
    return;
  }
  std::span<const char> out = client_tls_->peekCiphertext();
  if (!out.empty()) {
    client_.write(out);
    client_tls_->consumeCiphertext(out.size());
  }
}

// Feeds buffered client plaintext to the request parser for as long as the state lets it.
void Session::processClientPlaintext() {
  while (parserMayRun()) {
    std::span<const char> pending(client_plain_.data() + client_plain_offset_,
                                  client_plain_.size() - client_plain_offset_);
    if (pending.empty() && !message_end_pending_) {
      break;
    }
    message_end_pending_ = false;
    http::ParseEvent event = request_parser_.feed(pending, *this);
    client_plain_offset_ += event.consumed;
    if (event.consumed > 0) {
      noteProgress();  // request bytes used: a head (bounded on its own, below) or a body
    }
    if (closing()) {
      return;
    }
    if (event.kind == http::EventKind::NeedMore) {
      if (exchange_.state == ExchangeState::HoldingBody && held_body_.size() >= kBodyScanBytes) {
        finishHolding();  // it continues parsing itself once the exchange has started
        return;
      }
      if (betweenRequests() && event.consumed > 0 && phase_deadline_ms_ == 0) {
        // A head has begun: it must be complete within handshake_timeout, however slowly its
        // bytes trickle in (each byte would otherwise reset the idle timer: slowloris, R1).
        phase_deadline_ms_ = uv_now(ctx_.loop) +
                             static_cast<std::uint64_t>(config().limits.handshake_timeout.count());
        armTimer();
      }
      break;
    }
    if (event.kind == http::EventKind::Error) {
      SPDLOG_DEBUG("[C{}] bad request: {}", id_, event.detail);
      if (!exchange_.inFlight()) {
        describeRefusedHead();
      }
      deny(event.error == http::ParseError::HeaderTooLarge ? policy::Reason::HeaderTooLarge
                                                           : policy::Reason::BadRequest,
           event.detail);
      return;
    }
    if (event.kind == http::EventKind::ConnectHead) {
      onConnectHead();
    } else if (event.kind == http::EventKind::HeadComplete) {
      message_end_pending_ = true;
      if (betweenRequests()) {
        phase_deadline_ms_ = 0;
      }
      if (state_ == ConnectionState::ReadingProxyHead) {
        onProxyHead();
      } else {
        onRequestHead();
      }
    } else if (event.kind == http::EventKind::MessageComplete) {
      onRequestComplete();
    }
    if (closing() || state_ == ConnectionState::Lingering) {
      return;
    }
    if (exchange_.state == ExchangeState::HoldingBody &&
        (exchange_.request_end == RequestEnd::Read || held_body_.size() >= kBodyScanBytes)) {
      finishHolding();
      return;
    }
  }
  // Compact: everything before the offset has been used.
  if (client_plain_offset_ == client_plain_.size()) {
    client_plain_.clear();
    client_plain_offset_ = 0;
  } else if (client_plain_offset_ > 16 * 1024) {
    client_plain_.erase(0, client_plain_offset_);
    client_plain_offset_ = 0;
  }
}

// The audit record of a head the parser refused says what had been received: the method, the
// target and the Host as far as they were read (SPEC §6: "as received"), and for the first head
// on the explicit listener, which mode it was asking for.
void Session::describeRefusedHead() {
  http::RequestParser::PartialHead seen = request_parser_.partialHead();
  beginRecord(false);
  if (!seen.method.empty()) {
    exchange_.method.assign(seen.method);
  }
  if (!seen.host.empty()) {
    exchange_.host_header.emplace(seen.host);
  }
  bool origin_form = seen.target.starts_with('/');
  if (tunnel()) {
    exchange_.url = "https://" + connect_authority_ + (origin_form ? std::string(seen.target) : "");
  } else if (state_ == ConnectionState::ReadingProxyHead || mode_ == audit::Mode::Forward) {
    if (seen.method == "CONNECT") {
      mode_ = audit::Mode::Connect;
      exchange_.url = "https://" + std::string(seen.target);
    } else if (seen.target.find("://") != std::string_view::npos) {
      mode_ = audit::Mode::Forward;
      exchange_.url.assign(seen.target);
    }
  } else if (mode_ == audit::Mode::Transparent) {
    exchange_.url =
        "http://" + std::string(seen.host) + (origin_form ? std::string(seen.target) : "");
  }
}

// The first head on the explicit listener, when it is not CONNECT: plain-HTTP forwarding of an
// absolute-form request (SPEC §5.1). Each request on this connection names its own host.
void Session::onProxyHead() {
  mode_ = audit::Mode::Forward;
  phase_deadline_ms_ = 0;
  transition(ConnectionState::Serving);
  onRequestHead();
}

// ---------------------------------------------------------------------------------------------
// sluice's own answers.

void Session::deny(policy::Reason reason, std::string_view detail) {
  // A request refused before it took its token (a bad head, a refused CONNECT) takes one now:
  // beyond the sandbox's rate every request is a 429, whatever else was wrong with it.
  std::string over_rate;
  if (!chargeRequest()) {
    reason = policy::Reason::RateLimited;
    over_rate = rateLimitDetail();
    detail = over_rate;
    exchange_.rule.clear();
  }
  const policy::ReasonInfo& info = policy::reasonInfo(reason);
  SPDLOG_DEBUG("[C{}] deny {}: {}", id_, info.token, detail);
  scratch_.clear();
  appendDenial(scratch_, reason, detail);
  const bool head_sent = exchange_.responseBegun();
  if (!head_sent) {
    sendClient(scratch_);
  }
  if (closing()) {
    return;
  }
  writeAudit(policy::Verdict::Deny, reason, head_sent ? exchange_.status : info.http_status);
  transition(ExchangeState::Denied);
  cancelConnector();
  if (upstream_) {
    releaseUpstream(false);
  }
  finishConnection();
}

bool Session::refuseIfAuditUnavailable() {
  if (view_->audit == nullptr || view_->audit->available()) {
    return false;
  }
  constexpr std::string_view kDetail = "the audit log cannot be written; try again later";
  if (state_ == ConnectionState::ReadingClientHello) {
    // No TLS session to answer over: an alert, as for any refused ClientHello.
    refuseTunnel(policy::Reason::AuditUnavailable, tls::kAlertInternalError, kDetail);
  } else {
    describeRefusedHead();  // what was asked, for its record
    deny(policy::Reason::AuditUnavailable, kDetail);
  }
  return true;
}

void Session::writeAudit(policy::Verdict verdict, policy::Reason reason, int status) {
  if (view_->audit == nullptr) {
    return;
  }
  audit::AuditRecord r;
  // When the request (or the CONNECT, or the refused head) began; now if nothing began.
  r.ts = exchange_.started_ms != 0 ? exchange_.ts : std::chrono::system_clock::now();
  r.sandbox = sandbox().name;
  r.conn = id_;
  r.client = client_address_;
  r.mode = mode_;
  r.orig_dst = orig_dst_;
  if (sni_state_ == policy::SniState::Present) {
    r.sni = sni_;
  }
  if (exchange_.host_header) {
    r.host = *exchange_.host_header;
  }
  if (!exchange_.method.empty()) {
    r.method = exchange_.method;
  }
  r.url = exchange_.url;
  if (exchange_.answer) {
    r.addrs = exchange_.answer->addresses;
  }
  r.upstream = exchange_.upstream;
  r.decision = verdict;
  r.rule = exchange_.rule;
  r.reason = reason;
  r.status = status;
  r.req_bytes = exchange_.req_bytes;
  r.resp_bytes = exchange_.resp_bytes;
  if (exchange_.hashing) {
    r.hashed = true;
    unsigned n = 0;
    EVP_DigestFinal_ex(exchange_.req_hash.get(), r.req_sha256.data(), &n);
    EVP_DigestFinal_ex(exchange_.resp_hash.get(), r.resp_sha256.data(), &n);
  }
  std::uint64_t now = uv_now(ctx_.loop);
  std::uint64_t begun = exchange_.started_ms != 0 ? exchange_.started_ms : started_ms_;
  r.duration_ms = now > begun ? now - begun : 0;
  view_->audit->write(r);
  audited_connection_ = true;
  // The counters follow the audit log: one request per record, its body bytes.
  admin::SandboxMetrics& m = runtime_->metrics;
  m.countRequest(policy::toString(verdict), reason);
  m.addBytes(exchange_.req_bytes, exchange_.resp_bytes);
  if (exchange_.started_ns != 0) {
    m.request_duration.observe((uv_hrtime() - exchange_.started_ns) / 1000);
  }
}

void Session::flushAudit() {
  if (audited_connection_ && view_->audit != nullptr) {
    view_->audit->flush();
  }
}

// ---------------------------------------------------------------------------------------------
// Endings.

// Says goodbye politely: close_notify inside TLS, FIN, then drain the client's input for a
// moment so our last bytes are not destroyed by an RST.
void Session::finishConnection() {
  if (closing() || state_ == ConnectionState::Lingering) {
    return;
  }
  flushAudit();   // the record before the answer's last bytes, and before the connection closes
  flushCorked();  // everything said so far goes before close_notify and FIN
  if (client_tls_ && client_tls_->handshakeDone()) {
    client_tls_->shutdown();
    sendClient({});
    if (closing()) {
      return;
    }
  }
  cancelConnector();
  if (upstream_) {
    releaseUpstream(false);
  }
  unpark();
  flushAudit();  // (a record of what just happened, if any)
  client_.shutdownWrite();
  phase_deadline_ms_ = uv_now(ctx_.loop) + kLingerMs;
  transition(ConnectionState::Lingering);
  armTimer();
}

void Session::close(std::string_view why) {
  if (closing()) {
    return;
  }
  SPDLOG_DEBUG("[C{}] close: {}", id_, why);
  if (exchange_.inFlight()) {
    // Cut short (the client reset, shutdown_grace ran out): the request still gets its record,
    // with what was sent so far.
    writeAudit(exchange_.verdict,
               exchange_.verdict == policy::Verdict::Report ? exchange_.policy_reason
                                                            : policy::Reason::None,
               exchange_.responseBegun() ? exchange_.status : 0);
    transition(ExchangeState::Failed);
  }
  transition(ConnectionState::Closing);
  cancelConnector();  // cancel-on-destroy: the resolver will not call back
  flushAudit();
  client_.close();
  timer_.close([this] { handleClosed(); });
  retireUpstream();
  unpark();
}

void Session::handleClosed() {
  if (--open_handles_ == 0) {
    transition(ConnectionState::Closed);
    ctx_.finished(this);
  }
}

void Session::cancelConnector() {
  lookup_.reset();  // cancel-on-destroy: the resolver will not call back
  if (connector_state_ == ConnectorState::Resolving ||
      connector_state_ == ConnectorState::Connecting ||
      connector_state_ == ConnectorState::Handshaking) {
    transition(ConnectorState::Idle);
  }
}

void Session::retireUpstream() {
  if (!upstream_) {
    return;
  }
  upstream_->stream.close();
  closing_upstreams_.push_back(std::move(upstream_));
  ++open_handles_;
}

void Session::onEof(io::TcpStream& stream) {
  Cork cork(*this);
  if (&stream == &client_) {
    // Nothing decided yet (no head, or only part of one): nothing to finish.
    if (state_ == ConnectionState::Lingering || betweenRequests() || opening(state_)) {
      close("client closed");
      return;
    }
    if (exchange_.state == ExchangeState::HoldingBody &&
        exchange_.request_end == RequestEnd::Pending) {
      deny(policy::Reason::BadRequest, "client closed mid-request");
      return;
    }
    // A request is in flight: finish what can be finished, then close.
    closeAfterExchange();
    if (readingRequestBody(exchange_.state)) {
      // The body will never complete: the upstream cannot get a valid request.
      upstreamFailed(policy::Reason::BadRequest, "client closed mid-request");
    }
    return;
  }
  if (upstream_ && &stream == &upstream_->stream) {
    if (forwarding(exchange_.state)) {
      http::ParseEvent event = response_parser_.finish();
      if (event.kind == http::EventKind::MessageComplete) {
        // The close ends a body that runs until it (only after a head: the response began).
        flushResponseMask();
        if (exchange_.to_client == http::ResponseFraming::Chunked ||
            exchange_.to_client == http::ResponseFraming::UntilClose) {
          sendClientFinal(http::kLastChunk);
        }
        onResponseEndedByClose();
        return;
      }
    }
    upstreamFailed(policy::Reason::UpstreamConnect, "upstream closed the connection");
  } else if (parked_ && &stream == &parked_->stream) {
    retireParked();
  }
}

void Session::onError(io::TcpStream& stream, int status) {
  Cork cork(*this);
  if (&stream == &client_) {
    close(uv_strerror(status));
    return;
  }
  if (upstream_ && &stream == &upstream_->stream) {
    upstreamFailed(policy::Reason::UpstreamConnect, uv_strerror(status));
  } else if (parked_ && &stream == &parked_->stream) {
    retireParked();
  }
}

void Session::onDrained(io::TcpStream&) {
  Cork cork(*this);
  noteProgress();  // the peer took what it was sent
  updateReading();
  if (state_ == ConnectionState::Serving && readingRequestBody(exchange_.state)) {
    processClientPlaintext();
  }
}

void Session::onClosed(io::TcpStream& stream) {
  for (auto it = closing_upstreams_.begin(); it != closing_upstreams_.end(); ++it) {
    if (&(*it)->stream == &stream) {
      closing_upstreams_.erase(it);
      break;
    }
  }
  handleClosed();
}

// ---------------------------------------------------------------------------------------------
// Deadlines: one timer, armed for the earliest of the idle deadline and the phase deadline
// (handshake, connect, linger).

void Session::armTimer() {
  if (closing()) {
    return;
  }
  const auto& limits = config().limits;
  std::uint64_t now = uv_now(ctx_.loop);
  std::uint64_t idle = last_progress_ms_ + static_cast<std::uint64_t>(limits.idle_timeout.count());
  std::uint64_t deadline = phase_deadline_ms_ != 0 ? std::min(idle, phase_deadline_ms_) : idle;
  if (release_deadline_ms_ != 0) {
    deadline = std::min(deadline, release_deadline_ms_);
  }
  if (armed_for_ms_ != 0 && armed_for_ms_ <= deadline) {
    // Already armed for this moment or an earlier one, which re-arms for the rest: a deadline
    // that moved later (each request moves the idle deadline) costs no timer-heap update.
    return;
  }
  armed_for_ms_ = deadline;
  std::uint64_t delay = deadline > now ? deadline - now : 0;
  timer_.start(std::chrono::milliseconds(delay), [this] { onTimer(); });
}

// An idle keep-alive connection keeps little: TLS record buffers, write queues and scratch
// space go back after a second without a request (not at once: a busy client would pay for the
// memory twice per request). What a connection costs idle is what sluice costs at scale.
void Session::releaseIdleBuffers() {
  if (!betweenRequests() || client_plain_.size() != client_plain_offset_ || cork_depth_ > 0) {
    return;
  }
  unpark();  // an idle client's upstream may serve another client meanwhile
  ctx_.state->heap_shrank.store(true, std::memory_order_relaxed);
  client_out_ = std::string();
  upstream_out_ = std::string();
  if (client_tls_) {
    client_tls_->releaseBuffers();
  }
  client_.releaseBuffers();
  client_plain_ = std::string();
  client_plain_offset_ = 0;
  scratch_ = std::string();
}

void Session::onTimer() {
  Cork cork(*this);
  armed_for_ms_ = 0;
  std::uint64_t now = uv_now(ctx_.loop);
  const auto& limits = config().limits;
  if (release_deadline_ms_ != 0 && now >= release_deadline_ms_) {
    release_deadline_ms_ = 0;
    releaseIdleBuffers();
  }
  bool phase_over = phase_deadline_ms_ != 0 && now >= phase_deadline_ms_;
  bool idle_over =
      now >= last_progress_ms_ + static_cast<std::uint64_t>(limits.idle_timeout.count());
  if (!phase_over && !idle_over) {
    armTimer();  // progress moved the idle deadline on
    return;
  }
  if (state_ == ConnectionState::Lingering) {
    close("linger over");
    return;
  }
  if (state_ == ConnectionState::Serving) {
    if (connector_state_ == ConnectorState::Connecting && phase_over) {
      exchange_.saw_timeout = true;  // this address took connect_timeout: try the next
      retireUpstream();
      connectNext();
      return;
    }
    if (exchange_.state == ExchangeState::AwaitingUpstream || forwarding(exchange_.state) ||
        exchange_.state == ExchangeState::FinishingRequest) {
      if (!exchange_.responseBegun()) {
        if (connector_state_ == ConnectorState::Resolving ||
            connector_state_ == ConnectorState::Connecting ||
            connector_state_ == ConnectorState::Handshaking) {
          lookup_.reset();
          transition(ConnectorState::Failed);
        }
        upstreamFailed(policy::Reason::UpstreamTimeout, "no answer in time");
      } else {
        close("idle during the response");
      }
      return;
    }
  }
  // The handshake, or a request head, took too long, or the connection idled between requests
  // (or while its request body was held): nothing was asked, so nothing is answered.
  close(phase_over ? "handshake or request head too slow" : "idle timeout");
}

}  // namespace sluice::proxy::session
