#include "proxy/server.h"

#include <spdlog/spdlog.h>
#include <uv.h>

#include <malloc.h>
#include <pthread.h>

#include <csignal>

#include "proxy/gateway_state.h"
#include "proxy/worker.h"

namespace sluice::proxy {

namespace {

// Memory that idle connections give back must leave the process, or RSS stays at the peak of
// the busiest second (BYPASSES-style floods included). Two glibc knobs:
// - allocations from this size up get their own mapping, returned at free(): the TLS record
//   buffers (about 17 KiB each, two per TLS connection, taken at the handshake and given back
//   when the connection idles) otherwise leave 17 KiB holes between the objects of
//   longer-lived connections;
// - every few seconds, if connections ended or idled meanwhile, malloc_trim() hands the free
//   pages inside the heap back. It walks the free lists of each arena under that arena's lock:
//   about 20 ms in all with 2,000 connections held (measured), on this thread, never a
//   worker's; a worker that allocates meanwhile waits for its arena, once per period at most.
constexpr int kMmapThreshold = 16 * 1024;
constexpr std::uint64_t kTrimEveryMs = 5000;

// The main thread's loop: signals, the drain, and trimming the heap.
// The signal handles stay open until the workers are gone and the signals blocked: closing the
// last handle of a signal restores its default action, and a SIGTERM arriving after that (a
// supervisor repeating itself) would kill the process with 143 instead of the clean 0. They
// are unref'd, so they do not keep the loop alive; `alive` does, until the shutdown.
struct SignalLoop {
  uv_loop_t loop{};
  uv_signal_t sigterm{};
  uv_signal_t sigint{};
  uv_signal_t sighup{};
  uv_async_t alive{};
  uv_timer_t poll{};
  uv_timer_t grace{};
  uv_timer_t trim{};
  GatewayState* state = nullptr;
  std::vector<std::unique_ptr<Worker>>* workers = nullptr;
  std::vector<ListenSocket>* sockets = nullptr;
  std::chrono::milliseconds grace_period{0};
  bool draining = false;
  bool shut_down = false;

  std::size_t sessions() const {
    std::size_t n = 0;
    for (const auto& w : *workers) {
      n += w->sessions();
    }
    return n;
  }

  void shutdownWorkers() {
    if (shut_down) {
      return;
    }
    shut_down = true;
    for (auto& w : *workers) {
      w->shutdown();
    }
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&alive),
                           reinterpret_cast<uv_handle_t*>(&poll),
                           reinterpret_cast<uv_handle_t*>(&grace),
                           reinterpret_cast<uv_handle_t*>(&trim)}) {
      uv_close(h, nullptr);
    }
  }

  void startDrain(int signum) {
    if (draining) {
      spdlog::warn("sluice: second signal {}: closing every connection now", signum);
      shutdownWorkers();
      return;
    }
    draining = true;
    spdlog::info("sluice: signal {}: no new connections; {} in flight get up to {} ms", signum,
                 sessions(), grace_period.count());
    for (auto& w : *workers) {
      w->stopAccepting();
    }
    // The workers close their dup()s; closing the original too makes the kernel refuse new
    // connections at once, instead of queueing them until exit.
    sockets->clear();
    uv_timer_start(&poll, &SignalLoop::onPoll, 20, 20);
    uv_timer_start(&grace, &SignalLoop::onGrace, static_cast<std::uint64_t>(grace_period.count()),
                   0);
  }

  static void onSignal(uv_signal_t* handle, int signum) noexcept {
    auto* self = static_cast<SignalLoop*>(handle->data);
    if (signum == SIGHUP) {
      spdlog::warn("sluice: SIGHUP: this build does not reload its configuration yet; the "
                   "running configuration stays in force");
      return;
    }
    self->startDrain(signum);
  }
  static void onPoll(uv_timer_t* handle) noexcept {
    auto* self = static_cast<SignalLoop*>(handle->data);
    if (self->sessions() == 0) {
      self->shutdownWorkers();
    }
  }
  static void onTrim(uv_timer_t* handle) noexcept {
    auto* self = static_cast<SignalLoop*>(handle->data);
    if (self->state->heap_shrank.exchange(false, std::memory_order_relaxed)) {
      malloc_trim(0);
    }
  }
  static void onGrace(uv_timer_t* handle) noexcept {
    auto* self = static_cast<SignalLoop*>(handle->data);
    spdlog::warn("sluice: shutdown_grace over: closing {} connections", self->sessions());
    self->shutdownWorkers();
  }
};

}  // namespace

Server::~Server() = default;

