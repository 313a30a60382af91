// How a connection ends (a polite finish with a linger, or a close), the upstream connections
// it keeps between requests or is closing, and its one timer.
#include <spdlog/spdlog.h>

#include "proxy/gateway_state.h"
#include "proxy/generation.h"
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
  release_deadline_ms_ = last_progress_ms_ + kReleaseIdleBuffersMs;
  armTimer();
  codec_.process();  // a pipelined request may already be here
}

void ClientConnection::finishConnection() {
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
  exchange_.releaseUpstream();
  unpark();
  flushAudit();  // (a record of what just happened, if any)
  client_.shutdownWrite();
  phase_deadline_ms_ = uv_now(ctx_.loop) + kLingerMs;
  transition(ConnectionState::Lingering);
  armTimer();
}

void ClientConnection::close(std::string_view why) {
  if (closing()) {
    return;
  }
  SPDLOG_DEBUG("[C{}] close: {}", facts_.id, why);
  exchange_.abandon();  // a request cut short still gets its record
  transition(ConnectionState::Closing);
  exchange_.dropUpstream();  // the lookup is cancelled: the resolver will not call back
  flushAudit();
  client_.close();
  timer_.close([this] { handleClosed(); });
  unpark();
}

void ClientConnection::handleClosed() {
  if (--open_handles_ == 0) {
    transition(ConnectionState::Closed);
    ctx_.finished(this);
  }
}

void ClientConnection::onClosed(io::TcpStream& stream) {
  for (auto it = closing_upstreams_.begin(); it != closing_upstreams_.end(); ++it) {
    if (&(*it)->stream == &stream) {
      closing_upstreams_.erase(it);
      break;
    }
  }
  handleClosed();
}

// ---------------------------------------------------------------------------------------------
// Upstream connections between exchanges.

std::unique_ptr<UpstreamConnection> ClientConnection::takeParked(const UpstreamKey& key) {
  if (parked_ && parked_->key == key) {
    return std::move(parked_);
  }
  unpark();
  return nullptr;
}

void ClientConnection::park(std::unique_ptr<UpstreamConnection> connection) {
  unpark();  // (none in practice: an exchange starts by taking the parked one)
  parked_ = std::move(connection);
  parked_->stream.setHandler(this);
  // Read while parked, as the pool does: EOF or stray bytes from an idle upstream retire it
  // here instead of failing the next request.
  parked_->stream.startReading();
}

// The parked upstream goes to the worker's pool (closed instead when draining).
void ClientConnection::unpark() {
  if (!parked_) {
    return;
  }
  if (!keepsUpstreams()) {
    retireParked();
    return;
  }
  ctx_.pool->put(std::move(parked_));
}

void ClientConnection::retireParked() {
  if (parked_) {
    retire(std::move(parked_));
  }
}

void ClientConnection::retire(std::unique_ptr<UpstreamConnection> connection) {
  connection->stream.setHandler(this);
  connection->stream.close();
  closing_upstreams_.push_back(std::move(connection));
  ++open_handles_;
}

bool ClientConnection::keepsUpstreams() const {
  return after_exchange_ != AfterExchange::Drain && !ctx_.draining;
}

// ---------------------------------------------------------------------------------------------
// Deadlines: one timer, armed for the earliest of the idle deadline, the connection's phase
// deadline (handshake, request head, linger), the exchange's (connect) and the moment to give
// idle buffers back.

void ClientConnection::armTimer() {
  if (closing()) {
    return;
  }
  const auto& limits = config().limits;
  std::uint64_t now = uv_now(ctx_.loop);
  std::uint64_t idle = last_progress_ms_ + static_cast<std::uint64_t>(limits.idle_timeout.count());
  std::uint64_t deadline = phase_deadline_ms_ != 0 ? std::min(idle, phase_deadline_ms_) : idle;
  if (std::uint64_t exchange = exchange_.deadline(); exchange != 0) {
    deadline = std::min(deadline, exchange);
  }
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
void ClientConnection::releaseIdleBuffers() {
  if (!betweenRequests() || codec_.pending() != 0 || cork_depth_ > 0) {
    return;
  }
  unpark();  // an idle client's upstream may serve another client meanwhile
  ctx_.state->heap_shrank.store(true, std::memory_order_relaxed);
  client_out_ = std::string();
  exchange_.releaseBuffers();
  if (client_tls_) {
    client_tls_->releaseBuffers();
  }
  client_.releaseBuffers();
  codec_.releaseBuffers();
}

void ClientConnection::onTimer() {
  Cork cork(*this);
  armed_for_ms_ = 0;
  std::uint64_t now = uv_now(ctx_.loop);
  const auto& limits = config().limits;
  if (release_deadline_ms_ != 0 && now >= release_deadline_ms_) {
    release_deadline_ms_ = 0;
    releaseIdleBuffers();
  }
  const bool phase_over = phase_deadline_ms_ != 0 && now >= phase_deadline_ms_;
  const std::uint64_t exchange_deadline = exchange_.deadline();
  const bool exchange_over = exchange_deadline != 0 && now >= exchange_deadline;
  const bool idle_over =
      now >= last_progress_ms_ + static_cast<std::uint64_t>(limits.idle_timeout.count());
  if (!phase_over && !exchange_over && !idle_over) {
    armTimer();  // progress moved the idle deadline on
    return;
  }
  if (state_ == ConnectionState::Lingering) {
    close("linger over");
    return;
  }
  if (state_ == ConnectionState::Serving && exchange_.onTimeout(exchange_over)) {
    return;  // a connect deadline (the next address), or no answer in time
  }
  // The handshake, or a request head, took too long, or the connection idled between requests
  // (or while its request body was held): nothing was asked, so nothing is answered.
  close(phase_over ? "handshake or request head too slow" : "idle timeout");
}

}  // namespace sluice::proxy::session
