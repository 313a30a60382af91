#pragma once
// HTTP/2 toward origins (docs/wire.md#http2-toward-origins): one TLS connection on which the
// origin agreed to h2 (ALPN), carrying the requests of one sandbox to one (H, port) as streams,
// and the worker's registry of them.
//
// A session is shared: streams of every connection of the same sandbox, H, port and upstream
// trust ride it (UpstreamKey, the same key the idle pool keeps HTTP/1.1 connections under, and
// never anything coarser: docs/wire.md#the-invariant). Each request checks the session's address
// against its own rule before it opens a stream on it, exactly as it checks a pooled
// connection. Each stream is an Http2UpstreamStream, the UpstreamChannel of one exchange; the
// session frames and parses (nghttp2, client side), the streams hold what is theirs.
//
// Flow control end to end: the connection's receive window is large and given back at once,
// each stream's is kStreamWindow and given back only as the stream's client takes the bytes
// (Http2UpstreamStream::setReading), so a slow reader slows its own origin stream and no other,
// and a stream holds at most one window of response bytes.
//
// Reentrancy: nghttp2's mem_recv and mem_send are never called from inside its own callbacks.
// Events reach a stream's exchange from inside mem_recv (corked on that stream's client
// connection); whatever they make the exchange send is written once mem_recv has returned.
//
// Idle: a session with no stream is an idle upstream connection (UpstreamPool::holdIdle): it
// counts in the pool's bounds, per sandbox and in all, and goes least recently used first
// whatever the protocol, or after the pool's idle time (docs/wire.md#upstreams).
//
// Lifetime: the registry owns its sessions. A session ends (its origin closed or failed, GOAWAY
// and no streams left, evicted or expired as an idle connection, a reload that made its key
// unusable):
// its streams are told, its connection goes to the pool to close, and the object is freed on a
// later turn of the loop (never inside its own callbacks).

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "proxy/http/http2_session.h"
#include "proxy/io/deferred_delete.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/io/timer.h"
#include "proxy/session/context/connection_budget.h"
#include "proxy/session/context/worker_context.h"
#include "proxy/session/pool/upstream_pool.h"
#include "proxy/session/upstream/http2_upstream_state.h"

namespace sluice::proxy::session {

class ClientSide;
class Http2UpstreamSessions;
class Http2UpstreamStream;

class Http2UpstreamSession final : private io::TcpStream::Handler, private HeldIdle {
 public:
  // The receive window of each stream (SETTINGS_INITIAL_WINDOW_SIZE: what an origin may send a
  // new stream unasked) and of the connection. Each stream's is then raised to what its
  // client's connection grants it (ConnectionBudget::grantWindow, Http2UpstreamStream).
  static constexpr std::int32_t kStreamWindow = ConnectionBudget::kMinWindow;
  static constexpr std::int32_t kConnectionWindow = 16 * 1024 * 1024;
  // Streams sluice opens on one session at most, whatever the origin allows.
  static constexpr std::uint32_t kMaxStreams = 100;

  Http2UpstreamSession(Http2UpstreamSessions& owner, std::unique_ptr<UpstreamConnection> connection,
                       std::size_t max_header_bytes);
  ~Http2UpstreamSession() override;
  Http2UpstreamSession(const Http2UpstreamSession&) = delete;
  Http2UpstreamSession& operator=(const Http2UpstreamSession&) = delete;

  // nghttp2's client session as sluice runs it toward origins (its options, SETTINGS and
  // windows), with `callbacks`; shared with tests/fuzz/fuzz_http2_origin_frames.cc. Null if
  // nghttp2 could not set it up.
  static http::Http2Session newClientSession(const http::Http2Callbacks& callbacks,
                                             void* user_data, std::size_t max_header_bytes);
  // The client preface and SETTINGS; false if nghttp2 could not be set up.
  bool start();
  const UpstreamKey& key() const { return connection_->key; }
  const policy::Endpoint& address() const { return connection_->address; }
  // A new stream may open on it now: it is alive, not going away, under its stream bound.
  bool acceptsStreams() const;
  std::size_t streams() const { return streams_.size(); }
  bool ended() const { return phase_ == Phase::Ended; }

