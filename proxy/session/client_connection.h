#pragma once
// One client connection from a sandbox: its transport and the requests on it. Every check is
// decide() (policy/decision.h) on the facts known so far; the connection gathers the facts
// of the connection itself and leaves each request to its codec.
//
// It owns the client's TCP stream and, inside a tunnel, the TLS session toward the sandbox
// (terminated with a leaf for H from the sandbox's CA); the writes to the client, corked while
// a callback runs (the audit records it wrote reach the OS before the bytes that complete their
// answers) and gathered into few TLS records and writes; which peers are read (backpressure);
// one timer for every deadline (handshake, request head, connect, idle, linger, idle buffers);
// the explicit listener's first head (CONNECT, or an absolute-form request: forward mode);
// a redirected connection's first byte (TLS or HTTP); the ClientHello, read by sluice's own
// parser and decided on with its SNI, and the server name OpenSSL negotiated checked against
// it; refusals before any request; the upstream connection parked between this client's
// requests; draining and closing. Its machine is kConnectionMachine (connection_state.h):
//
//   accept (explicit): ReadingProxyHead         accept (transparent): Sniffing
//     CONNECT H:port allowed ──> ReadingClientHello <── first byte 0x16 (H = SNI)
//     absolute-form http:// ──────────┐    │ allowed: leaf for H     any other byte (H = Host)
//                                     │    v                                     │
//                                     │  TlsHandshake ── SSL_get_servername = SNI │
//                                     v    v                                     v
//                                   Serving: the codec's requests come and go <──┘
//                                      (ALPN h2: HTTP/2's codec, streams at once)
//   a refusal, the last request ──> Lingering (FIN sent, input drained) ──> Closing ──> Closed
//
// The requests are its one codec's (client_codec.h): Http1ServerCodec (made for the explicit
// listener's proxy head, a redirected plain connection, or a tunnel whose ALPN is http/1.1)
// or Http2ServerCodec (ALPN h2: docs/wire.md#http2). The connection never asks which it is.
//
// Ownership: the worker owns the connection; the connection owns the client stream, its timer,
// its codec (and through it the requests, their connectors and the upstreams in use), the
// tunnel's opening and record, the parked upstream and the upstreams being closed
// (ClientUpstreams). close() closes every handle; when
// the last close callback has run, WorkerContext::finished() hands the connection back for
// deletion. No callback outlives it: the DNS lookup is a cancel-on-destroy handle, and streams
// and timer report their closing before it is handed back.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/session/codec/client_codec.h"
#include "proxy/session/client_transport.h"
#include "proxy/session/client_upstreams.h"
#include "proxy/session/connection_state.h"
#include "proxy/session/connection_timer.h"
#include "proxy/session/sandbox_binding.h"
#include "proxy/session/tunnel_opening.h"
#include "proxy/session/pool/upstream_pool.h"
#include "proxy/session/context/worker_context.h"

namespace sluice::proxy {
struct Generation;
struct SandboxRuntime;
struct SandboxView;
}  // namespace sluice::proxy

