#pragma once
// One client connection on an explicit-proxy listener, and the upstream connection it uses:
// the connection state machine of SPEC §5.1. Every check is decide() (policy/decision.h) on the
// facts known so far; this class gathers the facts and acts on the answers.
//
//   accept (explicit)                        accept (transparent): Sniffing
//     │                                        0x16: ReadingClientHello, H = SNI (below)
//     v                                        else: ReadingRequest, H = Host (below)
//   ReadingProxyHead ──CONNECT H:port──decide──deny──> 403 ─────────────────────────> Lingering
//     │ absolute-form http://H/ (forward mode)   │ allow: "200 Connection established"
//     │                                          v
//     │                                 ReadingClientHello ──own parser, decide(+SNI)──> alert
//     │                                          │ allow: leaf for H from the sandbox CA
//     │                                          v
//     │                                    TlsHandshake ──SSL_get_servername ≠ SNI──> close
//     │                                          │
//     v                                          v
//   ReadingRequest <──────── keep-alive ─── (one request head, llhttp strict) ──decide──> 403
//     │ allowed by policy
//     v
//   Resolving (c-ares, own servers; cached) ──decide(+addresses)──deny──> 403 ip_denied
//     │ usable addresses only, never resolved again         502 dns_failed
//     v
//   Connecting (each usable address in turn) ──────────────────────> 502 upstream_connect / 504
//     │ (or an idle pooled connection for the same sandbox, H, port)
//     v
//   UpstreamTls (SNI H, verify H against upstream.ca_file) ─────────> 502 upstream_cert
//     │
//     v
//   Exchanging: the head sluice wrote, body up; response head and body down (backpressure)
//     │ both complete: audit record, upstream back to the pool
//     └──> ReadingRequest, or Lingering (FIN sent, input drained) ──> Closing ──> deleted
//
// Ownership: the worker owns the Session; the Session owns the client stream, its timer and the
// upstream connection it is using. close() closes every handle; when the last close callback
// has run, WorkerContext::finished() hands the session back for deletion (STYLE practice 4).
// No callback of a component outlives the session: the DNS lookup is a cancel-on-destroy
// handle, streams and timer report their closing to the session before it is deleted.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/decision.h"
#include "proxy/audit/audit_record.h"
#include "proxy/dns/resolver.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/io/timer.h"
#include "proxy/session/connection_state.h"
#include "proxy/session/connector_state.h"
#include "proxy/session/exchange.h"
#include "proxy/session/secret_mask.h"
#include "proxy/session/upstream_pool.h"
#include "proxy/session/worker_context.h"
#include "proxy/tls/tls_session.h"

namespace sluice::proxy {
struct Generation;
struct SandboxRuntime;
struct SandboxView;
}  // namespace sluice::proxy

