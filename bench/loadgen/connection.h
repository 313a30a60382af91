#pragma once
// One client connection slot of the load generator: TCP, then CONNECT through the proxy (if
// any), then TLS on memory buffers (proxy/tls/TlsSession), then HTTP/1.1 requests parsed by
// proxy/http/ResponseParser, or (--proto h2, ALPN h2 required) an HTTP/2 session of
// `streams` concurrent requests (H2Session). The slot lives for the whole run and carries one
// connection after another; each connection's TcpStream and TlsSession are made when it opens
// and dropped when it closes (the H2Session object stays; its nghttp2 session is per
// connection).
//
//   Idle ─open()─> Connecting ─(proxy)─> ProxyHead ─2xx─> TlsHandshake ─> Exchanging ──┐
//     ^                  └────────(direct)───────────────────^      next request ^    │
//     │                                                      (keepalive, bulk)   └────┤
//     │                                        idle: Holding (until the end) <────────┤
//     └─releaseStream()─ Closing <─ fail(), finish() (newconn, server close), abandon() ─┘
//   Idle ─reopenAfter(backoff)─> Waiting ─tick()─> Connecting   (after repeated failures)
//
// With h2, Exchanging is the session running its streams (a new one as each completes, in
// keepalive and bulk); the session being Done (newconn and idle after their one response,
// keepalive and bulk after the server's GOAWAY) is what a response's end is for HTTP/1.1.
//
// The steady state allocates nothing here: the request bytes are the Target's, the parser and
// the TLS byte queues keep their capacity, plaintext lands in the thread's buffer, body bytes
// are counted and never copied or hashed. (OpenSSL 3.0 itself still mallocs a few times per
// record, inside SSL_write_ex and SSL_read_ex; nghttp2 per stream: see h2_session.h.)
//
// Ownership: the LoadThread owns every Connection (unique_ptr, for the whole run) and is told
// of each close through onConnectionClosed(); it then calls releaseStream() from a safe point
// (not from inside a TcpStream callback) before open() may be called again. All calls happen
// on the owning thread's loop.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "bench/loadgen/target.h"
#include "proxy/http/response_parser.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/tls/tls_session.h"

namespace sluice::loadgen {

class H2Session;
class LoadThread;

class Connection final : public proxy::io::TcpStream::Handler,
                         public proxy::http::ResponseBodySink {
 public:
  enum class State : std::uint8_t {
    Idle,          // no connection; open() may be called
    Waiting,       // closed after failures: reopened by tick() once the backoff has passed
    Connecting,    // TCP connect in progress
    ProxyHead,     // CONNECT sent, waiting for the proxy's answer
    TlsHandshake,  // ClientHello sent
    Exchanging,    // a request is in flight (h2: the session is running its streams)
    Holding,       // idle mode: one request done, the connection stays open
    Closing,       // close() called; onClosed() will follow
  };

  // No progress for this long fails the connection (Timeout).
  static constexpr std::uint64_t kProgressTimeoutMs = 10'000;

  Connection(LoadThread& owner, const Target& target);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() override;

  // Starts a new connection (nothing once the run has ended). State must be Idle.
  void open();
  // Closes whatever is open without counting anything (the run ended).
  void abandon();
  // After onConnectionClosed(): drops the closed stream. The state goes to Idle.
  void releaseStream();
  // Reopens after `delay_ms` (0: now). From Idle only.
  void reopenAfter(std::uint64_t delay_ms, std::uint64_t now_ms);
  // The owner's periodic sweep: reopens when a backoff has passed, fails a stalled connection.
  void tick(std::uint64_t now_ms);

  State state() const { return state_; }
  // Whether the last connection failed, and how many failed in a row (reset by a success).
  bool failed() const { return failed_; }
  int consecutiveFailures() const { return consecutive_failures_; }
  // Whether the last connection reached Holding (idle mode).
  bool wasHeld() const { return held_; }

  // TcpStream::Handler
  void onRead(proxy::io::TcpStream& stream, std::span<const char> data) override;
  void onEof(proxy::io::TcpStream& stream) override;
  void onError(proxy::io::TcpStream& stream, int uv_status) override;
  void onDrained(proxy::io::TcpStream& stream) override;
  void onConnected(proxy::io::TcpStream& stream, int status) override;
  void onClosed(proxy::io::TcpStream& stream) override;

  // ResponseBodySink: body bytes are counted, nothing else.
  void onResponseBody(std::span<const char> data) override;

 private:
  void readProxyHead(std::span<const char> data);
  void beginTls(std::span<const char> early);
  void driveHandshake();
  void sendRequest();
  // Decrypts and parses everything buffered. Stops early once the state left Exchanging.
  void drainTls();
  // Parses one piece of plaintext; false once the connection was closed.
  bool parsePlaintext(std::span<const char> data);
  void onResponseComplete();
  // h2: after the handshake; each piece of plaintext (false once the connection was closed);
  // what the session has to send (false once failed); the session being done.
  void startH2();
  bool receiveH2(std::span<const char> data);
  bool flushH2();
  void onH2Done();
  void onPeerClosed();
  void flushTls();
  // Counts the failure with the owner and closes the connection (no close_notify).
  void fail(ErrorKind kind, std::string_view detail);
  // A finished connection: close_notify when TLS is up, then close.
  void finish();
  void close();
  bool active() const {
    return state_ == State::Connecting || state_ == State::ProxyHead ||
           state_ == State::TlsHandshake || state_ == State::Exchanging;
  }

  LoadThread& owner_;
  const Target& target_;
  State state_ = State::Idle;
  std::optional<proxy::io::TcpStream> stream_;
  std::optional<proxy::tls::TlsSession> tls_;
  proxy::http::ResponseParser parser_;
  std::unique_ptr<H2Session> h2_;  // --proto h2 only, for the whole run

  std::uint64_t connect_start_ns_ = 0;  // newconn and idle latency start at the TCP connect
  std::uint64_t request_start_ns_ = 0;  // keepalive and bulk latency start at the request
  std::uint64_t last_progress_ms_ = 0;  // uv_now() of the last event, for the stall timeout
  std::uint64_t reopen_at_ms_ = 0;      // Waiting: when tick() reopens
  int status_ = 0;                      // of the response in progress; 0 before its head
  int consecutive_failures_ = 0;
  bool failed_ = false;
  bool held_ = false;
};

}  // namespace sluice::loadgen
