// How a connection ends (a polite finish with a linger, or a close), the upstream connections
// it keeps between requests or is closing, and its one timer.
#include <spdlog/spdlog.h>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/session/context/state_change.h"

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

bool ClientConnection::onRequestsOver() {
  if (after_exchange_ != AfterExchange::ReadNext || codec_->goingAway()) {
    finishConnection();
    return false;
  }
  noteProgress();  // idle_timeout counts from the last request's end
  timer_.setRelease(timer_.lastProgress() + kReleaseIdleBuffersMs);
  armTimer();
  return true;
}

void ClientConnection::finishConnection() {
  if (closing() || state_ == ConnectionState::Lingering) {
    return;
  }
  if (codec_) {
    // HTTP/2: GOAWAY (unless said), the streams still in flight cut short, on record; every
    // request's upstream is released.
    codec_->finish();
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
  if (codec_) {
    codec_->abandon();  // a request cut short still gets its record
  }
  recordQuietTunnel();
  transition(ConnectionState::Closing);
  if (codec_) {
    codec_->dropUpstreams();  // lookups are cancelled: the resolver will not call back
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
    timer_.arm(connectionIdleMs(), requestDeadline());
  }
}

std::uint64_t ClientConnection::idleTimeoutMs() const {
  return static_cast<std::uint64_t>(config().limits.idle_timeout.count());
}

std::uint64_t ClientConnection::connectionIdleMs() const {
  return codec_ && state_ == ConnectionState::Serving && codec_->timesRequests() ? 0
                                                                                 : idleTimeoutMs();
}

// An idle keep-alive connection keeps little: TLS record buffers, write queues and scratch
// space go back after a second without a request (not at once: a busy client would pay for the
// memory twice per request). What a connection costs idle is what sluice costs at scale.
void ClientConnection::releaseIdleBuffers() {
  if (state_ != ConnectionState::Serving || !codec_->idle() || transport_.corked()) {
    return;
  }
  unpark();  // an idle client's upstream may serve another client meanwhile
  ctx_.state->heap_shrank.store(true, std::memory_order_relaxed);
  transport_.releaseBuffers();
  codec_->releaseBuffers();
}

void ClientConnection::onTimer() {
  Cork cork(*this);
  collect();
  const ConnectionTimer::Due due = timer_.fired(connectionIdleMs(), requestDeadline());
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
  if (state_ == ConnectionState::Serving) {
    // A request's deadline (504, the next address), or the connection idled: its codec says
    // what that means for the requests in flight, and how the connection ends.
    codec_->onTimeout(Expired{due.phase, due.other, due.idle});
    return;
  }
  // The handshake, or the proxy head, took too long: nothing was asked, so nothing is answered.
  noteTunnelEnd(audit::Error::TimedOut);
  close(due.phase ? "handshake or request head too slow" : "idle timeout");
}

}  // namespace sluice::proxy::session
