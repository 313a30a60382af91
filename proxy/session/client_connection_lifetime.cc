// How a connection ends (a polite finish with a linger, or a close), the upstream connections
// it keeps between requests or is closing, and its one timer.
#include <spdlog/spdlog.h>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/session/state_change.h"

namespace sluice::proxy::session {

namespace {

// After sluice's last bytes, how long the input is drained before the socket closes: closing
// with unread input makes the kernel send RST, which can destroy the answer in flight.
constexpr std::uint64_t kLingerMs = 2000;

// How long a keep-alive connection idles before its buffers are given back.
constexpr std::uint64_t kReleaseIdleBuffersMs = 1000;

}  // namespace

bool ClientConnection::transition(ConnectionState next) {
  if (!changeState(ctx_, facts_.id, kConnectionMachine, state_, next)) {
    return false;
  }
  updateReading();
  return true;
}

void ClientConnection::onExchangeOver(ExchangeState outcome) {
  if (outcome == ExchangeState::Denied) {
    finishConnection();  // a denied connection is not kept (docs/wire.md#denials)
    return;
  }
  if (outcome != ExchangeState::Complete) {
    return;
  }
  if (after_exchange_ != AfterExchange::ReadNext) {
    finishConnection();
    return;
  }
  noteProgress();
  timer_.setRelease(timer_.lastProgress() + kReleaseIdleBuffersMs);
  armTimer();
  codec_.process();  // a pipelined request may already be here
}

void ClientConnection::finishConnection() {
  if (closing() || state_ == ConnectionState::Lingering) {
    return;
  }
  if (h2_) {
    h2_->finish();  // GOAWAY (unless said), the streams still in flight cut short, on record
  }
  recordQuietTunnel();
  flushAudit();   // the record before the answer's last bytes, and before the connection closes
  flushCorked();  // everything said so far goes before close_notify and FIN
  if (transport_.secure() && transport_.tls().handshakeDone()) {
    transport_.tls().shutdown();
    sendClient({});
    if (closing()) {
      return;
    }
  }
  exchange_.releaseUpstream();
  unpark();
  flushAudit();  // (a record of what just happened, if any)
  transport_.stream().shutdownWrite();
  timer_.setPhase(timer_.now() + kLingerMs);
  transition(ConnectionState::Lingering);
  armTimer();
}

void ClientConnection::close(std::string_view why) {
  if (closing()) {
    return;
  }
  SPDLOG_DEBUG("[C{}] close: {}", facts_.id, why);
  exchange_.abandon();  // a request cut short still gets its record
  if (h2_) {
    h2_->abandon();
  }
  recordQuietTunnel();
  transition(ConnectionState::Closing);
  exchange_.dropUpstream();  // the lookup is cancelled: the resolver will not call back
  if (h2_) {
    h2_->dropUpstreams();
  }
  flushAudit();
  transport_.stream().close();
  timer_.close([this] {
    timer_closed_ = true;
    handleClosed();
  });
  unpark();
}

void ClientConnection::handleClosed() {
  if (stream_closed_ && timer_closed_ && upstreams_.closing() == 0) {
    transition(ConnectionState::Closed);
    ctx_.finished(this);
  }
}

void ClientConnection::onClosed(io::TcpStream& stream) {
  if (&stream == &transport_.stream()) {
    stream_closed_ = true;
  } else {
    upstreams_.onClosed(stream);
  }
  handleClosed();
}

// ---------------------------------------------------------------------------------------------
// Upstream connections between exchanges.

std::unique_ptr<UpstreamConnection> ClientConnection::takeParked(const UpstreamKey& key) {
  if (std::unique_ptr<UpstreamConnection> parked = upstreams_.takeParked(key)) {
    return parked;
  }
  unpark();
  return nullptr;
}

void ClientConnection::park(std::unique_ptr<UpstreamConnection> connection) {
  unpark();  // (none in practice: an exchange starts by taking the parked one)
  upstreams_.park(std::move(connection));
}

// The parked upstream goes to the worker's pool (closed instead when draining).
void ClientConnection::unpark() {
  if (!upstreams_.hasParked()) {
    return;
  }
  if (!keepsUpstreams()) {
    upstreams_.retireParked();
    return;
  }
  ctx_.pool->put(upstreams_.unpark());
}

void ClientConnection::retire(std::unique_ptr<UpstreamConnection> connection) {
  upstreams_.retire(std::move(connection));
}

bool ClientConnection::keepsUpstreams() const {
  return after_exchange_ != AfterExchange::Drain && !ctx_.draining;
}

// ---------------------------------------------------------------------------------------------
// The timer.

void ClientConnection::armTimer() {
  if (!closing()) {
    timer_.arm(idleTimeoutMs(), exchangeDeadline());
  }
}

std::uint64_t ClientConnection::idleTimeoutMs() const {
  return static_cast<std::uint64_t>(config().limits.idle_timeout.count());
}

// An idle keep-alive connection keeps little: TLS record buffers, write queues and scratch
// space go back after a second without a request (not at once: a busy client would pay for the
// memory twice per request). What a connection costs idle is what sluice costs at scale.
void ClientConnection::releaseIdleBuffers() {
  if (!betweenRequests() || codec_.pending() != 0 || transport_.corked()) {
    return;
  }
  unpark();  // an idle client's upstream may serve another client meanwhile
  ctx_.state->heap_shrank.store(true, std::memory_order_relaxed);
  transport_.releaseBuffers();
  exchange_.releaseBuffers();
  codec_.releaseBuffers();
}

void ClientConnection::onTimer() {
  Cork cork(*this);
  if (h2_) {
    h2_->collect();  // (a safe point: no stream's exchange is on the stack)
  }
  const ConnectionTimer::Due due = timer_.fired(idleTimeoutMs(), exchangeDeadline());
  if (due.release) {
    releaseIdleBuffers();
  }
  if (!due.phase && !due.other && !due.idle) {
    armTimer();  // progress moved the idle deadline on
    return;
  }
  if (state_ == ConnectionState::Lingering) {
    close("linger over");
    return;
  }
  if (state_ == ConnectionState::Serving && exchange_.onTimeout(due.other)) {
    return;  // a connect deadline (the next address), or no answer in time
  }
  if (state_ == ConnectionState::Multiplexing) {
    if (h2_->onTimeout(due.other) || (!due.idle && !due.phase)) {
      armTimer();
      return;  // the streams that waited were answered (504) or moved on; the others go on
    }
    // Idle with no stream waiting: GOAWAY, politely (docs/wire.md#http2).
    noteTunnelEnd(audit::Error::TimedOut);
    finishConnection();
    return;
  }
  // The handshake, or a request head, took too long, or the connection idled between requests
  // (or while its request body was held): nothing was asked, so nothing is answered.
  noteTunnelEnd(audit::Error::TimedOut);
  close(due.phase ? "handshake or request head too slow" : "idle timeout");
}

}  // namespace sluice::proxy::session