namespace sluice::proxy::session {

class Session : private io::TcpStream::Handler,
                private http::RequestBodySink,
                private http::ResponseBodySink {
 public:
  // Explicit: the sandbox asks (CONNECT, absolute-form). Transparent: nftables redirected a
  // connection the sandbox made to somewhere else (SPEC §5.2); TLS or HTTP is told from its
  // first byte, and H is the SNI or the Host.
  enum class Listener : std::uint8_t { Explicit, Transparent };

  // What happens when the exchange in progress is over.
  enum class AfterExchange : std::uint8_t {
    ReadNext,  // keep-alive: the next request
    Close,     // the client or the response asked to close, or the client closed its side
    Drain,     // the worker drains (or the sandbox went): close, keep no upstream either
  };

  // `sandbox` is one of `generation`'s.
  Session(WorkerContext& context, std::shared_ptr<const Generation> generation,
          const SandboxView& sandbox, std::uint64_t id, Listener listener);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Takes over the accepted connection `fd` and starts reading. False if that failed (the fd
  // is closed and the session already closing).
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

  // How many connections were open, this one counted, when it was made: process-wide and for
  // its sandbox. Taken by the same atomic add that counted it, so that of connections made
  // at once by several workers exactly those past a limit see themselves over it.
  struct OpenCount {
    std::uint64_t gateway = 0;
    std::int64_t sandbox = 0;
  };
  OpenCount openedAs() const { return opened_as_; }

  std::uint64_t id() const { return id_; }
  ConnectionState state() const { return state_; }
  // The sandbox's long-lived part (CA, counters): the same across the generations this
  // connection may see.
  SandboxRuntime& runtime() const { return *runtime_; }

 private:
  // --- io::TcpStream::Handler (both the client and the upstream stream) ---
  void onRead(io::TcpStream& stream, std::span<const char> data) override;
  void onEof(io::TcpStream& stream) override;
  void onError(io::TcpStream& stream, int status) override;
  void onDrained(io::TcpStream& stream) override;
  void onConnected(io::TcpStream& stream, int status) override;
  void onClosed(io::TcpStream& stream) override;
  // --- body sinks: request body up, response body down ---
  void onRequestBody(std::span<const char> data) override;
  void onResponseBody(std::span<const char> data) override;

  // Client side (session.cc, session_tls.cc).
  void onClientBytes(std::span<const char> data);
  void onFirstBytes(std::span<const char> data);
  bool originalDestinationMatches() const;
  bool takePooled(const UpstreamKey& key);
  void processClientPlaintext();
  void describeRefusedHead();
  void onProxyHead();
  void onConnectHead();
  void processClientHello();
  void pumpClientTls();
  // Writes to the client (through TLS when inside the tunnel). While corked (inside a read
  // callback) small writes are gathered and go out as one TLS record and one write when the
  // callback returns: a response head and a small body otherwise cost two of each. Large
  // pieces (a body read from the upstream) are encrypted at once, uncopied, but their records
  // also wait for the end of the callback, up to kWriteBatch: one write per upstream read, not
  // one per 16 KiB record.
  void sendClient(std::string_view bytes);
  // The bytes that complete a response (its last body bytes, the last chunk, a bodiless head).
  // Inside a callback they wait for its end, after the audit records written meanwhile have
  // reached the OS: a client that has its whole answer finds the record, even when sluice is
  // killed the next instant.
  void sendClientFinal(std::string_view bytes);
  void writeClientNow(std::string_view bytes);
  // Encrypts `bytes` into the client's TLS output (plain HTTP: writes them).
  void sealClient(std::string_view bytes);
  // Hands the client's pending TLS records to the socket.
  void pushClientCiphertext();
  // Sends what corked writes gathered, in order, to both sides.
  void flushCorked();
  void flushCorkedUpstream();
  struct Cork {
    explicit Cork(Session& session) : s(session) { ++s.cork_depth_; }
    ~Cork() {
      if (--s.cork_depth_ == 0) {
        // A record written in this callback reaches the OS before the bytes that end the
        // response it describes reach the client (a client that reads the log as soon as it
        // has its answer finds the record).
        s.flushAudit();
        s.flushCorked();
      }
    }
    Cork(const Cork&) = delete;
    Cork& operator=(const Cork&) = delete;
    Session& s;
  };
  void updateReading();
  // Whether the state wants the client's bytes (before the backed-up rule of updateReading()).
  bool clientWanted(bool upstream_backed_up) const;
  // Request progress: what idle_timeout counts from (README "Limits").
  void noteProgress() { last_progress_ms_ = uv_now(ctx_.loop); }

  // Requests (session_exchange.cc).
  // A new request (or tunnel) starts: it is judged by the generation in force now. False, and
  // the connection closed, when that generation no longer has this sandbox (or has it with
  // another CA): a removed sandbox's connections drain.
  bool takeUpCurrentGeneration();
  const policy::Sandbox& sandbox() const;
  const policy::Config& config() const;
  UpstreamKey upstreamKey() const;
  // Takes this request's token of the sandbox's rate, once per request; false: there was none.
  bool chargeRequest();
  std::string rateLimitDetail() const;
  // Takes the token; without one, answers 429 rate_limited (true).
  bool overRequestRate();
  void onRequestHead();
  void onRequestComplete();
  policy::Decision decideRequest(std::span<const policy::IpAddress> addresses, bool resolved);
  void acquireUpstream(const policy::Decision& decision);
  // The lookup's result and latency, for /metrics (`at_once`: answered from the cache).
  void countLookup(const dns::LookupResult& result, bool at_once);
  void onResolved(dns::LookupResult result);
  void connectNext();
  void onUpstreamConnected();
  void pumpUpstreamTls();
  void flushUpstreamTls();
  void startExchange();
  // inject_fields_: the rule's injected headers (and Accept-Encoding: identity when there are
  // any), which replace the sandbox's in the head sluice writes; sets exchange_.injected.
  void injectSecrets();
  std::string canonicalAuthority() const;
  void onResponseHead();
  // A response head to the client: masked when the exchange injected a secret.
  void sendResponseHead(std::string_view head, bool completes_response);
  // The answer to an injecting exchange has a content coding sluice cannot look into: 502
  // instead of forwarding it. True when it did.
  bool refuseEncodedResponse(const http::ResponseHead& head);
  // A piece of the response body to the client, in the client's framing (masked first when
  // this exchange injected a secret); flushResponseMask() sends what masking held back.
  void sendResponseBody(std::span<const char> data, bool completes_response);
  void flushResponseMask();
  void onResponseComplete();
  void onUpstreamBytes(std::span<const char> data);
  void processUpstreamPlaintext(std::span<const char> data);
  void sendUpstream(std::string_view bytes);
  void writeUpstreamNow(std::string_view bytes);
  void finishExchange();
  void upstreamFailed(policy::Reason reason, std::string_view detail);
  // Keeps the upstream for this client's next request when `reusable` (parks it), else
  // closes it.
  void releaseUpstream(bool reusable);
  // SPEC §5.5: denies (secret_misuse) a request carrying the placeholder of a secret that
  // exchange_.matched_rule does not inject. True when it did.
  bool refuseSecretMisuse();
  // HoldingBody is over (64 KiB held, or the whole body): scan, then deny or go upstream.
  void finishHolding();
  // Overwrites a buffer that held a head with an injected secret.
  void wipeIfSecret(std::string& buffer);
  void retireUpstream();
  // The parked upstream goes to the worker's pool (closed instead when draining).
  void unpark();
  void retireParked();

  // Answers and endings (session.cc).
  // Sends sluice's own error response for `reason` (over TLS when inside the tunnel), writes
  // the audit record, and closes after it is flushed.
  void deny(policy::Reason reason, std::string_view detail);
  // Refuses a tunnel whose TLS never started: an alert where one can be sent, then close.
  void refuseTunnel(policy::Reason reason, std::uint8_t alert, std::string_view detail);
  // A new request (a head, a CONNECT, a redirected ClientHello) while this sandbox's audit file
  // cannot be written: refused, audit_unavailable, its record kept with the others. True when
  // it was; the one place that check is made.
  bool refuseIfAuditUnavailable();
  void writeAudit(policy::Verdict verdict, policy::Reason reason, int status);
  // Hands this connection's buffered audit records to the OS (before the client is closed).
  void flushAudit();
  void finishConnection();
  void close(std::string_view why);
  // A handle closed; the last one moves the connection to Closed and hands it back.
  void handleClosed();
  bool closing() const {
    return state_ == ConnectionState::Closing || state_ == ConnectionState::Closed;
  }
  // The exchange in progress is the last: the connection closes after it (unless it drains).
  void closeAfterExchange();
  // Resets the exchange for a new request or record (the state moves to Deciding).
  void beginRecord(bool hash);
  // The connector stops (the lookup is cancelled; a socket being dialled is the caller's).
  void cancelConnector();
  // The upstream's close ended a response that runs until it.
  void onResponseEndedByClose();
  void armTimer();
  void releaseIdleBuffers();
  void onTimer();
  // The one way the connection's state changes: false (logged; an assertion in debug builds)
  // for a move kConnectionMachine does not list, and the state stays.
  bool transition(ConnectionState next);
  bool transition(ExchangeState next);
  bool transition(ConnectorState next);
  // TLS was terminated: H is fixed for the connection (CONNECT, or transparent TLS).
  bool tunnel() const { return client_tls_.has_value(); }
  // The request in progress is not complete yet: its body (or head) is read from the client.
  bool exchangeWantsClientBytes(bool upstream_backed_up) const;
  // The request parser may be fed (a head, or the body of the request in progress).
  bool parserMayRun() const;
  // Serving, and no request in progress: waiting for the next head.
  bool betweenRequests() const {
    return state_ == ConnectionState::Serving && !exchange_.inFlight();
  }

  WorkerContext& ctx_;
  // The generation this connection's current request (or handshake) is judged by, and this
  // sandbox in it; both change only between requests (takeUpCurrentGeneration).
  std::shared_ptr<const Generation> generation_;
  const SandboxView* view_;
  std::shared_ptr<SandboxRuntime> runtime_;
  std::uint64_t id_;
  ConnectionState state_ = ConnectionState::ReadingProxyHead;
  ConnectorState connector_state_ = ConnectorState::Idle;
  AfterExchange after_exchange_ = AfterExchange::ReadNext;
  audit::Mode mode_ = audit::Mode::Connect;
  std::optional<policy::Endpoint> orig_dst_;  // transparent: where the sandbox was going
  std::uint64_t started_ms_ = 0;
  OpenCount opened_as_;
  // The last request progress: bytes the request parser used, response bytes from the
  // upstream, a peer taking what it was sent, the handshake phase advancing, an exchange
  // starting or ending. Not any bytes: records that carry no request (TLS KeyUpdates, empty
  // records) or bytes nobody reads yet (pipelined) keep no connection alive.
  std::uint64_t last_progress_ms_ = 0;
  std::uint64_t phase_deadline_ms_ = 0;    // handshake, connect or linger deadline; 0: none
  std::uint64_t release_deadline_ms_ = 0;  // idle between requests: give buffers back then
  std::uint64_t armed_for_ms_ = 0;         // when the timer fires (0: not armed)
  bool audited_connection_ = false;  // a record was written for this connection
  int open_handles_ = 0;

  io::TcpStream client_;
  io::Timer timer_;
  policy::Endpoint client_address_;

  // CONNECT target, as received (the tunnel's H).
  std::string connect_host_;
  std::uint16_t connect_port_ = 0;
  std::string connect_authority_;
  // TLS towards the sandbox.
  std::string hello_;  // raw tunnel bytes until the ClientHello is complete
  policy::SniState sni_state_ = policy::SniState::Unknown;
  std::string sni_;  // as received (raw)
  std::optional<tls::TlsSession> client_tls_;

  http::RequestParser request_parser_;
  http::ResponseParser response_parser_;
  std::string client_plain_;  // client plaintext not yet parsed (a paused parser)
  std::size_t client_plain_offset_ = 0;
  bool message_end_pending_ = false;  // after a head: its end may come without more bytes
  std::string scratch_;               // heads and frames being written; reused
  std::vector<http::HeaderField> inject_fields_;  // the rule's injected headers; reused
  SecretMask response_mask_;
  std::string masked_;  // a response head or body piece after masking; reused
  // HoldingBody: the decoded start of the body (a little over 64 KiB at most), scanned for
  // placeholders before anything is forwarded; sent ahead of the rest once the exchange starts.
  std::string held_body_;
  // SPEC §5.5: how much of a request body is looked at for placeholders.
  static constexpr std::size_t kBodyScanBytes = 64 * 1024;
  int cork_depth_ = 0;
  std::string client_out_;    // corked plaintext for the client
  std::string upstream_out_;  // corked plaintext for the upstream

  Exchange exchange_;
  std::unique_ptr<UpstreamConnection> upstream_;
  // The upstream of the last exchange, kept between a keep-alive client's requests: its next
  // request is nearly always for the same (H, port), and taking it back from here costs no pool
  // lookup and no re-arming of its reads. Still re-checked for every request, like a pooled
  // one; goes to the pool when the client idles, leaves or asks for another key.
  std::unique_ptr<UpstreamConnection> parked_;
  // Upstreams being closed, kept until their close callback.
  std::vector<std::unique_ptr<UpstreamConnection>> closing_upstreams_;
  std::unique_ptr<dns::Resolver::Lookup> lookup_;
};

}  // namespace sluice::proxy::session
