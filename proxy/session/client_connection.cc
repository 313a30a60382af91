// The connection's transport: accepting, reading (and what is read when), writing (corked and
// gathered), and the stream callbacks. The opening is client_connection_tunnel.cc, the requests'
// beginnings client_connection_requests.cc, endings and the timer client_connection_lifetime.cc.
#include "proxy/session/client_connection.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"

namespace sluice::proxy::session {

ClientConnection::ClientConnection(WorkerContext& context,
                                   std::shared_ptr<const Generation> generation,
                                   const SandboxView& sandbox, std::uint64_t id, Listener listener)
    : ctx_(context),
      binding_(*context.state, std::move(generation), sandbox),
      transport_(context.loop, this, *this),
      timer_(context.loop, [this] { onTimer(); }),
      codec_(*this, exchange_, binding_.config().limits.max_header_bytes),
      exchange_(*this, codec_, binding_.config().limits.max_header_bytes),
      opening_(*this, context, facts_, exchange_, transport_, codec_),
      upstreams_(*this) {
  facts_.id = id;
  ctx_.debug_log = spdlog::should_log(spdlog::level::debug);
  if (listener == Listener::Transparent) {
    facts_.mode = audit::Mode::Transparent;
    state_ = ConnectionState::Sniffing;  // where a redirected connection starts (not a move)
  }
  facts_.started_ms = timer_.lastProgress();
}

ClientConnection::~ClientConnection() = default;

bool ClientConnection::start(int fd) {
  if (transport_.stream().adopt(fd) != 0) {
    ::close(fd);
    close("accept failed");
    return false;
  }
  facts_.client = transport_.stream().peer();
  if (facts_.mode == audit::Mode::Transparent) {
    facts_.orig_dst = transport_.stream().originalDestination();
  }
  timer_.setPhase(facts_.started_ms +
                  static_cast<std::uint64_t>(config().limits.handshake_timeout.count()));
  SPDLOG_DEBUG("[C{}] accepted from {} for sandbox {} on worker {}", facts_.id,
               facts_.client.toString(), sandbox().name, ctx_.worker);
  updateReading();
  armTimer();
  return true;
}

void ClientConnection::drain() {
  after_exchange_ = AfterExchange::Drain;
  noteTunnelEnd(audit::Error::SluiceClosed);
  if (state_ == ConnectionState::Multiplexing) {
    // GOAWAY: no new stream; the streams in flight finish, then the connection does.
    Cork cork(*this);
    h2_->goAway(0);
    if (!h2_->busy()) {
      finishConnection();
    }
    return;
  }
  // Idle between requests (nothing half-read): nothing in flight to finish.
  if ((state_ == ConnectionState::Serving || state_ == ConnectionState::ReadingProxyHead) &&
      codec_.pending() == 0 && !exchange_.inFlight()) {
    finishConnection();
  }
}

void ClientConnection::closeAfterExchange() {
  if (after_exchange_ == AfterExchange::ReadNext) {
    after_exchange_ = AfterExchange::Close;
  }
}

void ClientConnection::abort() { close("shutdown"); }

void ClientConnection::refuseConnection(policy::Reason reason, bool answer) {
  exchange_.beginRecord(false);
  exchange_.waiveRateToken();  // not a request: the connection limit is its reason
  std::string detail = "sandbox '" + sandbox().name + "' has all the connections it may have";
  if (answer && facts_.mode != audit::Mode::Transparent) {
    exchange_.deny(reason, detail);
    return;
  }
  exchange_.record().proto = audit::Proto::None;  // closed before any HTTP
  SPDLOG_DEBUG("[C{}] refused: {}", facts_.id, policy::toString(reason));
  exchange_.refuseWithoutAnswer(reason, detail);
  flushAudit();
  close("over limits.max_connections");
}

// ---------------------------------------------------------------------------------------------
// Reading.

// Which peers are read. A peer is never read while its own write queue is backed up (over the
// high watermark, until it drains): whatever it sends may make sluice answer it (a TLS KeyUpdate,
// an alert, 100-continue, the response to a pipelined request), so a peer that does not read
// would otherwise grow that queue without bound. That holds in every state, on both legs, tunnel
// or not; onDrained() calls here again, so reading always resumes. On top of it, the states say
// what they need, and a side is not read while what it sends is forwarded to a backed-up other
// side. None of this costs an epoll_ctl while nothing is backed up: start and stop are no-ops
// when reading already is as wanted.
void ClientConnection::updateReading() {
  if (closing()) {
    return;
  }
  io::TcpStream& client = transport_.stream();
  if (clientWanted() && !client.backedUp()) {
    client.startReading();
  } else {
    client.stopReading();
  }
  exchange_.updateUpstreamReading(client.backedUp());
  if (h2_) {
    h2_->updateUpstreamReading(client.backedUp());
  }
}

bool ClientConnection::clientWanted() const {
  switch (state_) {
    case ConnectionState::Sniffing:
    case ConnectionState::ReadingProxyHead:
    case ConnectionState::ReadingClientHello:
    case ConnectionState::TlsHandshake:
    case ConnectionState::Lingering:
      return true;
    case ConnectionState::Serving:
      return codec_.wantsBytes();
    case ConnectionState::Multiplexing:
      return h2_->wantsBytes();
    case ConnectionState::Closing:
    case ConnectionState::Closed:
      return false;
  }
  return false;
}

void ClientConnection::onRead(io::TcpStream& stream, std::span<const char> data) {
  Cork cork(*this);
  if (&stream == &transport_.stream()) {
    if (h2_) {
      h2_->collect();  // (a safe point: no stream's exchange is on the stack)
    }
    if (opening(state_)) {
      // The proxy head, the ClientHello and the TLS handshake: bounded by handshake_timeout.
      noteProgress();
    }
    onClientBytes(data);
  } else if (upstreams_.isParked(stream)) {
    upstreams_.retireParked();  // an idle upstream talking out of turn is in no known state
    return;
  }
  // What was just read may have filled the other side's queue: stop reading this side until it
  // drains (onDrained), so a fast sender never makes sluice buffer a whole body.
  updateReading();
}

void ClientConnection::onClientBytes(std::span<const char> data) {
  switch (state_) {
    case ConnectionState::Sniffing:
      opening_.onFirstBytes(data);
      return;
    case ConnectionState::ReadingProxyHead:
    case ConnectionState::Serving: {
      // Reading is stopped while a head waits for DNS or a connection, but one read may
      // already have been under way: its bytes are kept for the parser, not parsed yet.
      const bool held = exchange_.state() == ExchangeState::AwaitingUpstream;
      if (transport_.secure()) {
        transport_.tls().feed(data);
        if (!held) {
          pumpClientTls();
        }
      } else {
        codec_.feed(data);
        if (!held) {
          codec_.process();
        }
      }
      return;
    }
    case ConnectionState::ReadingClientHello:
      opening_.onHelloBytes(data);
      return;
    case ConnectionState::TlsHandshake:
    case ConnectionState::Multiplexing:
      transport_.tls().feed(data);
      pumpClientTls();
      return;
    case ConnectionState::Lingering:
    case ConnectionState::Closing:
    case ConnectionState::Closed:
      return;  // drained and dropped: sluice has said its last word
  }
}

void ClientConnection::onEof(io::TcpStream& stream) {
  Cork cork(*this);
  if (&stream == &transport_.stream()) {
    noteTunnelEnd(audit::Error::ClientClosed);
    if (state_ == ConnectionState::Multiplexing) {
      // The streams in flight finish what they can (their responses cannot be read any more
      // than an HTTP/1.1 one's: the client may only have shut its side), then the connection.
      closeAfterExchange();
      h2_->onClientClosed();
      if (!closing() && !h2_->busy()) {
        finishConnection();
      }
      return;
    }
    // Nothing decided yet (no head, or only part of one): nothing to finish.
    if (state_ == ConnectionState::Lingering || betweenRequests() || opening(state_)) {
      close("client closed");
      return;
    }
    // A request is in flight: finish what can be finished, then close.
    closeAfterExchange();
    exchange_.onClientClosed();
    return;
  }
  if (upstreams_.isParked(stream)) {
    upstreams_.retireParked();
  }
}

void ClientConnection::onError(io::TcpStream& stream, int status) {
  Cork cork(*this);
  if (&stream == &transport_.stream()) {
    noteTunnelEnd(audit::Error::ClientClosed);
    close(uv_strerror(status));
    return;
  }
  if (upstreams_.isParked(stream)) {
    upstreams_.retireParked();
  }
}

void ClientConnection::onDrained(io::TcpStream&) { onPeerDrained(); }

void ClientConnection::onPeerDrained() {
  Cork cork(*this);
  noteProgress();  // the peer took what it was sent
  updateReading();
  if (state_ == ConnectionState::Serving && readingRequestBody(exchange_.state())) {
    codec_.process();
  } else if (state_ == ConnectionState::Multiplexing) {
    h2_->onPeerDrained();  // request bodies held while an upstream was backed up
  }
}

// ---------------------------------------------------------------------------------------------
// Writing.

void ClientConnection::uncork() {
  if (transport_.uncork()) {
    // A record written in this callback reaches the OS before the bytes that end the response
    // it describes reach the client (a client that reads the log as soon as it has its answer
    // finds the record).
    flushAudit();
    flushCorked();
  }
}

// Sends what corked writes gathered, in order, to both sides.
void ClientConnection::flushCorked() {
  if (closing()) {
    transport_.discard();
    exchange_.discardCorkedUpstream();
    if (h2_) {
      h2_->discardCorkedUpstreams();
    }
    return;
  }
  exchange_.flushCorkedUpstream();
  if (h2_) {
    h2_->flushCorkedUpstreams();
    if (state_ == ConnectionState::Multiplexing) {
      // The frames of this callback, into the same TLS records and write: nghttp2 hands them
      // over a frame at a time, gathered here (corked) rather than sealed and written each.
      // (Once the connection finishes, its last frames went before close_notify: nothing may
      // follow it.)
      transport_.cork();
      h2_->send();
      transport_.uncork();  // (the flush below is this one's)
      if (closing()) {
        return;
      }
      flushAudit();  // a stream that closed meanwhile: its record before its last bytes
    }
  }
  transport_.flush();
}

void ClientConnection::flushAudit() {
  if (audited_) {
    binding_.flushAudit();
  }
}

}  // namespace sluice::proxy::session
