#pragma once
// Gets an exchange its upstream connection, dialling only what was checked: the client's parked
// connection or an idle pooled one, each re-checked against this request's rule; or H resolved
// by sluice's own resolver (an allowed IP literal is its own address), decided on again with
// its addresses (ConnectorClient::decideWith), and the usable addresses dialled in turn, each
// within upstream.connect_timeout; then upstream TLS (SNI H, verified for H against
// upstream.ca_file). It reports once: ready (the connection is the client's) or failed.
//
// The machine is kConnectorMachine (connector_state.h). Owned by its exchange; destroying it,
// or cancel(), means no callback: the lookup is a cancel-on-destroy handle and a socket being
// dialled or handshaken is handed to the connection to close.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.h"
#include "proxy/dns/resolver.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/session/context/client_side.h"
#include "proxy/session/exchange/connector_state.h"
#include "proxy/session/pool/upstream_pool.h"
#include "proxy/session/upstream/http2_upstream_session.h"

namespace sluice::proxy::session {

// Where an exchange's upstream connection came from.
enum class UpstreamOrigin : std::uint8_t {
  Dialled,    // connected for this request
  Reused,     // the client's parked connection or a pooled one, re-checked for this request
  Redialled,  // a reused one closed unanswered: sent again, once, on a connection dialled for it
};

// The exchange a connector works for: it holds the request's facts and its record.
class ConnectorClient {
 public:
  // This request decided again with H's addresses as sluice resolved them. `unresolved`: the
  // request's decision without addresses (Target::decision, while start() runs), whose checks
  // of the request and the rules then stand and only the addresses are checked
  // (policy::decideAddresses, the same answer); null: the request is decided again in full.
  virtual policy::Decision decideWith(std::span<const policy::IpAddress> addresses,
                                      const policy::Decision* unresolved) = 0;
  // H's addresses (for the record), before they are decided on.
  virtual void onAnswer(std::shared_ptr<const dns::Answer> answer) = 0;
  // The address a connection was made to (for the record), before any TLS.
  virtual void onConnectedTo(const policy::Endpoint& address) = 0;
  // A connection for this request, checked under `rule` (the one whose `inject` applies).
  virtual void onUpstreamReady(std::unique_ptr<UpstreamConnection> connection,
                               UpstreamOrigin origin, std::optional<const policy::Rule*> rule) = 0;
  // A shared HTTP/2 session to the origin (always Reused), checked under `rule` as above.
  virtual void onSessionReady(Http2UpstreamSession& session,
                              std::optional<const policy::Rule*> rule) = 0;
  // Refused before any dial: no answer (dns_failed), the addresses (decide()'s `decision`),
  // or an address the sandbox did not dial (dns_mismatch).
  virtual void onUpstreamRefused(const policy::Decision& decision) = 0;
  virtual void onUpstreamRefused(policy::Reason reason, std::string_view detail) = 0;
  // No connection: upstream_connect, upstream_timeout or upstream_cert.
  virtual void onUpstreamFailed(policy::Reason reason, std::string_view detail) = 0;

 protected:
  ~ConnectorClient() = default;
};

class Connector : private io::TcpStream::Handler, private DialWaiter {
 public:
  Connector(ClientSide& host, ConnectorClient& client);
  ~Connector() override;
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // What to connect to: canonical H (its decision says whether it is an IP literal), the port,
  // TLS or not. `fresh`: a connection dialled for this request, never a reused one.
  struct Target {
    const policy::Decision* decision = nullptr;
    std::string_view host;
    std::uint16_t port = 0;
    bool tls = false;
    bool fresh = false;
    // HTTP/2 may carry it: the origin is offered h2 and a shared session may be taken
    // (docs/wire.md#http2-toward-origins). Not for a WebSocket upgrade.
    bool h2 = false;
  };
  void start(const Target& target);
  // Stops: no callback follows. A socket being dialled or handshaken is closed.
  void cancel();
  // The dial in progress took connect_timeout: the next usable address.
  void onConnectTimeout();
  // The connector's own deadline (connect or handshake; 0: none).
  std::uint64_t deadline() const { return deadline_ms_; }
  // No answer in time (idle_timeout): Failed, if it was still working.
  void expire();
  bool working() const {
    return state_ == ConnectorState::Joining || state_ == ConnectorState::Resolving ||
           state_ == ConnectorState::Connecting || state_ == ConnectorState::Handshaking;
  }
  ConnectorState state() const { return state_; }
  // Reading the connection being handshaken: while the handshake runs and the upstream is not
  // backed up.
  void updateReading();