namespace sluice::proxy::session {

class ClientConnection final : private io::TcpStream::Handler,
                               private CodecHost,
                               private TransportOwner,
                               private OpeningHost {
 public:
  // Explicit: the sandbox asks (CONNECT, absolute-form). Transparent: nftables redirected a
  // connection the sandbox made to somewhere else (docs/wire.md#transparent-mode); TLS or HTTP
  // is told from its first byte, and H is the SNI or the Host.
  enum class Listener : std::uint8_t { Explicit, Transparent };

  // What happens when the requests in flight are over.
  enum class AfterExchange : std::uint8_t {
    ReadNext,  // keep-alive: the next request
    Close,     // the client or the response asked to close, or the client closed its side
    Drain,     // the worker drains (or the sandbox went): close, keep no upstream either
  };

  // `sandbox` is one of `generation`'s.
  ClientConnection(WorkerContext& context, std::shared_ptr<const Generation> generation,
                   const SandboxView& sandbox, std::uint64_t id, Listener listener);
  ~ClientConnection() override;
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Takes over the accepted connection `fd` and starts reading. False if that failed (the fd
  // is closed and the connection already closing).
  bool start(int fd);
  // The worker is draining: close now if idle between requests, else after this exchange.
  void drain();
  // Closes everything now (shutdown grace is over).
  void abort();
  // Over a connection limit, right after start(): nothing is read, the refusal is on record.
  // With `answer`, an explicit-proxy client gets the reason's answer first (503: HTTP clients
  // read an answer that comes before their request is sent); otherwise, and always for a
  // redirected connection (no protocol spoken yet), the connection is just closed, which costs
  // a flood the least.
  void refuseConnection(policy::Reason reason, bool answer);

  using OpenCount = SandboxBinding::OpenCount;
  OpenCount openedAs() const { return binding_.openedAs(); }

  std::uint64_t id() const { return facts_.id; }
  ConnectionState state() const override { return state_; }
  // The sandbox's long-lived part (CA, counters): the same across the generations this
  // connection may see.
  SandboxRuntime& runtime() const override { return binding_.runtime(); }

 private:
  // --- io::TcpStream::Handler: the client's stream, the parked upstream, closing upstreams
  void onRead(io::TcpStream& stream, std::span<const char> data) override;
  void onEof(io::TcpStream& stream) override;
  void onError(io::TcpStream& stream, int status) override;
  void onDrained(io::TcpStream& stream) override;
  void onConnected(io::TcpStream&, int) override {}  // (a dial in progress is the connector's)
  void onClosed(io::TcpStream& stream) override;

  // --- ClientSide (client_connection.cc): what the codec's requests see of the connection
  WorkerContext& context() override { return ctx_; }
  const ConnectionFacts& facts() const override { return facts_; }
  const Generation& generation() const override { return binding_.generation(); }
  const SandboxView& sandboxView() const override { return binding_.view(); }
  void cork() override { transport_.cork(); }
  void uncork() override;
  bool corked() const override { return transport_.corked(); }
  void flushCorked() override;
  void noteAudited() override { audited_ = true; }
  ConnectionBudget& budget() override { return budget_; }
  void updateReading() override;
  void noteProgress() override { timer_.noteProgress(); }
  void armTimer() override;
  void onPeerDrained() override;
  bool closing() const override {
    return state_ == ConnectionState::Closing || state_ == ConnectionState::Closed;
  }
  void close(std::string_view why) override;
  std::unique_ptr<UpstreamConnection> takeParked(const UpstreamKey& key) override;
  void park(std::unique_ptr<UpstreamConnection> connection) override;
  void unpark() override;
  void retire(std::unique_ptr<UpstreamConnection> connection) override;
  bool keepsUpstreams() const override;

  // --- CodecHost (client_connection.cc, client_connection_requests.cc)
  void sendClient(std::string_view bytes) override { transport_.send(bytes); }
  void sendClientFinal(std::string_view bytes) override { transport_.sendFinal(bytes); }
  bool clientBackedUp() const override { return transport_.stream().backedUp(); }
  bool takesRequests() const override {
    return state_ == ConnectionState::Serving || state_ == ConnectionState::ReadingProxyHead;
  }
  bool awaitsProxyHead() const override { return state_ == ConnectionState::ReadingProxyHead; }
  void onProxyHead() override;
  void onConnectHead(const http::RequestHead& head, std::string_view rest) override;
  void noteProxyMode(audit::Mode mode) override { facts_.mode = mode; }
  void onHeadBegun() override;
  Admission admitRequest() override;
  std::shared_ptr<const Generation> holdGeneration() const override {
    return binding_.heldGeneration();
  }
  bool closesAfterExchange() const override { return after_exchange_ != AfterExchange::ReadNext; }
  void closeAfterExchange() override;
  bool onRequestsOver() override;
  // Says goodbye politely: close_notify inside TLS, FIN, then drain the client's input for a
  // moment so sluice's last bytes are not destroyed by an RST.
  void finishConnection() override;
  void noteTunnelEnd(audit::Error why) override;
  void onConnectionError(audit::Error error) override;

  // A codec for `protocol` from now on; the one it replaces is freed at the next safe point.
  // False: the connection closed.
  bool useCodec(audit::Proto protocol);
  // The earliest deadline of the requests in flight (0: none).
  std::uint64_t requestDeadline() const { return codec_ ? codec_->deadline() : 0; }

  // --- TransportOwner
  void flushRecords() override { flushAudit(); }
  void onTransportFailed(std::string_view why) override { close(why); }

  // --- the client's bytes (client_connection.cc)
  void onClientBytes(std::span<const char> data);
  // Whether the state wants the client's bytes (before the backed-up rule of updateReading()).
  bool clientWanted() const;
  // A safe point (no request's callback on the stack): finished requests and a replaced codec
  // are freed.
  void collect();
  // Hands this connection's buffered audit records to the OS (before the client is closed).
  void flushAudit();

  // --- OpeningHost, and the tunnel once open (client_connection_tunnel.cc)
  void onPlainHttp(std::span<const char> data) override;
  void onHandshakeBytes() override;
  void onTunnelOpen() override;
  void onHandshakeFailed(const tls::Failure& failure) override;
  bool auditAvailable() const override { return binding_.auditAvailable(); }
  // The tunnel's record, when the connection ends without a record (docs/audit.md#errors).
  void recordQuietTunnel();
  // The line at the default level that names a client which does not seem to trust the
  // sandbox's CA, and the file to give it: once a minute per sandbox, name and `cause`.
  void hintTheCaFile(std::string_view cause, std::string_view what);
  // Decrypts what the client sent into the codec (the handshake first, while it runs).
  void pumpClientTls();

  // --- requests (client_connection_requests.cc)
  // A new request (or tunnel) starts: it is judged by the generation in force now. False, and
  // the connection ended, when that generation no longer has this sandbox (or has it with
  // another CA): a removed sandbox's connections drain.
  bool takeUpCurrentGeneration() override;
  const policy::Sandbox& sandbox() const override { return binding_.sandbox(); }
  const policy::Config& config() const { return binding_.config(); }

  // --- endings and the timer (client_connection_lifetime.cc)
  // The one way the state changes: false (logged; an assertion in debug builds) for a move
  // kConnectionMachine does not list, and the state stays.
  bool transition(ConnectionState next) override;
  // A handle closed; the last one moves the connection to Closed and hands it back.
  void handleClosed();
  // Serving, and no request in progress: waiting for the next head.
  bool betweenRequests() const { return state_ == ConnectionState::Serving && !codec_->inFlight(); }
  void releaseIdleBuffers();
  std::uint64_t idleTimeoutMs() const;
  // The connection's own idle deadline (0: none now, its requests keep theirs).
  std::uint64_t connectionIdleMs() const;
  void onTimer();

  WorkerContext& ctx_;
  // The sandbox, in the generation this connection's current request (or handshake) is judged
  // by (it changes only between requests: takeUpCurrentGeneration), and the open counts.
  SandboxBinding binding_;
  ConnectionFacts facts_;
  ConnectionState state_ = ConnectionState::ReadingProxyHead;
  AfterExchange after_exchange_ = AfterExchange::ReadNext;
  bool audited_ = false;        // a record was written for this connection
  // Refusals kept while the audit log could not be written, since it last could (at most one).
  std::uint8_t audit_refusals_kept_ = 0;
  audit::Error tunnel_end_ = audit::Error::None;  // noteTunnelEnd()
  // When the tunnel's TLS handshake ended (the loop's ms), and what the client sent in it
  // since: a client that checks sluice's certificate after the handshake (GnuTLS) and does not
  // trust it closes at once with nothing sent (recordQuietTunnel).
  std::uint64_t tunnel_opened_ms_ = 0;
  std::uint64_t tunnel_plaintext_ = 0;
  bool stream_closed_ = false;  // the client stream's close callback ran
  bool timer_closed_ = false;   // the timer's close callback ran

  ClientTransport transport_;
  ConnectionTimer timer_;
  ConnectionBudget budget_;

  std::unique_ptr<ClientCodec> codec_;    // the requests' (none before the first byte or TLS)
  std::unique_ptr<ClientCodec> retired_;  // replaced, freed at the next safe point (collect)
  TunnelOpening opening_;
  ClientUpstreams upstreams_;  // parked between requests, or closing
};

}  // namespace sluice::proxy::session
