#pragma once
// One generator thread: its own libuv loop, its share of the connections, its own statistics
// (no atomics on the request path). The run has phases, timed from a start shared by all
// threads:
//
//   keepalive, newconn, bulk:  warmup (nothing counted) -> measuring -> stop
//     stop: the duration ended, or this thread counted its share of --requests; connections
//     still in flight are abandoned, not counted.
//   idle:  opening (at most `concurrency` at once, each tried up to kIdleAttempts times)
//     -> every connection held or given up: HoldBarrier::settled() -> holding -> stop(),
//     called by main() after the hold.
//
// Ownership: owns its loop, connections, timers. start() runs the loop on a new thread;
// join() waits for it; stats() is valid after join(). stop() may be called from any thread.

#include <uv.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/loadgen/connection.h"
#include "bench/loadgen/target.h"
#include "proxy/io/timer.h"

namespace sluice::loadgen {

// Idle mode: main() waits here until every thread has its connections up (or given up).
class HoldBarrier {
 public:
  explicit HoldBarrier(int threads) : pending_(threads) {}
  void settled(std::uint64_t held);  // one thread is done opening
  std::uint64_t wait();              // the connections held, once every thread is done

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int pending_;
  std::uint64_t held_ = 0;
};

struct ThreadPlan {
  int connections = 0;  // connection slots: the thread's share of --concurrency (idle:
                        // of --connections)
  int concurrency = 0;  // idle: at most this many opening at once
  std::optional<std::uint64_t> quota;  // stop after this many counted outcomes (--requests)
  std::uint64_t start_ns = 0;          // uv_hrtime() of the run's start, common to all threads
  std::uint64_t warmup_ms = 0;
  std::optional<std::uint64_t> duration_ms;  // measured time after the warmup
};

class LoadThread {
 public:
  // Idle mode: at most this many connects per connection before it is given up.
  static constexpr int kIdleAttempts = 3;

  LoadThread(const Target& target, ThreadPlan plan, HoldBarrier* barrier);
  ~LoadThread();
  LoadThread(const LoadThread&) = delete;
  LoadThread& operator=(const LoadThread&) = delete;

  void start();
  void join();
  // Ends the run (closes every connection). Thread-safe; harmless once the run has ended.
  void stop();
  const ThreadStats& stats() const { return stats_; }

  // For the connections, on the loop thread.
  uv_loop_t* loop() { return &loop_; }
  std::span<char> plaintextBuffer() { return plaintext_; }
  bool running() const { return !stopping_; }
  void countBody(std::size_t n) {
    if (measuring_) {
      stats_.bytes += n;
    }
  }
  // A complete 2xx response.
  void onResponse(std::uint64_t latency_ns);
  // A failure; `detail` is copied only for the first one.
  void onFailure(ErrorKind kind, std::string_view detail);
  // Idle mode: a connection reached the hold.
  void onHeld();
  // The connection's stream has closed; it is handled at the next safe point.
  void onConnectionClosed(Connection& connection);

 private:
  static void onAsync(uv_async_t* async) noexcept;
  static void onIdle(uv_idle_t* idle) noexcept;
  void run();
  void beginMeasuring();
  void finishRun();
  void countOutcome();
  void handleClosed();
  void reopen(Connection& connection);
  void openMoreIdle();
  void sweep();

  const Target& target_;
  const ThreadPlan plan_;
  HoldBarrier* const barrier_;
  std::thread thread_;

  uv_loop_t loop_{};
  uv_async_t async_{};  // stop() from other threads
  uv_idle_t restart_idle_{};
  std::mutex async_mutex_;
  bool async_open_ = true;  // under async_mutex_: stop() may still send

  std::optional<proxy::io::Timer> warmup_timer_;
  std::optional<proxy::io::Timer> end_timer_;
  std::optional<proxy::io::Timer> sweep_timer_;
  std::vector<std::unique_ptr<Connection>> connections_;
  // Closed connections waiting for the safe point; two buffers swapped, never reallocated.
  std::vector<Connection*> closed_;
  std::vector<Connection*> closed_work_;
  std::vector<char> plaintext_;

  ThreadStats stats_;
  bool measuring_ = false;
  bool stopping_ = false;
  std::uint64_t outcomes_ = 0;  // successes and failures counted, against plan_.quota
  // Idle mode.
  std::size_t next_to_open_ = 0;
  int opening_ = 0;
  std::size_t settled_ = 0;
};

}  // namespace sluice::loadgen
