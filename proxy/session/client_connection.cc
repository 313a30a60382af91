// The connection's transport: accepting, reading (and what is read when), writing (corked and
// gathered), and the stream callbacks. The opening is client_connection_tunnel.cc, the requests'
// beginnings client_connection_requests.cc, endings and the timer client_connection_lifetime.cc.
#include "proxy/session/client_connection.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/http1/http1_server_codec.h"

namespace sluice::proxy::session {

ClientConnection::ClientConnection(WorkerContext& context,
                                   std::shared_ptr<const Generation> generation,
                                   const SandboxView& sandbox, std::uint64_t id, Listener listener)
    : ctx_(context),
      binding_(*context.state, std::move(generation), sandbox),
      transport_(context.loop, this, *this),
      timer_(context.loop, [this] { onTimer(); }),
      opening_(*this, static_cast<ClientSide&>(*this), facts_, transport_),
      upstreams_(*this) {
  facts_.id = id;
  ctx_.debug_log = spdlog::should_log(spdlog::level::debug);
  if (listener == Listener::Transparent) {
    facts_.mode = audit::Mode::Transparent;
    state_ = ConnectionState::Sniffing;  // where a redirected connection starts (not a move)
  } else {
    // The explicit listener's first head is HTTP/1.1 (a CONNECT, or forward mode).
    codec_ = std::make_unique<Http1ServerCodec>(static_cast<CodecHost&>(*this),
                                                config().limits.max_header_bytes);
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
  if (!takesRequests()) {
    return;  // opening (it ends at the handshake's deadline), lingering or closing
  }
  // No new request (HTTP/2: GOAWAY); what is in flight finishes, then the connection does.
  // Idle between requests (nothing half-read): nothing in flight to finish.
  Cork cork(*this);
  if (codec_->drain()) {
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
  const std::string detail =
      "sandbox '" + sandbox().name + "' has all the connections it may have";
  // An explicit-proxy client reads an answer that comes before its request is sent; a
  // redirected connection has spoken no protocol yet: it is just closed.
  const bool answered = answer && facts_.mode != audit::Mode::Transparent;
  opening_.refuseConnection(reason, detail, answered);
  if (!answered) {
    SPDLOG_DEBUG("[C{}] refused: {}", facts_.id, policy::toString(reason));
    flushAudit();
    close("over limits.max_connections");
  }
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
  if (codec_) {
    codec_->updateUpstreamReading(client.backedUp());
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
      return codec_->wantsBytes();
    case ConnectionState::Closing:
    case ConnectionState::Closed:
      return false;
  }
  return false;
}

void ClientConnection::onRead(io::TcpStream& stream, std::span<const char> data) {
  Cork cork(*this);
  if (&stream == &transport_.stream()) {
    collect();
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
      // already have been under way: its bytes are kept (in TLS, or by the codec), not parsed
      // yet.
      const bool held = codec_->holdsInput();
      if (transport_.secure()) {
        transport_.tls().feed(data);
        if (!held) {
          pumpClientTls();
        }
      } else {
        codec_->feed(data);
        if (!held) {
          codec_->process();
        }
      }
      return;
    }
    case ConnectionState::ReadingClientHello:
      opening_.onHelloBytes(data);
      return;
    case ConnectionState::TlsHandshake:
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
    if (state_ != ConnectionState::Serving) {
      close("client closed");  // opening or lingering: nothing to finish
      return;
    }
    // What is in flight finishes what it can, then the connection closes.
    closeAfterExchange();
    codec_->onClientEnd(ClientEnd::Eof);
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
  if (state_ == ConnectionState::Serving) {
    codec_->onPeerDrained();  // request bytes held while an upstream was backed up
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
    if (codec_) {
      codec_->discardCorkedUpstreams();
    }
    return;
  }
  if (codec_) {
    codec_->flushCorkedUpstreams();
    if (state_ == ConnectionState::Serving) {
      // What the codec says beyond its requests (HTTP/2's frames), into the same TLS records
      // and write: gathered here (corked) rather than sealed and written a frame at a time.
      // (Once the connection finishes, its last frames went before close_notify: nothing may
      // follow it.)
      transport_.cork();
      const bool wrote = codec_->sendPending();
      transport_.uncork();  // (the flush below is this one's)
      if (closing()) {
        return;
      }
      if (wrote) {
        flushAudit();  // a request that ended meanwhile: its record before its last bytes
      }
    }
  }
  transport_.flush();
}

void ClientConnection::collect() {
  retired_.reset();
  if (codec_) {
    codec_->collect();
  }
}

void ClientConnection::flushAudit() {
  if (audited_) {
    binding_.flushAudit();
  }
}

}  // namespace sluice::proxy::session
