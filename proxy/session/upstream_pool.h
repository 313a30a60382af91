#pragma once
// Idle upstream connections, kept per (sandbox, H, port, tls) and nothing coarser
// (docs/wire.md#the-invariant: an upstream connection is reused only for the same sandbox, H and
// port). One pool per worker.
//
// An UpstreamConnection is owned by exactly one of: the session using it, or the pool. While
// pooled, the pool is its stream's handler: data or EOF from an idle upstream means it is no
// longer usable, and it is closed. Idle connections also expire.

#include <uv.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

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

struct UpstreamConnection {
  UpstreamConnection(uv_loop_t* loop, io::TcpStream::Handler* handler, UpstreamKey k)
      : stream(loop, handler), key(std::move(k)) {}

  io::TcpStream stream;
  std::optional<tls::TlsSession> tls;
  UpstreamKey key;
  policy::Endpoint address;  // the address connected to: one that passed the address checks
  std::uint64_t exchanges = 0;
};

class UpstreamPool : private io::TcpStream::Handler {
 public:
  UpstreamPool(uv_loop_t* loop, std::size_t per_key_limit, std::chrono::milliseconds idle_limit);
  ~UpstreamPool() override;

  // An idle connection for `key`, most recently used first; its stream's handler becomes
  // `handler`. nullptr when there is none.
  std::unique_ptr<UpstreamConnection> take(const UpstreamKey& key, io::TcpStream::Handler* handler);
  // Keeps a connection whose last exchange ended cleanly.
  void put(std::unique_ptr<UpstreamConnection> connection);
  // TLS session resumption per key (docs/wire.md#upstreams: never across keys): the session of the
  // last connection to (sandbox, H, port), offered by the next one so it skips the full handshake.
  // Owned by the pool; the pointer is valid until the next remember() for that key.
  SSL_SESSION* resumption(const UpstreamKey& key) const;
  void remember(const UpstreamKey& key, tls::SslSessionPtr session);

  // Closes everything; `done` runs when every handle has closed.
  void close(std::function<void()> done);
  std::size_t idle() const { return count_; }

 private:
  struct Entry {
    std::unique_ptr<UpstreamConnection> connection;
    std::uint64_t idle_since_ms = 0;
    bool released = false;  // buffers given back (idle for kReleaseAfter)
  };
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

  void discard(io::TcpStream& stream);
  void expire();
  void maybeDone();

  uv_loop_t* loop_;
  std::size_t per_key_limit_;
  std::chrono::milliseconds idle_limit_;
  std::map<UpstreamKey, std::list<Entry>> idle_;
  std::size_t count_ = 0;
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
