#pragma once
// One client connection from a sandbox: its transport and the requests on it. Every check is
// decide() (policy/decision.h) on the facts known so far; the connection gathers the facts
// of the connection itself and leaves each request to an Exchange.
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
//                                   Serving: requests come and go (Exchange) <───┘
//                                      (ALPN h2: Multiplexing, streams at once)
//   a refusal, the last exchange ──> Lingering (FIN sent, input drained) ──> Closing ──> Closed
//
// HTTP/1.1 bytes are Http1ServerCodec's, each request an Exchange's (exchange.h); the
// connection keeps one of each and reuses them. HTTP/2 (Multiplexing) bytes are
// Http2ServerCodec's, made when ALPN agrees h2; each stream is an Http2Stream with its own
// Exchange (docs/wire.md#http2).
//
// Ownership: the worker owns the connection; the connection owns the client stream, its timer,
// its codec, its exchange (and through it the connector and the upstream in use), the parked
// upstream and the upstreams being closed (ClientUpstreams). close() closes every handle; when
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
#include "proxy/session/client_transport.h"
#include "proxy/session/client_upstreams.h"
#include "proxy/session/connection_state.h"
#include "proxy/session/connection_timer.h"
#include "proxy/session/exchange.h"
#include "proxy/session/exchange_host.h"
#include "proxy/session/http1_server_codec.h"
#include "proxy/session/http2_server_codec.h"
#include "proxy/session/sandbox_binding.h"
#include "proxy/session/tunnel_opening.h"
#include "proxy/session/upstream_pool.h"
#include "proxy/session/worker_context.h"

namespace sluice::proxy {
struct Generation;
struct SandboxRuntime;
struct SandboxView;
}  // namespace sluice::proxy

namespace sluice::proxy::session {

class ClientConnection final : private io::TcpStream::Handler,
                               private ExchangeHost,
                               private CodecHost,
                               private Http2Host,
                               private TransportOwner,
                               private OpeningHost {
 public:
  // Explicit: the sandbox asks (CONNECT, absolute-form). Transparent: nftables redirected a
  // connection the sandbox made to somewhere else (docs/wire.md#transparent-mode); TLS or HTTP
  // is told from its first byte, and H is the SNI or the Host.
  enum class Listener : std::uint8_t { Explicit, Transparent };

  // What happens when the exchange in progress is over.
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

  // --- ExchangeHost (client_connection.cc)
  WorkerContext& context() override { return ctx_; }
  const ConnectionFacts& facts() const override { return facts_; }
  const Generation& generation() const override { return binding_.generation(); }
  const SandboxView& sandboxView() const override { return binding_.view(); }
  void cork() override { transport_.cork(); }
  void uncork() override;
  bool corked() const override { return transport_.corked(); }
  void flushCorked() override;
  void noteAudited() override { audited_ = true; }
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
  void onExchangeOver(ExchangeState outcome) override;

  // --- CodecHost (client_connection.cc, client_connection_requests.cc)
  void sendClient(std::string_view bytes) override { transport_.send(bytes); }
  void sendClientFinal(std::string_view bytes) override { transport_.sendFinal(bytes); }
  bool clientBackedUp() const override { return transport_.stream().backedUp(); }
  bool closesAfterExchange() const override { return after_exchange_ != AfterExchange::ReadNext; }
  void closeAfterExchange() override;
  void onHeadBegun() override;
  void onConnectHead(const http::RequestHead& head) override;
  void onRequestHead(const http::RequestHead& head) override;
  void onBadRequest(policy::Reason reason, std::string_view detail) override;

  // --- Http2Host (client_connection_h2.cc)
  Admission admitRequest() override;
  void onStreamsIdle() override;
  void onCodecDone(std::string_view why) override;
  void onConnectionError(audit::Error error) override;
  // ALPN agreed h2: the codec is made and its preface sent. False: the connection closed.
  bool startHttp2();
  // The earliest deadline of the exchanges in flight (0: none).
  std::uint64_t exchangeDeadline() const;

  // --- TransportOwner
  void flushRecords() override { flushAudit(); }
  void onTransportFailed(std::string_view why) override { close(why); }

  // --- the client's bytes (client_connection.cc)
  void onClientBytes(std::span<const char> data);
  // Whether the state wants the client's bytes (before the backed-up rule of updateReading()).
  bool clientWanted() const;
  // Hands this connection's buffered audit records to the OS (before the client is closed).
  void flushAudit();

  // --- OpeningHost, and the tunnel once open (client_connection_tunnel.cc)
  void onHandshakeBytes() override;
  void onTunnelOpen() override;
  void onHandshakeFailed(const tls::Failure& failure) override;
  // Why a tunnel that has carried no request ends (the first cause noted stands)...
  void noteTunnelEnd(audit::Error why);
  // ... and its record, when the connection ends without one (docs/audit.md#errors).
  void recordQuietTunnel();
  // Decrypts what the client sent into the codec (the handshake first, while it runs).
  void pumpClientTls();

  // --- requests (client_connection_requests.cc)
  // The first head on the explicit listener when it is not CONNECT: forward mode.
  void onProxyHead(const http::RequestHead& head);
  // The record of a head the parser refused says what had been received.
  void describeRefusedHead();
  // A new request (a head, a CONNECT, a redirected ClientHello) while this sandbox's audit file
  // cannot be written: refused, audit_unavailable, its record kept with the others. True when
  // it was; the one place that check is made.
  bool refuseIfAuditUnavailable() override;
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
  // Says goodbye politely: close_notify inside TLS, FIN, then drain the client's input for a
  // moment so sluice's last bytes are not destroyed by an RST.
  void finishConnection() override;
  // A handle closed; the last one moves the connection to Closed and hands it back.
  void handleClosed();
  // Serving, and no request in progress: waiting for the next head.
  bool betweenRequests() const {
    return state_ == ConnectionState::Serving && !exchange_.inFlight();
  }
  void releaseIdleBuffers();
  std::uint64_t idleTimeoutMs() const;
  void onTimer();

  WorkerContext& ctx_;
  // The sandbox, in the generation this connection's current request (or handshake) is judged
  // by (it changes only between requests: takeUpCurrentGeneration), and the open counts.
  SandboxBinding binding_;
  ConnectionFacts facts_;
  ConnectionState state_ = ConnectionState::ReadingProxyHead;
  AfterExchange after_exchange_ = AfterExchange::ReadNext;
  bool audited_ = false;        // a record was written for this connection
  audit::Error tunnel_end_ = audit::Error::None;  // noteTunnelEnd()
  bool stream_closed_ = false;  // the client stream's close callback ran
  bool timer_closed_ = false;   // the timer's close callback ran

  ClientTransport transport_;
  ConnectionTimer timer_;

  Http1ServerCodec codec_;
  Exchange exchange_;
  std::unique_ptr<Http2ServerCodec> h2_;  // Multiplexing only
  TunnelOpening opening_;
  ClientUpstreams upstreams_;  // parked between requests, or closing
};

}  // namespace sluice::proxy::session
