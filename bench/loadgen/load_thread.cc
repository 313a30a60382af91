#include "bench/loadgen/load_thread.h"

#include <algorithm>
#include <cassert>
#include <chrono>

namespace sluice::loadgen {

namespace {

// Plaintext is decrypted into one buffer per thread: as large as TcpStream's read buffer, so
// one socket read of TLS records is decrypted in one call.
constexpr std::size_t kPlaintextBytes = 64 * 1024;
constexpr std::chrono::milliseconds kSweepInterval{100};

std::uint64_t msUntil(std::uint64_t deadline_ns) {
  std::uint64_t now = uv_hrtime();
  return deadline_ns > now ? (deadline_ns - now + 999'999) / 1'000'000 : 0;
}

}  // namespace

void HoldBarrier::settled(std::uint64_t held) {
  std::lock_guard lock(mutex_);
  held_ += held;
  if (--pending_ == 0) {
    done_.notify_all();
  }
}

std::uint64_t HoldBarrier::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ <= 0; });
  return held_;
}

LoadThread::LoadThread(const Target& target, ThreadPlan plan, HoldBarrier* barrier)
    : target_(target), plan_(plan), barrier_(barrier) {
  // The loop and the async handle exist before the thread does, so stop() is valid at once.
  uv_loop_init(&loop_);
  uv_async_init(&loop_, &async_, &LoadThread::onAsync);
  async_.data = this;
}

LoadThread::~LoadThread() { join(); }

void LoadThread::start() {
  thread_ = std::thread([this] { run(); });
}

void LoadThread::join() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

void LoadThread::stop() {
  std::lock_guard lock(async_mutex_);
  if (async_open_) {
    uv_async_send(&async_);
  }
}

void LoadThread::onAsync(uv_async_t* async) noexcept {
  static_cast<LoadThread*>(async->data)->finishRun();
}

void LoadThread::run() {
  plaintext_.resize(kPlaintextBytes);
  const auto slots = static_cast<std::size_t>(plan_.connections);
  connections_.reserve(slots);
  for (std::size_t i = 0; i < slots; ++i) {
    connections_.push_back(std::make_unique<Connection>(*this, target_));
  }
  closed_.reserve(slots);
  closed_work_.reserve(slots);
  uv_idle_init(&loop_, &restart_idle_);
  restart_idle_.data = this;
  warmup_timer_.emplace(&loop_);
  end_timer_.emplace(&loop_);
  sweep_timer_.emplace(&loop_);

  if (target_.mode == Mode::Idle) {
    // Every setup counts: the window is the time it takes to bring the connections up.
    measuring_ = true;
    stats_.begin_ns = plan_.start_ns;
    openMoreIdle();
  } else {
    const std::uint64_t measure_at = plan_.start_ns + plan_.warmup_ms * 1'000'000;
    if (plan_.warmup_ms == 0) {
      beginMeasuring();  // before the first connect, whose failure may already count
    } else {
      warmup_timer_->start(std::chrono::milliseconds(msUntil(measure_at)),
                           [this] { beginMeasuring(); });
    }
    if (plan_.duration_ms) {
      end_timer_->start(
          std::chrono::milliseconds(msUntil(measure_at + *plan_.duration_ms * 1'000'000)),
          [this] { finishRun(); });
    }
    for (auto& connection : connections_) {
      connection->open();  // does nothing once the run has ended (a quota of failures)
    }
  }
  sweep_timer_->start(kSweepInterval, [this] { sweep(); });

  uv_run(&loop_, UV_RUN_DEFAULT);

  // Every handle is closed once the loop has nothing left; the close callbacks have run.
  connections_.clear();
  warmup_timer_.reset();
  end_timer_.reset();
  sweep_timer_.reset();
  int rc = uv_loop_close(&loop_);
  assert(rc == 0);
  (void)rc;
}

void LoadThread::beginMeasuring() {
  if (stopping_ || measuring_) {
    return;
  }
  measuring_ = true;
  stats_.begin_ns = uv_hrtime();
}