  // --- for its streams
  // Opens a stream with the head `nva`; DATA follows from the stream (readRequest) when
  // `with_body`. The stream's id, or a negative nghttp2 error.
  std::int32_t submitRequest(Http2UpstreamStream& stream, std::span<const nghttp2_nv> nva,
                             bool with_body);
  void resumeData(std::int32_t id);
  // The stream's trailers, from inside its DATA read (nghttp2 sends them after that DATA).
  bool submitTrailer(std::int32_t id, std::span<const nghttp2_nv> nva);
  // The stream's channel lets it go; with `reset` it is reset (CANCEL) unless nghttp2 has
  // closed it: nobody waits for its answer, or the request will not be finished.
  void forget(std::int32_t id, bool reset);
  // The stream's request side is backed up: it hears when the writes drained
  // (Http2UpstreamStream::reportDrainedIfSo).
  void waitForDrain(std::int32_t id);
  // The stream's client took `bytes` of its response: its window is given back.
  void consume(std::int32_t id, std::size_t bytes);
  // The stream's window is `bytes` from now on (more than the session's initial window: a
  // WINDOW_UPDATE says so).
  void setStreamWindow(std::int32_t id, std::size_t bytes);
  // Writes what nghttp2 has queued (at once, or after nghttp2 returns when inside it).
  void flush();
  // The connection's write queue is over its high watermark.
  bool backedUp() const { return connection_->stream.backedUp(); }
  // After its first response the connection has read the origin's TLS 1.3 tickets: one is kept
  // for the next connection to this key (once per session).
  void rememberTlsSession();

  // --- from the registry
  // Ends it: `why` for the streams still on it (empty: they are let go without an event).
  void end(std::string_view why);
  // Takes no new stream and ends once the streams in flight have (a reload that made its key
  // unusable: the requests already on it finish, as on a connection from the pool).
  void retireWhenIdle();

 private:
  struct Callbacks;
  using Phase = OriginSessionPhase;  // its table: http2_upstream_state.h
  void move(Phase next);

  void onRead(io::TcpStream& stream, std::span<const char> data) override;
  void onEof(io::TcpStream& stream) override;
  void onError(io::TcpStream& stream, int status) override;
  void onDrained(io::TcpStream& stream) override;
  void onConnected(io::TcpStream&, int) override {}
  void onClosed(io::TcpStream&) override {}  // (its connection closes in the pool)

  // --- HeldIdle: with no stream, it is an idle upstream connection of the pool's bounds
  const UpstreamConnection& idleConnection() const override { return *connection_; }
  void evictIdle() override { end({}); }
  // The last stream went (nghttp2 may be on the stack)...
  void noteIdle();
  // ... and once nothing of it is, the pool counts it idle.
  void holdIfIdle();

  void receive(std::span<const char> plaintext);
  // During a read (onRead), the client connections whose streams hear of it stay corked until
  // the read is over: what a client is sent for all the responses of one read (heads, DATA,
  // ends, and the audit records before them) goes out in one write, not a few per response.
  void holdCorked(ClientSide& host);
  void releaseCorks();
  void writeNow();
  void flushTls();
  Http2UpstreamStream* streamOf(std::int32_t id) const;
  // Streams whose request side was backed up and is no longer hear it.
  void reportDrained();
  // The end, once nothing of it is on the stack: freed by the registry.
  void maybeRetire();

