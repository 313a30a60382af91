#include "proxy/server/worker.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_set>

#include "policy/decision.h"
#include "proxy/dns/resolver.h"
#include "proxy/dns/sandbox_resolver.h"
#include "proxy/server/sandbox_dns.h"
#include "proxy/session/client_connection.h"
#include "proxy/session/upstream/http2_upstream_session.h"
#include "proxy/session/pool/upstream_pool.h"
#include "proxy/session/context/worker_context.h"

namespace sluice::proxy {

namespace {

// Idle upstream connections kept per (sandbox, H, port): enough for a client's parallel
// downloads from one mirror. What one sandbox and all may keep is configured
// (upstream.max_idle_per_sandbox, upstream.max_idle).
constexpr std::size_t kPooledPerKey = 16;
constexpr std::chrono::milliseconds kPooledIdleLimit{30000};

// RLIMIT_NOFILE's soft limit; 0 when unlimited (or unknown).
std::uint64_t descriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return 0;
  }
  return static_cast<std::uint64_t>(limit.rlim_cur);
}

// The pool's bounds for worker `index` of `workers`: its share of the total.
session::UpstreamPool::Limits poolLimits(const policy::Config& config, std::size_t workers,
                                         std::size_t index) {
  session::UpstreamPool::Limits limits;
  limits.per_key = kPooledPerKey;
  limits.per_sandbox = static_cast<std::size_t>(config.upstream.max_idle_per_sandbox);
  limits.total = session::idleShare(
      session::effectiveIdleBound(config.upstream.max_idle, descriptorLimit()), workers, index);
  limits.idle = std::min(kPooledIdleLimit, config.limits.idle_timeout);
  return limits;
}

bool sameDns(const policy::DnsSettings& a, const policy::DnsSettings& b) {
  return a.servers == b.servers && a.timeout == b.timeout && a.max_ttl == b.max_ttl;
}

// Keeps `object` until its close callback, then lets it go (a handle's memory outlives its
// uv_close).
template <typename T>
void closeLater(std::map<void*, std::shared_ptr<void>>& closing, std::unique_ptr<T> object) {
  T* raw = object.get();
  closing.emplace(raw, std::shared_ptr<void>(std::move(object)));
  raw->close([&closing, raw] { closing.erase(raw); });
}

}  // namespace

Worker::Worker(GatewayState& state, int index) : state_(state), index_(index) {}

Worker::~Worker() {
  if (thread_.joinable()) {
    shutdown();
    thread_.join();
  }
}

Result<Ok, std::string> Worker::start(std::shared_ptr<const Generation> generation,
                                      ListenSet sockets) {
  uv_loop_init(&loop_);
  async_.emplace(&loop_, [this] { handleCommands(); });
  flush_audit_.emplace(&loop_, [this] {
    for (const auto& sink : generation_->audit_sinks) {
      sink->flush();
    }
  });
  flush_audit_->unref();
  retire_timer_.emplace(&loop_);
  finished_.emplace(&loop_, [this](std::size_t) { sessionsFreed(); });
  resolver_ = std::make_unique<dns::Resolver>(&loop_, generation->config->dns);
  pool_ = std::make_unique<session::UpstreamPool>(
      &loop_, poolLimits(*generation->config, std::max<std::size_t>(peers_.size(), 1),
                         static_cast<std::size_t>(index_)));
  context_ = std::make_unique<session::WorkerContext>();
  context_->worker = index_;
  context_->loop = &loop_;
  context_->state = &state_;
  context_->resolver = resolver_.get();
  context_->pool = pool_.get();
  h2_upstreams_ = std::make_unique<session::Http2UpstreamSessions>(*context_, *pool_);
  context_->h2_upstreams = h2_upstreams_.get();
  context_->finished = [this](session::ClientConnection* s) { sessionFinished(s); };

  auto applied = apply(std::move(generation), std::move(sockets));
  if (!applied) {
    // Unwind on the loop: close what was opened, then run it to completion.
    closeAll();
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    return applied;
  }
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_open_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return Ok{};
}

void Worker::adopt(std::shared_ptr<const Generation> generation, ListenSet sockets) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  if (!inbox_open_) {
    return;  // shutting down: nothing to take up
  }
  next_generation_ = std::move(generation);
  next_sockets_ = std::move(sockets);
  async_->send();
}

