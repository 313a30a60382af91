#include "proxy/worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "policy/decision.h"
#include "proxy/dns/resolver.h"
#include "proxy/dns/sandbox_resolver.h"
#include "proxy/session/session.h"
#include "proxy/session/upstream_pool.h"
#include "proxy/session/worker_context.h"

namespace sluice::proxy {

namespace {

// Idle upstream connections kept per (sandbox, H, port): enough for a client's parallel
// downloads from one mirror, few enough that a sandbox cannot hoard sockets.
constexpr std::size_t kPooledPerKey = 16;
constexpr std::chrono::milliseconds kPooledIdleLimit{30000};

// How long the sandbox may cache an answer of its resolver. The answer is sluice's own address,
// never a real one, so a stale answer can only send a connection to sluice, which decides anew.
constexpr std::uint32_t kSandboxAnswerTtl = 60;
constexpr std::uint16_t kTypeA = 1;
constexpr std::uint16_t kTypeAaaa = 28;

// The sandbox's resolver (SPEC §5.3): allowed names get the sandbox-facing gateway address of
// the asked family (dns_listen's, else the transparent listener's), other types of allowed
// names an empty answer, every other name NXDOMAIN. Nothing is ever forwarded.
dns::SandboxAnswer answerFor(const SandboxRuntime& runtime, std::string_view qname,
                             std::uint16_t qtype) {
  dns::SandboxAnswer answer;  // NXDOMAIN
  const policy::Sandbox& sandbox = *runtime.sandbox;
  auto name = policy::canonicalizeHost(qname);
  if (!name || !policy::mayResolve(sandbox, *name)) {
    SPDLOG_DEBUG("sandbox {} resolver: NXDOMAIN for a name its policy does not allow",
                 sandbox.name);
    return answer;
  }
  answer.kind = dns::SandboxAnswer::Kind::NoData;
  answer.ttl = kSandboxAnswerTtl;
  if (qtype != kTypeA && qtype != kTypeAaaa) {
    return answer;
  }
  bool want_v4 = qtype == kTypeA;
  for (const auto& own : {sandbox.dns_listen, sandbox.transparent}) {
    if (own && !own->isWildcard() && own->ip.isV4() == want_v4) {
      answer.kind = dns::SandboxAnswer::Kind::Addresses;
      answer.addresses.push_back(own->ip);
      break;
    }
  }
  return answer;
}

}  // namespace

Worker::Worker(GatewayState& state, const std::vector<ListenSocket>& sockets, int index)
    : state_(state), sockets_(sockets), index_(index) {}

Worker::~Worker() {
  if (thread_.joinable()) {
    shutdown();
    thread_.join();
  }
}

Result<Ok, std::string> Worker::start() {
  uv_loop_init(&loop_);
  uv_async_init(&loop_, &async_, &Worker::onAsync);
  async_.data = this;
  uv_check_init(&loop_, &flush_audit_);
  flush_audit_.data = this;
  uv_check_start(&flush_audit_, [](uv_check_t* check) noexcept {
    static_cast<Worker*>(check->data)->state_.audit->flushAll();
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(&flush_audit_));
  resolver_ = std::make_unique<dns::Resolver>(&loop_, state_.config->dns);
  pool_ = std::make_unique<session::UpstreamPool>(
      &loop_, kPooledPerKey, std::min(kPooledIdleLimit, state_.config->limits.idle_timeout));
  context_ = std::make_unique<session::WorkerContext>();
  context_->worker = index_;
  context_->loop = &loop_;
  context_->state = &state_;
  context_->resolver = resolver_.get();
  context_->pool = pool_.get();
  context_->finished = [this](session::Session* s) { sessionFinished(s); };

  for (const ListenSocket& socket : sockets_) {
    SandboxRuntime* sandbox = socket.sandbox;
    bool transparent = socket.transparent;
    auto listener = std::make_unique<io::TcpListener>(
        &loop_, [this, sandbox, transparent](int fd) { onAccepted(*sandbox, transparent, fd); });
    auto started = listener->start(socket.socket);
    listeners_.push_back(std::move(listener));
    if (!started) {
      // Unwind on the loop: close what was opened, then run it to completion.
      closeAll();
      uv_run(&loop_, UV_RUN_DEFAULT);
      uv_loop_close(&loop_);
      return Err{started.error()};
    }
  }
  if (index_ == 0) {
    for (const auto& runtime : state_.sandboxes) {
      if (!runtime->sandbox->dns_listen) {
        continue;
      }
      const SandboxRuntime* r = runtime.get();
      auto resolver = std::make_unique<dns::SandboxResolver>(
          &loop_, *r->sandbox->dns_listen,
          [r](std::string_view qname, std::uint16_t qtype) { return answerFor(*r, qname, qtype); });
      auto started = resolver->start();
      sandbox_resolvers_.push_back(std::move(resolver));
      if (!started) {
        closeAll();
        uv_run(&loop_, UV_RUN_DEFAULT);
        uv_loop_close(&loop_);
        return Err{"sandbox '" + r->sandbox->name + "' dns_listen " + started.error()};
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_open_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return Ok{};
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
  uv_async_send(&async_);
}

void Worker::shutdown() {
  shutdown_.store(true);
  uv_async_send(&async_);
}

void Worker::join() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

void Worker::onAsync(uv_async_t* async) noexcept {
  static_cast<Worker*>(async->data)->handleCommands();
}

void Worker::handleCommands() {
  if (shutdown_.load()) {
    closeAll();
    return;
  }
  std::vector<Handover> handed;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    handed.swap(inbox_);
  }
  for (const Handover& h : handed) {
    serve(*h.sandbox, h.transparent, h.fd);
  }
  if (stop_accepting_.load() && !draining_) {
    draining_ = true;
    context_->draining = true;
    closeListeners();
    // Sessions remove themselves from the map as they finish: walk a snapshot.
    std::vector<session::Session*> current;
    for (auto& [ptr, owned] : sessions_) {
      current.push_back(ptr);
    }
    for (session::Session* s : current) {
      if (sessions_.count(s) != 0) {
        s->drain();
      }
    }
  }
}

// A connection counts in busy_ of the worker that will serve it from the moment it is chosen
// (handed-over ones while they wait in the inbox), until its session is gone.
void Worker::onAccepted(SandboxRuntime& sandbox, bool transparent, int fd) {
  Worker* target = leastBusy();
  if (target != this) {
    target->busy_.fetch_add(1);
    if (target->handOver(Handover{fd, &sandbox, transparent})) {
      SPDLOG_DEBUG("worker {}: a connection handed to worker {}", index_, target->index_);
      return;
    }
    target->busy_.fetch_sub(1);
  }
  busy_.fetch_add(1);
  serve(sandbox, transparent, fd);
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

bool Worker::handOver(const Handover& h) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  if (!inbox_open_) {
    return false;
  }
  inbox_.push_back(h);
  uv_async_send(&async_);  // under the lock: closeInbox() cannot close async_ meanwhile
  return true;
}

// `fd` is already counted in busy_; its session (or the close below) takes it off.
void Worker::serve(SandboxRuntime& sandbox, bool transparent, int fd) {
  if (draining_) {
    ::close(fd);  // the kernel resets it; a draining gateway takes nothing new
    busy_.fetch_sub(1);
    return;
  }
  std::uint64_t id = state_.next_connection_id.fetch_add(1);
  auto owned = std::make_unique<session::Session>(
      *context_, sandbox, id,
      transparent ? session::Session::Listener::Transparent : session::Session::Listener::Explicit);
  session::Session* s = owned.get();
  sessions_.emplace(s, std::move(owned));
  session_count_.store(sessions_.size());
  if (state_.open_connections.load() > state_.config->limits.max_connections) {
    // Over the limit: accept (so the kernel queue does not fill) and close at once.
    SPDLOG_DEBUG("[C{}] over limits.max_connections: closed", id);
    if (s->start(fd)) {
      s->abort();
    }
    return;
  }
  s->start(fd);
}

void Worker::sessionFinished(session::Session* s) {
  sessions_.erase(s);
  session_count_.store(sessions_.size());
  busy_.fetch_sub(1);
  state_.heap_shrank.store(true, std::memory_order_relaxed);
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
  for (auto& listener : listeners_) {
    listener->close(nullptr);
  }
}

void Worker::closeAll() {
  if (closed_all_) {
    return;
  }
  closed_all_ = true;
  draining_ = true;
  context_->draining = true;
  closeListeners();
  std::vector<session::Session*> current;
  for (auto& [ptr, owned] : sessions_) {
    current.push_back(ptr);
  }
  for (session::Session* s : current) {
    if (sessions_.count(s) != 0) {
      s->abort();
    }
  }
  pool_->close(nullptr);
  resolver_->close(nullptr);
  for (auto& r : sandbox_resolvers_) {
    r->close(nullptr);
  }
  closeInbox();
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&flush_audit_), nullptr);
}

}  // namespace sluice::proxy
