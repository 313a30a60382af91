#pragma once
// The sandbox's side of one request, as the request's upstream half sees it (its connector and
// its upstream channel) and as the exchange sees it beyond its own end (ExchangeHost): who the
// client is and how it reached sluice, the configuration in force, the corked writes, reading
// and the one timer, and where upstream connections go between requests (the client's parked
// one; closing ones, kept until their close callback).
//
// A client connection is one (ClientConnection, for everything that is the connection's). On a
// codec, each request has its own: the HTTP/1.1 codec's exchange and each HTTP/2 stream see
// the connection's, but for closing() and close(), which an HTTP/2 stream makes its own (a
// stream ends, not its connection): exchange_host.h.
//
// Everything here is called from inside the connection's callbacks only; nothing that uses it
// outlives the connection (it owns them, through its codec).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "policy/decision.h"
#include "policy/ip_address.h"
#include "proxy/audit/audit_record.h"
#include "proxy/session/context/connection_budget.h"
#include "proxy/session/pool/upstream_pool.h"
#include "proxy/session/context/worker_context.h"

namespace sluice::proxy {
struct Generation;
struct SandboxRuntime;
struct SandboxView;
}  // namespace sluice::proxy

namespace sluice::proxy::session {

// How the connection's requests name their host.
enum class Route : std::uint8_t {
  Undecided,  // before the first head (explicit) or the first byte (transparent)
  Forward,    // explicit, absolute-form http:// requests: each names its own host
  Tunnel,     // TLS terminated (CONNECT, or transparent TLS): H and the port fixed by the tunnel
  Plain,      // transparent HTTP: H is each request's Host, the port the one the sandbox dialled
};

// What the connection knows of itself; the facts every request on it is decided with.
struct ConnectionFacts {
  std::uint64_t id = 0;
  std::uint64_t started_ms = 0;  // when it was accepted (the loop's clock)
  audit::Mode mode = audit::Mode::Connect;
  Route route = Route::Undecided;
  policy::Endpoint client;
  std::optional<policy::Endpoint> orig_dst;  // transparent: where the sandbox was going
  // The tunnel's H as received (the CONNECT target's host, or the SNI), its port and
  // "host:port" as received.
  std::string host;
  std::uint16_t port = 0;
  std::string authority;
  // The ClientHello's server name (TLS only).
  policy::SniState sni_state = policy::SniState::Unknown;
  std::string sni;  // as received (raw)
  // The tunnel was refused in band for this reason (docs/wire.md#refusals-in-band): it opened
  // with a leaf for H only to answer each request inside with a refusal; none reaches an origin.
  // None: an allowed tunnel, or no tunnel.
  policy::Reason refused_in_band = policy::Reason::None;
};

class ClientSide {
 public:
  // --- who, and under which configuration (a request's never changes: the connection's moves
  // on between requests, and an HTTP/2 stream keeps the one it was admitted under)
  virtual WorkerContext& context() = 0;
  virtual const ConnectionFacts& facts() const = 0;
  virtual const Generation& generation() const = 0;
  virtual const SandboxView& sandboxView() const = 0;
  virtual SandboxRuntime& runtime() const = 0;

  // --- writes. While corked (inside a callback) writes to both peers are gathered; uncorking
  // the outermost writes the audit records of the callback first, then the gathered bytes.
  virtual void cork() = 0;
  virtual void uncork() = 0;
  virtual bool corked() const = 0;
  virtual void flushCorked() = 0;
  // A record was written: it is flushed before the bytes that complete its answer.
  virtual void noteAudited() = 0;

  // --- flow
  // What the connection may hold for its requests (connection_budget.h).
  virtual ConnectionBudget& budget() = 0;
  virtual void updateReading() = 0;  // what a request needs to read may have changed
  virtual void noteProgress() = 0;   // request progress (idle_timeout counts from it)
  virtual void armTimer() = 0;       // a deadline of a request changed
  virtual void onPeerDrained() = 0;  // a peer took what it was sent
  virtual bool closing() const = 0;
  // Ends the request's side: the connection (HTTP/1.1), or the stream (HTTP/2).
  virtual void close(std::string_view why) = 0;

  // --- upstream connections between requests
  // The client's parked upstream if it is for `key` (else it goes to the pool): nullptr if none.
  virtual std::unique_ptr<UpstreamConnection> takeParked(const UpstreamKey& key) = 0;
  virtual void park(std::unique_ptr<UpstreamConnection> connection) = 0;
  virtual void unpark() = 0;
  // Closes `connection`; it is kept until its close callback.
  virtual void retire(std::unique_ptr<UpstreamConnection> connection) = 0;
  // False while draining: a finished request's upstream is closed, not kept.
  virtual bool keepsUpstreams() const = 0;

 protected:
  ~ClientSide() = default;
};

// Corks `side` for the duration of a callback: every callback that can end a response is corked.
class Cork {
 public:
  explicit Cork(ClientSide& side) : side_(side) { side_.cork(); }
  ~Cork() { side_.uncork(); }
  Cork(const Cork&) = delete;
  Cork& operator=(const Cork&) = delete;

 private:
  ClientSide& side_;
};

}  // namespace sluice::proxy::session
