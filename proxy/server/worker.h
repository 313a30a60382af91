#pragma once
// One worker: a thread with its own libuv loop, its own view of every listening socket, its own
// resolver and upstream connection pool, and the sessions it accepted. Workers share nothing
// mutable but the thread-safe parts of GatewayState and the generations (leaf caches, audit
// sinks, counters, rate buckets).
//
// Control from other threads goes through one io::Async: adopt() (a reloaded configuration:
// new connections and requests use the new generation, listeners open and close to match, and
// the connections of removed sandboxes drain), stopAccepting() (drain: listeners close, idle
// keep-alive connections close, busy ones finish their exchange), shutdown() (close everything
// now), and connections handed over by another worker. The thread ends when its loop has no
// handles left.
//
// Every worker accepts from every listening socket (one kernel queue), and the first loop to
// wake takes a whole burst of connections; left at that, one core serves a burst of 32 clients
// while the other idles. So a worker keeps an accepted connection only if no peer is less busy
// by two or more, and otherwise hands the fd to the least busy one. Busy = sessions plus
// connections handed over and not started yet.

#include <uv.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "proxy/io/deferred_delete.h"
#include "proxy/io/loop_handles.h"
#include "proxy/io/tcp_listener.h"
#include "proxy/io/timer.h"
#include "proxy/net/bound_socket.h"
#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/server/sandbox_dns.h"

namespace sluice::proxy {

namespace dns {
class Resolver;
class SandboxResolver;
}  // namespace dns
namespace session {
class ClientConnection;
class UpstreamPool;
class Http2UpstreamSessions;
struct WorkerContext;
}  // namespace session

// A bound socket, the sandbox whose listener it is (by name: the sandbox of the generation in
// force when a connection comes), and which kind of listener. Shared by the main thread and the
// workers; the socket closes with the last of them, so a listener of a removed sandbox stops
// taking connections once every worker has adopted the generation without it.
struct ListenSocket {
  net::BoundSocket socket;
  std::string sandbox;
  bool transparent = false;
};
using ListenSet = std::vector<std::shared_ptr<const ListenSocket>>;

class Worker {
 public:
  Worker(GatewayState& state, int index);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The workers that accepted connections may be handed to (this one included). Before start().
  void setPeers(std::vector<Worker*> peers) { peers_ = std::move(peers); }
  // Starts the thread with the first generation. Fails if a listener cannot be attached to
  // the loop.
  Result<Ok, std::string> start(std::shared_ptr<const Generation> generation, ListenSet sockets);
  // Thread-safe: hands the worker a new generation and the listeners that go with it.
  void adopt(std::shared_ptr<const Generation> generation, ListenSet sockets);
  void stopAccepting();  // thread-safe
  void shutdown();       // thread-safe
  void join();
  std::size_t sessions() const { return session_count_.load(); }

 private:
  void run();
  void handleCommands();
  // A connection handed from one worker to another.
  struct Handover {
    int fd = -1;
    std::shared_ptr<const ListenSocket> socket;
  };
  // Takes up a generation: listeners, the sandboxes' resolvers and the DNS resolver follow it,
  // and sessions of sandboxes it no longer has (or has with another CA) drain.
  Result<Ok, std::string> apply(std::shared_ptr<const Generation> generation, ListenSet sockets);
  Result<Ok, std::string> syncListeners();
  Result<Ok, std::string> syncSandboxResolvers();
  void syncResolver(const policy::DnsSettings* before);
  void syncPool();
  void drainRemovedSandboxes();
  void forEachSession(const std::function<void(session::ClientConnection&)>& fn);
  void onAccepted(const std::shared_ptr<const ListenSocket>& socket, int fd);
  Worker* leastBusy();
  // Queues `h` for this worker's loop; false if it takes no more (shutting down).
  bool handOver(Handover h);
  void serve(const ListenSocket& socket, int fd);
  void closeInbox();
  // A session whose every handle has closed: out of sessions_, freed on a later turn.
  void sessionFinished(session::ClientConnection* session);
  void sessionsFreed();
  void closeListeners();
  void closeAll();
  // Resolvers replaced by a reload close once their lookups are over.
  void closeRetiredResolvers();

  GatewayState& state_;
  int index_;
  // The generation in force on this loop, and the listeners that go with it.
  std::shared_ptr<const Generation> generation_;
  ListenSet sockets_;
  uv_loop_t loop_{};
  std::optional<io::Async> async_;
  // Runs after each round of I/O callbacks: the audit lines they wrote go out in one write.
  std::optional<io::Check> flush_audit_;
  std::thread thread_;
  std::atomic<bool> stop_accepting_{false};
  std::atomic<bool> shutdown_{false};
  bool draining_ = false;
  bool closed_all_ = false;
  std::map<const ListenSocket*, std::unique_ptr<io::TcpListener>> listeners_;
  // Listeners and sandbox resolvers being closed, kept until their close callback.
  std::map<void*, std::shared_ptr<void>> closing_;
  std::unique_ptr<dns::Resolver> resolver_;
  std::vector<std::unique_ptr<dns::Resolver>> retired_resolvers_;
  std::optional<io::Timer> retire_timer_;
  // The sandboxes' resolvers (dns_listen) and their DNS records: worker 0 only (one UDP socket
  // has one owner).
  std::optional<SandboxDns> sandbox_dns_;
  std::unique_ptr<session::UpstreamPool> pool_;
  std::unique_ptr<session::Http2UpstreamSessions> h2_upstreams_;
  std::size_t logged_idle_bound_ = 0;  // the last bound held below upstream.max_idle, logged
  std::unique_ptr<session::WorkerContext> context_;
  std::unordered_map<session::ClientConnection*, std::unique_ptr<session::ClientConnection>> sessions_;
  // Finished sessions: a session hands itself back (WorkerContext::finished) from the close
  // callback of its last handle, with its own code still below on the stack, so it is freed
  // on the loop's next turn instead. Closed once closeAll() has run and no session is left.
  std::optional<io::DeferredDelete<session::ClientConnection>> finished_;
  std::atomic<std::size_t> session_count_{0};
  std::atomic<std::size_t> busy_{0};
  std::vector<Worker*> peers_;
  std::mutex inbox_mutex_;
  std::vector<Handover> inbox_;  // guarded by inbox_mutex_
  // A generation handed over by adopt() and not yet taken up; guarded by inbox_mutex_.
  std::shared_ptr<const Generation> next_generation_;
  ListenSet next_sockets_;
  // Guarded by inbox_mutex_; async_ is initialised and open while true: from start() (a peer
  // may accept before this worker's loop exists) until closeAll().
  bool inbox_open_ = false;
};

}  // namespace sluice::proxy