Result<Ok, std::string> Worker::apply(std::shared_ptr<const Generation> generation,
                                      ListenSet sockets) {
  const policy::DnsSettings* dns_before =
      generation_ != nullptr ? &generation_->config->dns : nullptr;
  // The previous generation stays alive until the end of this function (dns_before).
  std::shared_ptr<const Generation> previous = std::move(generation_);
  generation_ = std::move(generation);
  sockets_ = std::move(sockets);
  // Lets go of the generation this loop last judged by even if nothing arrives to ask (an idle
  // worker would otherwise keep the old one, its secrets and audit files, alive).
  context_->currentGeneration();
  syncResolver(dns_before);
  syncPool();
  if (previous != nullptr) {
    drainRemovedSandboxes();
  }
  if (draining_) {
    return Ok{};  // stopped accepting: no listener opens again
  }
  auto listening = syncListeners();
  if (!listening) {
    return listening;
  }
  return syncSandboxResolvers();
}

Result<Ok, std::string> Worker::syncListeners() {
  std::map<const ListenSocket*, std::unique_ptr<io::TcpListener>> kept;
  Result<Ok, std::string> result = Ok{};
  for (const auto& socket : sockets_) {
    if (auto it = listeners_.find(socket.get()); it != listeners_.end()) {
      kept.emplace(socket.get(), std::move(it->second));
      listeners_.erase(it);
      continue;
    }
    std::shared_ptr<const ListenSocket> held = socket;
    auto listener = std::make_unique<io::TcpListener>(
        &loop_, [this, held](int fd) { onAccepted(held, fd); });
    auto started = listener->start(socket->socket);
    kept.emplace(socket.get(), std::move(listener));
    if (!started && result) {
      result = Err{"sandbox '" + socket->sandbox + "' " + started.error()};
    }
  }
  // What is left belongs to listeners the new generation does not have.
  for (auto& [socket, listener] : listeners_) {
    closeLater(closing_, std::move(listener));
  }
  listeners_ = std::move(kept);
  return result;
}

Result<Ok, std::string> Worker::syncSandboxResolvers() {
  if (index_ != 0) {
    return Ok{};
  }
  if (!sandbox_dns_) {
    sandbox_dns_.emplace(
        &loop_, [this] { return context_->currentGeneration(); },
        [this](std::unique_ptr<dns::SandboxResolver> resolver) {
          closeLater(closing_, std::move(resolver));
        });
  }
  return sandbox_dns_->sync(*generation_);
}

// The pool's bounds follow the configuration, and its idle connections that no request can
// take any more go: those of sandboxes the generation no longer has (or has with another CA,
// hence another runtime), and those verified under an upstream trust it replaced.
void Worker::syncPool() {
  const policy::Config& config = *generation_->config;
  const std::size_t bound =
      session::effectiveIdleBound(config.upstream.max_idle, descriptorLimit());
  if (index_ == 0 && bound != config.upstream.max_idle && bound != logged_idle_bound_) {
    logged_idle_bound_ = bound;
    spdlog::info("sluice: upstream.max_idle {} held to {}: a quarter of the descriptor limit",
                 config.upstream.max_idle, bound);
  }
  pool_->setLimits(poolLimits(config, std::max<std::size_t>(peers_.size(), 1),
                              static_cast<std::size_t>(index_)));
  std::unordered_set<std::uint64_t> runtimes;
  for (const SandboxView& view : generation_->sandboxes) {
    runtimes.insert(view.runtime->id);
  }
  const std::uint64_t trust = generation_->upstream_trust_id;
  const auto unusable = [&](const session::UpstreamKey& key) {
    return key.trust != trust || runtimes.count(key.sandbox) == 0;
  };
  pool_->closeWhere(unusable);
  h2_upstreams_->endWhere(unusable);
}

// New DNS settings: new lookups go to a new resolver; the old one finishes what it was asked
// (its sessions hold cancel-on-destroy lookups on it) and then closes.
void Worker::syncResolver(const policy::DnsSettings* before) {
  const policy::DnsSettings& now = generation_->config->dns;
  if (before == nullptr || sameDns(*before, now)) {
    return;
  }
  retired_resolvers_.push_back(std::move(resolver_));
  resolver_ = std::make_unique<dns::Resolver>(&loop_, now);
  context_->resolver = resolver_.get();
  retire_timer_->start(before->timeout + std::chrono::milliseconds(500),
                       [this] { closeRetiredResolvers(); });
}