  Http2UpstreamSessions& owner_;
  std::unique_ptr<UpstreamConnection> connection_;
  std::size_t max_header_bytes_;
  http::Http2Session session_;
  Phase phase_ = Phase::Open;
  std::unordered_map<std::int32_t, Http2UpstreamStream*> streams_;
  std::vector<std::int32_t> drain_waiters_;
  std::uint64_t idle_since_ms_ = 0;  // its last stream went (0: it has one, or had none yet)
  int depth_ = 0;              // calls into nghttp2 on the stack
  bool flush_wanted_ = false;  // a flush asked for while inside nghttp2
  bool ticket_kept_ = false;
  bool reading_ = false;               // onRead is on the stack
  std::vector<ClientSide*> corked_;  // held corked until it returns (deferred-freed: alive)
};

// A request waiting for another's dial to the same key (Connector, Joining).
class DialWaiter {
 public:
  // That dial (or every dial to the key) is over: a session may now take the request, or it
  // dials its own.
  virtual void onDialOver() = 0;

 protected:
  ~DialWaiter() = default;
};

// The h2 sessions of one worker, by key, and the dials that may become one: while a connection
// offering h2 is being dialled for a key, the worker's other requests for that key wait for it
// (a burst of streams to an origin costs one connection, not one each), and look again once it
// is over (a session to share, or none: then each dials its own).
class Http2UpstreamSessions {
 public:
  Http2UpstreamSessions(WorkerContext& context, UpstreamPool& pool);
  ~Http2UpstreamSessions();
  Http2UpstreamSessions(const Http2UpstreamSessions&) = delete;
  Http2UpstreamSessions& operator=(const Http2UpstreamSessions&) = delete;

  // A session for `key` that takes another stream now, or nullptr: the busiest of those that
  // do, so that streams share few connections (one read carries many responses, and what the
  // client is sent for them goes out in one write) and the others go idle and are swept.
  Http2UpstreamSession* find(const UpstreamKey& key) const;
  // A connection whose origin agreed to h2 becomes a session; nullptr if nghttp2 failed (the
  // connection is closed).
  Http2UpstreamSession* adopt(std::unique_ptr<UpstreamConnection> connection,
                              std::size_t max_header_bytes);
  // --- dials that may become sessions
  // A connection offering h2 is being dialled for `key` (its name resolved: Connector waits for
  // no one's lookup); dialOver() when it is ready (after its exchange adopted it, if the origin
  // chose h2), failed or cancelled.
  void dialStarted(const UpstreamKey& key);
  void dialOver(const UpstreamKey& key);
  // Waits for a dial to `key` under way (true), or there is none (false). The caller asks only
  // for an origin not known to answer HTTP/1.1 (SandboxRuntime::origin_protocols), whose
  // requests would wait for nothing (Connector::joinDial).
  bool join(const UpstreamKey& key, DialWaiter& waiter);
  // No longer waits (cancelled). Idempotent.
  void leave(const UpstreamKey& key, DialWaiter& waiter);

  // Retires the sessions whose key no request will ask for again (a reload): at once when
  // idle, else once their streams in flight have finished.
  void endWhere(const std::function<bool(const UpstreamKey&)>& unusable);
  // Ends every session; `done` when nothing of them is left.
  void close(std::function<void()> done);
  std::size_t size() const { return sessions_.size(); }

  uv_loop_t* loop() const { return context_.loop; }
  WorkerContext& context() const { return context_; }
  UpstreamPool& pool() { return pool_; }

 private:
  friend class Http2UpstreamSession;
  // The session ended: out of the registry, freed on the loop's next turn.
  void retire(Http2UpstreamSession* session);

  WorkerContext& context_;
  UpstreamPool& pool_;
  std::multimap<UpstreamKey, std::unique_ptr<Http2UpstreamSession>> sessions_;
  struct Dials {
    std::size_t under_way = 0;
    std::vector<DialWaiter*> waiters;
  };
  std::map<UpstreamKey, Dials> dials_;
  io::DeferredDelete<Http2UpstreamSession> ended_;
};

}  // namespace sluice::proxy::session