 private:
  void onRead(io::TcpStream& stream, std::span<const char> data) override;
  void onEof(io::TcpStream& stream) override;
  void onError(io::TcpStream& stream, int status) override;
  void onDrained(io::TcpStream& stream) override;
  void onConnected(io::TcpStream& stream, int status) override;
  void onClosed(io::TcpStream&) override {}  // (a closing socket is the connection's)

  bool transition(ConnectorState next);
  UpstreamKey key() const;
  // The parked or a pooled connection (or a shared h2 session), if it passes this request's
  // checks.
  bool takeReused();
  bool takeSession(const UpstreamKey& key);
  // Resolves H (or takes an IP literal's own address) and dials: a connection for this request.
  void dial();
  // --- DialWaiter: the dial it joined is over: a session now, or a dial of its own
  void onDialOver() override;
  // Waits for a dial to the key under way on this worker, unless its origin is known to answer
  // HTTP/1.1. `again`, after a dial it waited for brought no session: only if the origin is
  // known to choose h2 (a dial to an origin still unknown failed: the waiters do not wait for
  // one another's, each dials its own at once).
  bool joinDial(bool again);
  // Its own answer in hand, before its first connect: waits for a dial to the key already past
  // its lookup (if `may_join`), else makes its dial the one the worker's others wait for.
  bool joinDialBeforeConnecting(bool may_join);
  // A dial offering h2 under way for this key, from its first connect (past its lookup), is the
  // worker's to know of (others join it); it is over once ready, failed or cancelled.
  void shareDial();
  void endSharedDial();
  // The sandbox dialled (transparent) one of sluice's own answers for H, or the address
  // sluice's resolver gave it for every name.
  bool originalDestinationMatches() const;
  void onResolved(dns::LookupResult result);
  // The lookup's result and latency, for /metrics (`at_once`: answered from the cache).
  void countLookup(const dns::LookupResult& result, bool at_once);
  void connectNext();
  void handshake();
  void flushTls();
  void ready(std::unique_ptr<UpstreamConnection> connection, UpstreamOrigin origin);
  void fail(policy::Reason reason, std::string_view detail);
  void closeDialled();

  ClientSide& host_;
  ConnectorClient& client_;
  ConnectorState state_ = ConnectorState::Idle;
  Target target_;
  std::string name_;  // canonical H
  // The rule of the latest decision that forwards this request with the connection found (none
  // yet: an IP literal keeps the rule of the request's own decision).
  std::optional<const policy::Rule*> rule_;
  std::unique_ptr<dns::Resolver::Lookup> lookup_;
  std::shared_ptr<const dns::Answer> answer_;
  std::vector<policy::IpAddress> usable_;  // reused: no allocation once grown
  std::size_t next_address_ = 0;
  // It waited for another request's dial that brought no session: it waits again only for an
  // origin known to choose h2 (joinDial's `again`), so no request waits out two failed dials.
  bool waited_ = false;
  bool saw_timeout_ = false;  // a dial ran out of connect_timeout: the failure is a timeout
  std::uint64_t phase_started_ns_ = 0;  // the lookup's or the dial's start (latency metrics)
  std::uint64_t deadline_ms_ = 0;
  std::unique_ptr<UpstreamConnection> dialled_;  // connecting or handshaking
  // The key of the dial it made known to the worker (shareDial), until it is over.
  std::optional<UpstreamKey> shared_dial_;
  // An IP literal's decision, kept for a dial that waited first (Joining).
  std::optional<policy::IpAddress> literal_;
};

}  // namespace sluice::proxy::session