void Worker::closeRetiredResolvers() {
  std::erase_if(retired_resolvers_, [this](std::unique_ptr<dns::Resolver>& r) {
    if (r->inFlight() != 0) {
      return false;
    }
    closeLater(closing_, std::move(r));
    return true;
  });
  if (!retired_resolvers_.empty()) {
    retire_timer_->start(std::chrono::milliseconds(500), [this] { closeRetiredResolvers(); });
  }
}

// A sandbox that is gone, or came back with another CA (its clients trust the old one): its
// connections finish the exchange in progress and close; new ones are no longer accepted.
// Judged by the generation published, which may already be newer than the one this loop is
// taking up: a session that took that one up is never drained for being ahead.
void Worker::drainRemovedSandboxes() {
  const std::shared_ptr<const Generation> current = context_->currentGeneration();
  forEachSession([&](session::ClientConnection& s) {
    const SandboxView* now = current->find(s.runtime().name);
    if (now == nullptr || now->runtime.get() != &s.runtime()) {
      s.drain();
    }
  });
}

// Walks a snapshot: a session may finish, and leave sessions_, while another is drained.
void Worker::forEachSession(const std::function<void(session::ClientConnection&)>& fn) {
  std::vector<session::ClientConnection*> current;
  current.reserve(sessions_.size());
  for (auto& [ptr, owned] : sessions_) {
    current.push_back(ptr);
  }
  for (session::ClientConnection* s : current) {
    if (sessions_.count(s) != 0) {
      fn(*s);
    }
  }
}

void Worker::run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&loop_);
  if (rc != 0) {
    spdlog::warn("worker {}: loop closed with handles still open ({})", index_, uv_strerror(rc));
  }
}

void Worker::stopAccepting() {
  stop_accepting_.store(true);
  if (async_) {
    async_->send();
  }
}

void Worker::shutdown() {
  shutdown_.store(true);
  if (async_) {
    async_->send();
  }
}

void Worker::join() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

void Worker::handleCommands() {
  if (shutdown_.load()) {
    closeAll();
    return;
  }
  std::vector<Handover> handed;
  std::shared_ptr<const Generation> next;
  ListenSet next_sockets;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    handed.swap(inbox_);
    next = std::move(next_generation_);
    next_sockets = std::move(next_sockets_);
  }
  if (next != nullptr) {
    if (auto applied = apply(std::move(next), std::move(next_sockets)); !applied) {
      spdlog::error("worker {}: {}", index_, applied.error());
    }
  }
  for (const Handover& h : handed) {
    serve(*h.socket, h.fd);
  }
  if (stop_accepting_.load() && !draining_) {
    draining_ = true;
    context_->draining = true;
    closeListeners();
    sockets_.clear();  // with the main thread's, the last fds of the sockets: refused from now
    forEachSession([](session::ClientConnection& s) { s.drain(); });
  }
}

// A connection counts in busy_ of the worker that will serve it from the moment it is chosen
// (handed-over ones while they wait in the inbox), until its session is gone.
void Worker::onAccepted(const std::shared_ptr<const ListenSocket>& socket, int fd) {
  Worker* target = leastBusy();
  if (target != this) {
    target->busy_.fetch_add(1);
    if (target->handOver(Handover{fd, socket})) {
      SPDLOG_DEBUG("worker {}: a connection handed to worker {}", index_, target->index_);
      return;
    }
    target->busy_.fetch_sub(1);
  }
  busy_.fetch_add(1);
  serve(*socket, fd);
}

// `this`, unless a peer still taking connections is less busy by two or more (by one would
// bounce connections between equals for nothing).
Worker* Worker::leastBusy() {
  Worker* best = this;
  std::size_t best_busy = busy_.load(std::memory_order_relaxed);
  for (Worker* peer : peers_) {
    if (peer == this || peer->stop_accepting_.load() || peer->shutdown_.load()) {
      continue;
    }
    std::size_t busy = peer->busy_.load(std::memory_order_relaxed);
    if (busy + 2 <= best_busy) {
      best = peer;
      best_busy = busy;
    }
  }
  return best;
}

