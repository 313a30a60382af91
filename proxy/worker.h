#pragma once
// One worker: a thread with its own libuv loop, its own view of every listening socket, its own
// resolver and upstream connection pool, and the sessions it accepted. Workers share nothing
// mutable but GatewayState's thread-safe parts (leaf caches, audit sinks, counters).
//
// Control from other threads goes through one uv_async_t: stopAccepting() (drain: listeners
// close, idle keep-alive connections close, busy ones finish their exchange), shutdown()
// (close everything now), and connections handed over by another worker. The thread ends when
// its loop has no handles left.
//
// Every worker accepts from every listening socket (one kernel queue), and the first loop to
// wake takes a whole burst of connections; left at that, one core serves a burst of 32 clients
// while the other idles. So a worker keeps an accepted connection only if no peer is less busy
// by two or more, and otherwise hands the fd to the least busy one. Busy = sessions plus
// connections handed over and not started yet.

#include <uv.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "proxy/gateway_state.h"
#include "proxy/io/tcp_listener.h"

namespace sluice::proxy {

namespace dns {
class Resolver;
class SandboxResolver;
}  // namespace dns
namespace session {
class Session;
class UpstreamPool;
struct WorkerContext;
}  // namespace session

// A bound socket, the sandbox whose listener it is, and which kind of listener.
struct ListenSocket {
  io::BoundSocket socket;
  SandboxRuntime* sandbox = nullptr;
  bool transparent = false;
};

class Worker {
 public:
  Worker(GatewayState& state, const std::vector<ListenSocket>& sockets, int index);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The workers that accepted connections may be handed to (this one included). Before start().
  void setPeers(std::vector<Worker*> peers) { peers_ = std::move(peers); }
  // Starts the thread. Fails if a listener cannot be attached to the loop.
  Result<Ok, std::string> start();
  void stopAccepting();  // thread-safe
  void shutdown();       // thread-safe
  void join();
  std::size_t sessions() const { return session_count_.load(); }

 private:
  static void onAsync(uv_async_t* async) noexcept;
  void run();
  void handleCommands();
  // A connection handed from one worker to another.
  struct Handover {
    int fd = -1;
    SandboxRuntime* sandbox = nullptr;
    bool transparent = false;
  };
  void onAccepted(SandboxRuntime& sandbox, bool transparent, int fd);
  Worker* leastBusy();
  // Queues `h` for this worker's loop; false if it takes no more (shutting down).
  bool handOver(const Handover& h);
  void serve(SandboxRuntime& sandbox, bool transparent, int fd);
  void closeInbox();
  void sessionFinished(session::Session* session);
  void closeListeners();
  void closeAll();

  GatewayState& state_;
  const std::vector<ListenSocket>& sockets_;
  int index_;
  uv_loop_t loop_{};
  uv_async_t async_{};
  // Runs after each round of I/O callbacks: the audit lines they wrote go out in one write.
  uv_check_t flush_audit_{};
  std::thread thread_;
  std::atomic<bool> stop_accepting_{false};
  std::atomic<bool> shutdown_{false};
  bool draining_ = false;
  bool closed_all_ = false;
  std::vector<std::unique_ptr<io::TcpListener>> listeners_;
  std::unique_ptr<dns::Resolver> resolver_;
  // The sandboxes' resolvers (dns_listen), all on worker 0: one UDP socket has one owner.
  std::vector<std::unique_ptr<dns::SandboxResolver>> sandbox_resolvers_;
  std::unique_ptr<session::UpstreamPool> pool_;
  std::unique_ptr<session::WorkerContext> context_;
  std::unordered_map<session::Session*, std::unique_ptr<session::Session>> sessions_;
  std::atomic<std::size_t> session_count_{0};
  std::atomic<std::size_t> busy_{0};
  std::vector<Worker*> peers_;
  std::mutex inbox_mutex_;
  std::vector<Handover> inbox_;  // guarded by inbox_mutex_
  // Guarded by inbox_mutex_; async_ is initialised and open while true: from start() (a peer
  // may accept before this worker's loop exists) until closeAll().
  bool inbox_open_ = false;
};

}  // namespace sluice::proxy