void LoadThread::finishRun() {
  if (stopping_) {
    return;
  }
  stopping_ = true;
  if (measuring_ || target_.mode == Mode::Idle) {
    if (stats_.end_ns == 0) {
      stats_.end_ns = uv_hrtime();
    }
  }
  measuring_ = false;
  for (auto& connection : connections_) {
    connection->abandon();
  }
  warmup_timer_->close({});
  end_timer_->close({});
  sweep_timer_->close({});
  uv_close(reinterpret_cast<uv_handle_t*>(&restart_idle_), nullptr);
  {
    std::lock_guard lock(async_mutex_);
    async_open_ = false;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
}

void LoadThread::onResponse(std::uint64_t latency_ns) {
  if (!measuring_) {
    return;
  }
  ++stats_.requests;
  stats_.latency.record(latency_ns);
  countOutcome();
}

void LoadThread::onFailure(ErrorKind kind, std::string_view detail) {
  if (stopping_) {
    return;
  }
  if (!measuring_) {
    ++stats_.ignored_errors;
    return;
  }
  ++stats_.errors;
  ++stats_.errors_by_kind[static_cast<std::size_t>(kind)];
  if (stats_.first_error.empty()) {
    stats_.first_error = std::string(toString(kind)) + ": " + std::string(detail);
  }
  countOutcome();
}

void LoadThread::countOutcome() {
  if (target_.mode != Mode::Idle && plan_.quota && ++outcomes_ >= *plan_.quota) {
    finishRun();
  }
}

void LoadThread::onHeld() {
  --opening_;
  ++settled_;
  ++stats_.held;
  openMoreIdle();
}

void LoadThread::openMoreIdle() {
  while (!stopping_ && opening_ < plan_.concurrency && next_to_open_ < connections_.size()) {
    ++opening_;
    connections_[next_to_open_++]->open();
  }
  if (settled_ == connections_.size() && stats_.end_ns == 0) {
    stats_.end_ns = uv_hrtime();
    barrier_->settled(stats_.held);
  }
}

void LoadThread::onConnectionClosed(Connection& connection) {
  if (stopping_) {
    return;  // the loop is winding down; the connection is destroyed with the thread
  }
  // Inside the stream's close callback: the stream may not be destroyed here.
  closed_.push_back(&connection);
  uv_idle_start(&restart_idle_, &LoadThread::onIdle);
}

void LoadThread::onIdle(uv_idle_t* idle) noexcept {
  static_cast<LoadThread*>(idle->data)->handleClosed();
}

void LoadThread::handleClosed() {
  uv_idle_stop(&restart_idle_);
  closed_.swap(closed_work_);
  for (Connection* connection : closed_work_) {
    connection->releaseStream();
    if (stopping_) {
      continue;
    }
    if (target_.mode != Mode::Idle) {
      reopen(*connection);
    } else if (connection->wasHeld()) {
      // Dropped during the hold: counted as an error, not replaced (the hold measures what
      // the peer keeps; reopening would hide that it closes idle connections).
    } else if (connection->consecutiveFailures() < kIdleAttempts) {
      reopen(*connection);
    } else {
      --opening_;
      ++settled_;
      openMoreIdle();
    }
  }
  closed_work_.clear();
}

void LoadThread::reopen(Connection& connection) {
  // A first failure is retried at once; a failing peer is not hammered in a tight loop.
  int failures = connection.consecutiveFailures();
  std::uint64_t delay_ms =
      failures < 2 ? 0
                   : std::min<std::uint64_t>(std::uint64_t{10} << std::min(failures - 2, 7), 1000);
  connection.reopenAfter(delay_ms, uv_now(&loop_));
}

void LoadThread::sweep() {
  const std::uint64_t now = uv_now(&loop_);
  for (auto& connection : connections_) {
    connection->tick(now);
  }
  sweep_timer_->start(kSweepInterval, [this] { sweep(); });
}

}  // namespace sluice::loadgen
