#include "proxy/session/pool/upstream_pool.h"

#include <algorithm>
#include <vector>

namespace sluice::proxy::session {

std::size_t effectiveIdleBound(std::uint64_t configured, std::uint64_t descriptor_limit) {
  std::uint64_t bound = configured;
  if (descriptor_limit != 0) {
    bound = std::min(bound, descriptor_limit / 4);
  }
  return static_cast<std::size_t>(bound);
}

std::size_t idleShare(std::size_t total, std::size_t workers, std::size_t index) {
  if (workers == 0) {
    return total;
  }
  return total / workers + (index < total % workers ? 1 : 0);
}

template <UpstreamPool::Link UpstreamPool::Entry::*L>
void UpstreamPool::append(Chain& chain, Entry* entry) {
  Link& link = entry->*L;
  link.older = chain.newest;
  link.newer = nullptr;
  if (chain.newest != nullptr) {
    (chain.newest->*L).newer = entry;
  } else {
    chain.oldest = entry;
  }
  chain.newest = entry;
  ++chain.size;
}

template <UpstreamPool::Link UpstreamPool::Entry::*L>
void UpstreamPool::unlink(Chain& chain, Entry* entry) {
  Link& link = entry->*L;
  if (link.older != nullptr) {
    (link.older->*L).newer = link.newer;
  } else {
    chain.oldest = link.newer;
  }
  if (link.newer != nullptr) {
    (link.newer->*L).older = link.older;
  } else {
    chain.newest = link.older;
  }
  link = Link{};
  --chain.size;
}

UpstreamPool::UpstreamPool(uv_loop_t* loop, Limits limits)
    : loop_(loop), limits_(limits), sweep_(loop) {}

UpstreamPool::~UpstreamPool() = default;

void UpstreamPool::setLimits(const Limits& limits) {
  limits_ = limits;
  // Over a lowered bound: each key, then each sandbox, then the total, oldest first.
  for (auto it = of_key_.begin(); it != of_key_.end();) {
    Chain& chain = it->second;
    ++it;  // evicting the chain's last entry erases it
    while (chain.size > limits_.per_key) {
      evict(chain.oldest);
    }
  }
  std::vector<std::uint64_t> sandboxes;
  for (const auto& [sandbox, chain] : of_sandbox_) {
    sandboxes.push_back(sandbox);
  }
  for (std::uint64_t sandbox : sandboxes) {
    auto it = of_sandbox_.find(sandbox);
    if (it != of_sandbox_.end()) {
      std::shared_ptr<IdleCount> count = it->second.oldest->upstream().sandbox_idle;
      trim(sandbox, count);
    }
  }
  while (all_.size > limits_.total) {
    evict(all_.oldest);
  }
}

std::unique_ptr<UpstreamConnection> UpstreamPool::take(const UpstreamKey& key,
                                                       io::TcpStream::Handler* handler) {
  auto it = of_key_.find(key);
  if (it == of_key_.end()) {
    return nullptr;
  }
  std::unique_ptr<UpstreamConnection> connection = detach(it->second.newest);
  connection->stream.stopReading();
  connection->stream.setHandler(handler);
  return connection;
}

void UpstreamPool::put(std::unique_ptr<UpstreamConnection> connection) {
  connection->stream.setHandler(this);
  if (closing_all_ || limits_.total == 0 || limits_.per_sandbox == 0 || limits_.per_key == 0) {
    closeConnection(std::move(connection));
    return;
  }
  // Keep reading while idle: an upstream that closes (or talks out of turn) must be noticed
  // here, not by the next request that would be sent into a dead connection.
  connection->stream.startReading();
  io::TcpStream* stream = &connection->stream;
  const UpstreamKey& key = connection->key;
  if (auto it = of_key_.find(key); it != of_key_.end() && it->second.size >= limits_.per_key) {
    // The oldest of the key goes: its TLS session is the least likely to still be resumable.
    evict(it->second.oldest);
  }
  std::shared_ptr<IdleCount> sandbox_idle = connection->sandbox_idle;
  std::uint64_t sandbox = key.sandbox;
  Entry& entry = entries_[stream];
  entry.connection = std::move(connection);
  entry.idle_since_ms = uv_now(loop_);
  append<&Entry::all>(all_, &entry);
  append<&Entry::of_key>(of_key_[entry.connection->key], &entry);
  countIn(&entry, sandbox, sandbox_idle);
}

void UpstreamPool::countIn(Entry* entry, std::uint64_t sandbox,
                           const std::shared_ptr<IdleCount>& sandbox_idle) {
  append<&Entry::of_sandbox>(of_sandbox_[sandbox], entry);
  if (sandbox_idle) {
    sandbox_idle->fetch_add(1, std::memory_order_relaxed);
  }
  trim(sandbox, sandbox_idle);  // (which may evict `entry` itself)
  if (!entries_.empty()) {
    startSweep();
  }
}

void UpstreamPool::trim(std::uint64_t sandbox, const std::shared_ptr<IdleCount>& sandbox_idle) {
  if (sandbox_idle) {
    while (sandbox_idle->load(std::memory_order_relaxed) > limits_.per_sandbox) {
      auto it = of_sandbox_.find(sandbox);
      if (it == of_sandbox_.end()) {
        break;  // the rest are in other workers' pools
      }
      evict(it->second.oldest);
    }
  }
  while (all_.size > limits_.total) {
    evict(all_.oldest);
  }
}

void UpstreamPool::holdIdle(HeldIdle& idle) {
  const UpstreamConnection& connection = idle.idleConnection();
  if (entries_.count(&connection.stream) != 0) {
    return;
  }
  if (closing_all_ || limits_.total == 0 || limits_.per_sandbox == 0) {
    idle.evictIdle();
    return;
  }
  const std::uint64_t sandbox = connection.key.sandbox;
  std::shared_ptr<IdleCount> sandbox_idle = connection.sandbox_idle;
  Entry& entry = entries_[&connection.stream];
  entry.held = &idle;
  entry.idle_since_ms = uv_now(loop_);
  append<&Entry::all>(all_, &entry);  // (not in its key's chain: take() hands out connections)
  countIn(&entry, sandbox, sandbox_idle);
}

void UpstreamPool::releaseIdle(HeldIdle& idle) {
  auto it = entries_.find(&idle.idleConnection().stream);
  if (it != entries_.end() && it->second.held == &idle) {
    detach(&it->second);
  }
}

void UpstreamPool::evict(Entry* entry) {
  if (HeldIdle* held = entry->held) {
    detach(entry);
    held->evictIdle();
    return;
  }
  closeConnection(detach(entry));
}

std::unique_ptr<UpstreamConnection> UpstreamPool::detach(Entry* entry) {
  const UpstreamConnection& connection = entry->upstream();
  unlink<&Entry::all>(all_, entry);
  if (entry->held == nullptr) {
    auto key = of_key_.find(connection.key);
    unlink<&Entry::of_key>(key->second, entry);
    if (key->second.size == 0) {
      of_key_.erase(key);
    }
  }
  auto sandbox = of_sandbox_.find(connection.key.sandbox);
  unlink<&Entry::of_sandbox>(sandbox->second, entry);
  if (sandbox->second.size == 0) {
    of_sandbox_.erase(sandbox);
  }
  if (connection.sandbox_idle) {
    connection.sandbox_idle->fetch_sub(1, std::memory_order_relaxed);
  }
  std::unique_ptr<UpstreamConnection> owned = std::move(entry->connection);
  entries_.erase(&connection.stream);  // (the entry, and `connection` if it was held, are gone)
  return owned;
}

void UpstreamPool::closeConnection(std::unique_ptr<UpstreamConnection> connection) {
  io::TcpStream* stream = &connection->stream;
  stream->setHandler(this);
  closing_[stream] = std::move(connection);
  stream->close();
}

void UpstreamPool::closeWhere(const std::function<bool(const UpstreamKey&)>& unusable) {
  // (What is evicted is unlinked first; a held session ending evicts nothing else.)
  std::vector<Entry*> going;
  for (Entry* e = all_.oldest; e != nullptr; e = e->all.newer) {
    if (unusable(e->upstream().key)) {
      going.push_back(e);
    }
  }
  for (Entry* e : going) {
    evict(e);
  }
}

SSL_SESSION* UpstreamPool::resumption(const UpstreamKey& key) const {
  auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void UpstreamPool::remember(const UpstreamKey& key, tls::SslSessionPtr session) {
  if (!session) {
    return;
  }
  if (sessions_.size() >= kMaxSessions && sessions_.count(key) == 0) {
    sessions_.clear();  // rare: thousands of distinct hosts; a full handshake each is fine
  }
  sessions_[key] = std::move(session);
}

void UpstreamPool::startSweep() {
  if (!sweeping_) {
    sweeping_ = true;
    sweep_.start(std::chrono::milliseconds(kReleaseAfterMs), [this] { expire(); });
  }
}

// Entries are in the order they became idle, so those to expire, and those to give their
// buffers back, are at the old end.
void UpstreamPool::expire() {
  sweeping_ = false;
  std::uint64_t now = uv_now(loop_);
  const auto idle_limit = static_cast<std::uint64_t>(limits_.idle.count());
  while (all_.oldest != nullptr && now - all_.oldest->idle_since_ms >= idle_limit) {
    evict(all_.oldest);
  }
  for (Entry* e = all_.oldest; e != nullptr && now - e->idle_since_ms >= kReleaseAfterMs;
       e = e->all.newer) {
    if (!e->released && e->connection) {
      if (e->connection->tls) {
        e->connection->tls->releaseBuffers();
      }
      e->connection->stream.releaseBuffers();
      e->released = true;
    }
  }
  if (!entries_.empty()) {
    startSweep();
  }
}

void UpstreamPool::discard(io::TcpStream& stream) {
  if (auto it = entries_.find(&stream); it != entries_.end()) {
    evict(&it->second);
  }
}

void UpstreamPool::onRead(io::TcpStream& stream, std::span<const char>) { discard(stream); }
void UpstreamPool::onEof(io::TcpStream& stream) { discard(stream); }
void UpstreamPool::onError(io::TcpStream& stream, int) { discard(stream); }

void UpstreamPool::onClosed(io::TcpStream& stream) {
  closing_.erase(&stream);
  maybeDone();
}

void UpstreamPool::close(std::function<void()> done) {
  closing_all_ = true;
  done_ = std::move(done);
  while (all_.oldest != nullptr) {
    evict(all_.oldest);
  }
  sessions_.clear();
  sweep_.close([this] {
    sweep_closed_ = true;
    maybeDone();
  });
}

void UpstreamPool::maybeDone() {
  if (closing_all_ && sweep_closed_ && closing_.empty() && done_) {
    auto done = std::move(done_);
    done();
  }
}

}  // namespace sluice::proxy::session
