// The connection's transport: accepting, reading (and what is read when), writing (corked and
// gathered), and the stream callbacks. The opening is client_connection_tunnel.cc, the requests'
// beginnings client_connection_requests.cc, endings and the timer client_connection_lifetime.cc.
#include "proxy/session/client_connection.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "proxy/gateway_state.h"
#include "proxy/generation.h"

namespace sluice::proxy::session {

namespace {

// While corked, pieces that fit together in this many bytes are gathered into one TLS record;
// larger ones are encrypted as they come.
constexpr std::size_t kGatherLimit = 4 * 1024;
// Encrypted records waiting for the end of a corked callback are written once they reach this.
constexpr std::size_t kWriteBatch = 64 * 1024;

}  // namespace

ClientConnection::ClientConnection(WorkerContext& context,
                                   std::shared_ptr<const Generation> generation,
                                   const SandboxView& sandbox, std::uint64_t id, Listener listener)
    : ctx_(context),
      generation_(std::move(generation)),
      view_(&sandbox),
      runtime_(sandbox.runtime),
      client_(context.loop, this),
      timer_(context.loop),
      codec_(*this, exchange_, generation_->config->limits.max_header_bytes),
      exchange_(*this, codec_, generation_->config->limits.max_header_bytes) {
  open_handles_ = 2;  // client_ and timer_ exist (initialised) from here on
  facts_.id = id;
  if (listener == Listener::Transparent) {
    facts_.mode = audit::Mode::Transparent;
    state_ = ConnectionState::Sniffing;  // where a redirected connection starts (not a move)
  }
  facts_.started_ms = last_progress_ms_ = uv_now(ctx_.loop);
  opened_as_.gateway = ctx_.state->open_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  opened_as_.sandbox =
      runtime_->metrics.connections_active.fetch_add(1, std::memory_order_relaxed) + 1;
}

ClientConnection::~ClientConnection() {
  ctx_.state->open_connections.fetch_sub(1, std::memory_order_relaxed);
  runtime_->metrics.connections_active.fetch_sub(1, std::memory_order_relaxed);
}

bool ClientConnection::start(int fd) {
  if (client_.adopt(fd) != 0) {
    ::close(fd);
    close("accept failed");
    return false;
  }
  facts_.client = client_.peer();
  if (facts_.mode == audit::Mode::Transparent) {
    facts_.orig_dst = client_.originalDestination();
  }
  phase_deadline_ms_ =
      facts_.started_ms + static_cast<std::uint64_t>(config().limits.handshake_timeout.count());
  SPDLOG_DEBUG("[C{}] accepted from {} for sandbox {} on worker {}", facts_.id,
               facts_.client.toString(), sandbox().name, ctx_.worker);
  updateReading();
  armTimer();
  return true;
}

void ClientConnection::drain() {
  after_exchange_ = AfterExchange::Drain;
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
  SPDLOG_DEBUG("[C{}] refused: {}", facts_.id, policy::toString(reason));
  exchange_.refuseWithoutAnswer(reason);
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
  if (clientWanted() && !client_.backedUp()) {
    client_.startReading();
  } else {
    client_.stopReading();
  }
  exchange_.updateUpstreamReading(client_.backedUp());
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
    case ConnectionState::Closing:
    case ConnectionState::Closed:
      return false;
  }
  return false;
}

void ClientConnection::onRead(io::TcpStream& stream, std::span<const char> data) {
  Cork cork(*this);
  if (&stream == &client_) {
    if (opening(state_)) {
      // The proxy head, the ClientHello and the TLS handshake: bounded by handshake_timeout.
      noteProgress();
    }
    onClientBytes(data);
  } else if (parked_ && &stream == &parked_->stream) {
    retireParked();  // an idle upstream talking out of turn is in no known state
    return;
  }
  // What was just read may have filled the other side's queue: stop reading this side until it
  // drains (onDrained), so a fast sender never makes sluice buffer a whole body.
  updateReading();
}

void ClientConnection::onClientBytes(std::span<const char> data) {
  switch (state_) {
    case ConnectionState::Sniffing:
      onFirstBytes(data);
      return;
    case ConnectionState::ReadingProxyHead:
    case ConnectionState::Serving:
      if (exchange_.state() == ExchangeState::AwaitingUpstream) {
        // Reading is stopped while a head waits for DNS or a connection, but one read may
        // already have been under way. Keep the bytes for the parser.
        if (client_tls_) {
          client_tls_->feed(data);
        } else {
          codec_.feed(data);
        }
        return;
      }
      if (client_tls_) {
        client_tls_->feed(data);
        pumpClientTls();
      } else {
        codec_.feed(data);
        codec_.process();
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

void ClientConnection::onEof(io::TcpStream& stream) {
  Cork cork(*this);
  if (&stream == &client_) {
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
  if (parked_ && &stream == &parked_->stream) {
    retireParked();
  }
}

void ClientConnection::onError(io::TcpStream& stream, int status) {
  Cork cork(*this);
  if (&stream == &client_) {
    close(uv_strerror(status));
    return;
  }
  if (parked_ && &stream == &parked_->stream) {
    retireParked();
  }
}

void ClientConnection::onDrained(io::TcpStream&) { onPeerDrained(); }

void ClientConnection::onPeerDrained() {
  Cork cork(*this);
  noteProgress();  // the peer took what it was sent
  updateReading();
  if (state_ == ConnectionState::Serving && readingRequestBody(exchange_.state())) {
    codec_.process();
  }
}

// ---------------------------------------------------------------------------------------------
// Writing.

void ClientConnection::uncork() {
  if (--cork_depth_ == 0) {
    // A record written in this callback reaches the OS before the bytes that end the response
    // it describes reach the client (a client that reads the log as soon as it has its answer
    // finds the record).
    flushAudit();
    flushCorked();
  }
}

void ClientConnection::sendClient(std::string_view bytes) {
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

void ClientConnection::sendClientFinal(std::string_view bytes) {
  if (cork_depth_ > 0) {
    client_out_.append(bytes);  // at most one read's worth: the Cork sends it, record first
    return;
  }
  sendClient(bytes);  // (every callback that can end a response is corked)
}

// Sends what corked writes gathered, in order, to both sides.
void ClientConnection::flushCorked() {
  if (closing()) {
    client_out_.clear();
    return;
  }
  exchange_.flushCorkedUpstream();
  if (!client_out_.empty()) {
    sealClient(client_out_);
    client_out_.clear();
  }
  pushClientCiphertext();
}

void ClientConnection::writeClientNow(std::string_view bytes) {
  sealClient(bytes);
  pushClientCiphertext();
}

void ClientConnection::sealClient(std::string_view bytes) {
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

void ClientConnection::pushClientCiphertext() {
  if (!client_tls_ || closing()) {
    return;
  }
  std::span<const char> out = client_tls_->peekCiphertext();
  if (!out.empty()) {
    client_.write(out);
    client_tls_->consumeCiphertext(out.size());
  }
}

void ClientConnection::flushAudit() {
  if (audited_ && view_->audit != nullptr) {
    view_->audit->flush();
  }
}

}  // namespace sluice::proxy::session
