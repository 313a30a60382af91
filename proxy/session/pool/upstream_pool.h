#pragma once
// Idle upstream connections, kept per (sandbox, H, port, tls) and nothing coarser
// (docs/wire.md#the-invariant: an upstream connection is reused only for the same sandbox, H and
// port). One pool per worker.
//
// An UpstreamConnection is owned by exactly one of: the session using it, or the pool. While
// pooled, the pool is its stream's handler: data or EOF from an idle upstream means it is no
// longer usable, and it is closed. Idle connections also expire.
//
// Bounds. Each idle connection holds a descriptor with no client behind it, so idle ones are
// bounded per key, per sandbox and in total (upstream.max_idle_per_sandbox, upstream.max_idle):
// a sandbox that asks for a thousand names under a wildcard would otherwise hold a thousand
// descriptors after it left, and the others' connects and accepts would fail. A connection put
// over a bound closes the oldest idle connection that bound counts (least recently used first,
// across keys), perhaps itself.
//   - The total is split between the workers' pools (Limits::total is this pool's share), so
//     it holds exactly, and a flood on one worker can evict nothing in another's pool: a
//     connection pooled by one worker serves only that worker's sessions anyway.
//   - A sandbox's bound is the process's: its count is an atomic shared by every pool (in its
//     SandboxRuntime). Over it, a pool closes its own oldest idle connection of that sandbox;
//     when it has none (the others are in other workers' pools, which this thread cannot
//     touch) the connection just put goes. Two workers putting at the same instant may both
//     close one, so the bound is exceeded by at most one connection per worker, for no longer
//     than a put.

#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "policy/ip_address.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/io/timer.h"
#include "proxy/tls/tls_session.h"

namespace sluice::proxy::session {

struct UpstreamKey {
  std::uint64_t sandbox = 0;  // SandboxRuntime::id
  // Generation::upstream_trust_id: a connection (or TLS session) verified against one
  // upstream.ca_file is not reused after a reload changed it.
  std::uint64_t trust = 0;
  std::string host;  // canonical H
  std::uint16_t port = 0;
  bool tls = false;

  friend auto operator<=>(const UpstreamKey&, const UpstreamKey&) = default;
};

// How many connections of one sandbox are idle in the pools of every worker; a relaxed atomic.
using IdleCount = std::atomic<std::size_t>;

struct UpstreamConnection {
  UpstreamConnection(uv_loop_t* loop, io::TcpStream::Handler* handler, UpstreamKey k)
      : stream(loop, handler), key(std::move(k)) {}

  io::TcpStream stream;
  std::optional<tls::TlsSession> tls;
  UpstreamKey key;
  policy::Endpoint address;  // the address connected to: one that passed the address checks
  std::uint64_t exchanges = 0;
  // Its sandbox's count of idle connections (SandboxRuntime::idle_upstreams), counted in while
  // it is pooled. Shared: a pooled connection may outlive every generation of its sandbox.
  std::shared_ptr<IdleCount> sandbox_idle;
};

// An idle upstream connection the pool counts but does not own: an HTTP/2 session to an origin
// with no stream on it (proxy/session/upstream), which its registry keeps so that a later
// request of the sandbox rides it. Idle is idle whatever the protocol: it counts in the same
// bounds, in the same least-recently-used order, and expires after the same idle time.
class HeldIdle {
 public:
  virtual const UpstreamConnection& idleConnection() const = 0;
  // Over a bound, or idle too long: it ends (GOAWAY, then its connection closes).
  virtual void evictIdle() = 0;

 protected:
  ~HeldIdle() = default;
};

// upstream.max_idle as applied: at most a quarter of the descriptors the process may open
// (`descriptor_limit`, RLIMIT_NOFILE's soft limit; 0: unlimited). Idle connections then never
// take the descriptors the gateway needs for its clients and the upstreams they are using.
std::size_t effectiveIdleBound(std::uint64_t configured, std::uint64_t descriptor_limit);
// Worker `index`'s share of `total` among `workers`: the shares add up to `total` exactly.
std::size_t idleShare(std::size_t total, std::size_t workers, std::size_t index);

class UpstreamPool : private io::TcpStream::Handler {
 public:
  struct Limits {
    std::size_t per_key = 16;
    std::size_t per_sandbox = 128;          // counted over every worker's pool
    std::size_t total = 4096;               // this pool's share of upstream.max_idle
    std::chrono::milliseconds idle{30000};  // an idle connection lives at most this long
  };

  UpstreamPool(uv_loop_t* loop, Limits limits);
  ~UpstreamPool() override;

  // Bounds from now on (a reload); connections over the new ones are closed now.
  void setLimits(const Limits& limits);