Result<std::unique_ptr<Server>, std::string> Server::create(
    std::shared_ptr<const policy::Config> config, SecretValues secrets, unsigned workers,
    std::vector<std::string>* notices) {
  for (const policy::Sandbox& sandbox : config->sandboxes) {
    if (sandbox.dns_listen && sandbox.dns_listen->isWildcard()) {
      // Its address is the answer the sandbox gets for every allowed name.
      return Err{"sandbox '" + sandbox.name + "': dns_listen " + sandbox.dns_listen->toString() +
                 " must be the sandbox-facing address, not a wildcard"};
    }
  }
  if (config->admin.listen) {
    return Err{std::string("admin.listen is not served by this build yet")};
  }
  if (config->sandboxes_dir) {
    return Err{std::string("sandboxes_dir is not served by this build yet")};
  }

  std::unique_ptr<Server> server(new Server());
  auto state = GatewayState::build(std::move(config), std::move(secrets), notices);
  if (!state) {
    return Err{state.error()};
  }
  server->state_ = std::move(state).value();

  for (auto& runtime : server->state_->sandboxes) {
    const policy::Sandbox& sandbox = *runtime->sandbox;
    for (bool transparent : {false, true}) {
      const auto& endpoint = transparent ? sandbox.transparent : sandbox.listen;
      if (!endpoint) {
        continue;
      }
      auto socket = io::BoundSocket::bind(*endpoint, 1024);
      if (!socket) {
        return Err{"sandbox '" + sandbox.name + (transparent ? "' transparent " : "' listen ") +
                   socket.error()};
      }
      server->sockets_.push_back(
          ListenSocket{std::move(socket).value(), runtime.get(), transparent});
    }
  }
  for (unsigned i = 0; i < std::max(1u, workers); ++i) {
    server->workers_.push_back(
        std::make_unique<Worker>(*server->state_, server->sockets_, static_cast<int>(i)));
  }
  std::vector<Worker*> peers;
  for (auto& worker : server->workers_) {
    peers.push_back(worker.get());
  }
  for (auto& worker : server->workers_) {
    worker->setPeers(peers);
  }
  return server;
}

int Server::run() {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that closes mid-write is an error value, not a death
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  // Workers start with SIGTERM, SIGINT and SIGHUP blocked (a thread inherits its creator's
  // mask), so these signals only ever reach the main thread and its loop.
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGHUP);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &handled, &previous);
  for (auto& worker : workers_) {
    auto started = worker->start();
    if (!started) {
      spdlog::error("sluice: {}", started.error());
      for (auto& w : workers_) {
        w->shutdown();
        w->join();
      }
      return 1;
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);

  SignalLoop signals;
  signals.workers = &workers_;
  signals.sockets = &sockets_;
  signals.grace_period = state_->config->limits.shutdown_grace;
  uv_loop_init(&signals.loop);
  for (uv_signal_t* s : {&signals.sigterm, &signals.sigint, &signals.sighup}) {
    uv_signal_init(&signals.loop, s);
    s->data = &signals;
  }
  uv_signal_start(&signals.sigterm, &SignalLoop::onSignal, SIGTERM);
  uv_signal_start(&signals.sigint, &SignalLoop::onSignal, SIGINT);
  uv_signal_start(&signals.sighup, &SignalLoop::onSignal, SIGHUP);
  for (uv_signal_t* s : {&signals.sigterm, &signals.sigint, &signals.sighup}) {
    uv_unref(reinterpret_cast<uv_handle_t*>(s));
  }
  uv_async_init(&signals.loop, &signals.alive, nullptr);
  uv_timer_init(&signals.loop, &signals.poll);
  uv_timer_init(&signals.loop, &signals.grace);
  signals.poll.data = &signals;
  signals.grace.data = &signals;
  signals.state = state_.get();
  uv_timer_init(&signals.loop, &signals.trim);
  signals.trim.data = &signals;
  uv_timer_start(&signals.trim, &SignalLoop::onTrim, kTrimEveryMs, kTrimEveryMs);
  uv_unref(reinterpret_cast<uv_handle_t*>(&signals.trim));

  spdlog::info("sluice: ready ({} workers)", workers_.size());
  uv_run(&signals.loop, UV_RUN_DEFAULT);

  for (auto& worker : workers_) {
    worker->join();
  }
  // The signal handles live in `signals`, on this stack, and libuv's process-wide handler
  // would reach them after we return. From here on the only thread left blocks the signals:
  // one arriving now stays pending until the process has exited with 0, so the handles can
  // be closed (which restores the default actions) and the loop freed.
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  for (uv_signal_t* s : {&signals.sigterm, &signals.sigint, &signals.sighup}) {
    uv_close(reinterpret_cast<uv_handle_t*>(s), nullptr);
  }
  uv_run(&signals.loop, UV_RUN_DEFAULT);
  uv_loop_close(&signals.loop);
  spdlog::info("sluice: stopped");
  return 0;
}

}  // namespace sluice::proxy