bool Worker::handOver(Handover h) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  if (!inbox_open_) {
    return false;
  }
  inbox_.push_back(std::move(h));
  async_->send();  // under the lock: closeInbox() cannot close async_ meanwhile
  return true;
}

// `fd` is already counted in busy_; its session (or the close below) takes it off.
void Worker::serve(const ListenSocket& socket, int fd) {
  // The sandbox as the generation in force now has it; none if a reload removed it since the
  // connection was accepted.
  // A copy: what the session is made with must not change under it.
  const std::shared_ptr<const Generation> generation = context_->currentGeneration();
  const SandboxView* view = generation->find(socket.sandbox);
  // stop_accepting_ as well as draining_: between the main thread's stopAccepting() and this
  // loop's turn that reads it, a connection accepted (or handed over) is new all the same.
  if (draining_ || stop_accepting_.load() || view == nullptr) {
    ::close(fd);  // the kernel resets it; a draining gateway takes nothing new
    busy_.fetch_sub(1);
    return;
  }
  if (view->audit != nullptr && view->audit->overPendingLimit()) {
    // Its audit file keeps as many unwritten records as it may, and a request read now would
    // add one. Closed before a byte is read: nothing was asked, nothing is owed a record.
    view->audit->countRefusedConnection();
    ::close(fd);
    busy_.fetch_sub(1);
    return;
  }
  std::uint64_t id = state_.next_connection_id.fetch_add(1);
  auto owned = std::make_unique<session::ClientConnection>(
      *context_, generation, *view, id,
      socket.transparent ? session::ClientConnection::Listener::Transparent
                         : session::ClientConnection::Listener::Explicit);
  session::ClientConnection* s = owned.get();
  sessions_.emplace(s, std::move(owned));
  session_count_.store(sessions_.size());
  // Over a limit: accepted (so the kernel queue does not fill), recorded and closed at once.
  // The process-wide limit protects the gateway and says nothing; a sandbox's own limit tells
  // its client why.
  const auto& sandbox_max = view->sandbox->limits.max_connections;
  const session::ClientConnection::OpenCount open = s->openedAs();
  bool over_global = open.gateway > generation->config->limits.max_connections;
  bool over_sandbox = sandbox_max && static_cast<std::uint64_t>(open.sandbox) > *sandbox_max;
  if (!s->start(fd)) {
    return;
  }
  if (over_global || over_sandbox) {
    s->refuseConnection(policy::Reason::TooManyConnections, !over_global);
  }
}

void Worker::sessionFinished(session::ClientConnection* s) {
  auto it = sessions_.find(s);
  finished_->add(std::move(it->second));
  sessions_.erase(it);
  session_count_.store(sessions_.size());
  busy_.fetch_sub(1);
}

// On the turn after sessions finished, once they are freed.
void Worker::sessionsFreed() {
  state_.heap_shrank.store(true, std::memory_order_relaxed);
  if (closed_all_ && sessions_.empty()) {
    finished_->close(nullptr);
  }
}

// No more hand-overs: what is queued is closed, and async_ may close.
void Worker::closeInbox() {
  std::vector<Handover> left;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_open_ = false;
    left.swap(inbox_);
  }
  for (const Handover& h : left) {
    ::close(h.fd);
    busy_.fetch_sub(1);
  }
}

void Worker::closeListeners() {
  for (auto& [socket, listener] : listeners_) {
    closeLater(closing_, std::move(listener));
  }
  listeners_.clear();
}

void Worker::closeAll() {
  if (closed_all_) {
    return;
  }
  closed_all_ = true;
  draining_ = true;
  context_->draining = true;
  closeListeners();
  forEachSession([](session::ClientConnection& s) { s.abort(); });
  h2_upstreams_->close(nullptr);  // (their connections close in the pool)
  pool_->close(nullptr);
  resolver_->close(nullptr);
  if (sandbox_dns_) {
    sandbox_dns_->close();  // its pending DNS records are written first
  }
  for (auto& r : retired_resolvers_) {
    closeLater(closing_, std::move(r));
  }
  retired_resolvers_.clear();
  retire_timer_->close(nullptr);
  closeInbox();
  async_->close(nullptr);
  flush_audit_->close(nullptr);
  // Aborted sessions finish from their close callbacks; the last one freed closes the list.
  if (sessions_.empty() && finished_->pending() == 0) {
    finished_->close(nullptr);
  }
}

}  // namespace sluice::proxy