  // An idle connection for `key`, most recently used first; its stream's handler becomes
  // `handler`. nullptr when there is none.
  std::unique_ptr<UpstreamConnection> take(const UpstreamKey& key, io::TcpStream::Handler* handler);
  // Keeps a connection whose last exchange ended cleanly, and closes whatever that puts over a
  // bound: the oldest idle connection of the key, of the sandbox, or of all (perhaps this one).
  void put(std::unique_ptr<UpstreamConnection> connection);
  // An HTTP/2 session with no stream is idle: counted per sandbox and in all, and evicted (the
  // least recently used first, whatever its protocol) or expired like a pooled connection.
  // Idempotent; it may evict `idle` itself at once.
  void holdIdle(HeldIdle& idle);
  // It has a stream again, or it ended: no longer counted. Idempotent.
  void releaseIdle(HeldIdle& idle);
  // Closes a connection no one uses any more (an ended HTTP/2 session's); it is kept until its
  // close callback.
  void retire(std::unique_ptr<UpstreamConnection> connection) {
    closeConnection(std::move(connection));
  }
  // Closes the idle connections whose key `unusable` says no request will ask for again (a
  // sandbox removed, an upstream trust replaced).
  void closeWhere(const std::function<bool(const UpstreamKey&)>& unusable);

  // TLS session resumption per key (docs/wire.md#upstreams: never across keys): the session of the
  // last connection to (sandbox, H, port), offered by the next one so it skips the full handshake.
  // Owned by the pool; the pointer is valid until the next remember() for that key.
  SSL_SESSION* resumption(const UpstreamKey& key) const;
  void remember(const UpstreamKey& key, tls::SslSessionPtr session);

  // Closes everything; `done` runs when every handle has closed.
  void close(std::function<void()> done);
  // Idle connections in this pool (held HTTP/2 sessions included).
  std::size_t idle() const { return entries_.size(); }

 private:
  struct Entry;
  // An entry's place in one order of the pool's entries (all, one key's, one sandbox's),
  // oldest first. Intrusive: an entry leaves all three at once without a search.
  struct Link {
    Entry* older = nullptr;
    Entry* newer = nullptr;
  };
  struct Chain {
    Entry* oldest = nullptr;
    Entry* newest = nullptr;
    std::size_t size = 0;
  };
  struct Entry {
    std::unique_ptr<UpstreamConnection> connection;  // pooled; or, for a held session, none
    HeldIdle* held = nullptr;
    const UpstreamConnection& upstream() const { return held ? held->idleConnection() : *connection; }
    std::uint64_t idle_since_ms = 0;
    bool released = false;  // buffers given back (idle for kReleaseAfter)
    Link all;
    Link of_key;
    Link of_sandbox;
  };
  template <Link Entry::*L>
  static void append(Chain& chain, Entry* entry);
  template <Link Entry::*L>
  static void unlink(Chain& chain, Entry* entry);

  // A connection idle this long gives its buffers back; not at once, or a keep-alive client
  // taking it again a microsecond later would pay for the memory twice per request.
  static constexpr std::uint64_t kReleaseAfterMs = 1000;
  static constexpr std::size_t kMaxSessions = 4096;

  void onRead(io::TcpStream& stream, std::span<const char> data) override;
  void onEof(io::TcpStream& stream) override;
  void onError(io::TcpStream& stream, int status) override;
  void onDrained(io::TcpStream&) override {}
  void onConnected(io::TcpStream&, int) override {}
  void onClosed(io::TcpStream& stream) override;

  // Takes `entry` out of the pool (and out of the counts); the connection is the caller's.
  std::unique_ptr<UpstreamConnection> detach(Entry* entry);
  void closeConnection(std::unique_ptr<UpstreamConnection> connection);
  // Closes a pooled connection, or ends a held session.
  void evict(Entry* entry);
  // A new entry (in `all_`, and in its key's chain if it has one) joins its sandbox's chain and
  // count; then the bounds are enforced.
  void countIn(Entry* entry, std::uint64_t sandbox, const std::shared_ptr<IdleCount>& sandbox_idle);
  // Evicts the oldest entries of `sandbox`, then of all, while the counts are over the bounds.
  void trim(std::uint64_t sandbox, const std::shared_ptr<IdleCount>& sandbox_idle);
  void discard(io::TcpStream& stream);
  void expire();
  void startSweep();
  void maybeDone();

  uv_loop_t* loop_;
  Limits limits_;
  // Every idle connection, by its stream (references to the entries stay valid as it grows).
  std::unordered_map<const io::TcpStream*, Entry> entries_;
  Chain all_;
  std::map<UpstreamKey, Chain> of_key_;
  std::unordered_map<std::uint64_t, Chain> of_sandbox_;
  std::map<UpstreamKey, tls::SslSessionPtr> sessions_;
  // Closing connections, kept until their close callback.
  std::map<io::TcpStream*, std::unique_ptr<UpstreamConnection>> closing_;
  io::Timer sweep_;
  bool sweeping_ = false;
  bool closing_all_ = false;
  bool sweep_closed_ = false;
  std::function<void()> done_;
};

}  // namespace sluice::proxy::session
