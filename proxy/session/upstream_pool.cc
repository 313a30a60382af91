#include "proxy/session/upstream_pool.h"

namespace sluice::proxy::session {

UpstreamPool::UpstreamPool(uv_loop_t* loop, std::size_t per_key_limit,
                           std::chrono::milliseconds idle_limit)
    : loop_(loop), per_key_limit_(per_key_limit), idle_limit_(idle_limit), sweep_(loop) {}

UpstreamPool::~UpstreamPool() = default;

std::unique_ptr<UpstreamConnection> UpstreamPool::take(const UpstreamKey& key,
                                                       io::TcpStream::Handler* handler) {
  auto it = idle_.find(key);
  if (it == idle_.end() || it->second.empty()) {
    return nullptr;
  }
  std::unique_ptr<UpstreamConnection> connection = std::move(it->second.back().connection);
  it->second.pop_back();
  if (it->second.empty()) {
    idle_.erase(it);
  }
  --count_;
  connection->stream.stopReading();
  connection->stream.setHandler(handler);
  return connection;
}

void UpstreamPool::put(std::unique_ptr<UpstreamConnection> connection) {
  if (closing_all_) {
    io::TcpStream* stream = &connection->stream;
    stream->setHandler(this);
    closing_[stream] = std::move(connection);
    stream->close();
    return;
  }
  connection->stream.setHandler(this);
  // Keep reading while idle: an upstream that closes (or talks out of turn) must be noticed
  // here, not by the next request that would be sent into a dead connection.
  connection->stream.startReading();
  std::list<Entry>& list = idle_[connection->key];
  if (list.size() >= per_key_limit_) {
    // The oldest goes: its TLS session is the least likely to still be resumable.
    io::TcpStream* oldest = &list.front().connection->stream;
    closing_[oldest] = std::move(list.front().connection);
    list.pop_front();
    --count_;
    oldest->close();
  }
  list.push_back(Entry{std::move(connection), uv_now(loop_)});
  ++count_;
  if (!sweeping_) {
    sweeping_ = true;
    sweep_.start(std::chrono::milliseconds(kReleaseAfterMs), [this] { expire(); });
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

void UpstreamPool::expire() {
  sweeping_ = false;
  std::uint64_t now = uv_now(loop_);
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& list = it->second;
    for (Entry& e : list) {
      if (!e.released && now - e.idle_since_ms >= kReleaseAfterMs) {
        if (e.connection->tls) {
          e.connection->tls->releaseBuffers();
        }
        e.connection->stream.releaseBuffers();
        e.released = true;
      }
    }
    while (!list.empty() &&
           now - list.front().idle_since_ms >= static_cast<std::uint64_t>(idle_limit_.count())) {
      io::TcpStream* stream = &list.front().connection->stream;
      closing_[stream] = std::move(list.front().connection);
      list.pop_front();
      --count_;
      stream->close();
    }
    it = list.empty() ? idle_.erase(it) : std::next(it);
  }
  if (count_ > 0) {
    sweeping_ = true;
    sweep_.start(std::chrono::milliseconds(kReleaseAfterMs), [this] { expire(); });
  }
}

void UpstreamPool::discard(io::TcpStream& stream) {
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    for (auto e = it->second.begin(); e != it->second.end(); ++e) {
      if (&e->connection->stream == &stream) {
        closing_[&stream] = std::move(e->connection);
        it->second.erase(e);
        if (it->second.empty()) {
          idle_.erase(it);
        }
        --count_;
        stream.close();
        return;
      }
    }
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
  for (auto& [key, list] : idle_) {
    for (Entry& e : list) {
      io::TcpStream* stream = &e.connection->stream;
      closing_[stream] = std::move(e.connection);
      stream->close();
    }
  }
  idle_.clear();
  count_ = 0;
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
