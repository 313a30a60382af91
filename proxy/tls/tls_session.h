#pragma once
// One TLS connection on memory queues, sans-IO (testable by feeding buffers): ciphertext in,
// plaintext out, and back. No sockets, no loop, no timers: the session code reads the socket, feeds
// the bytes here, asks for the handshake or plaintext, and writes whatever ciphertext this
// object has pending. Every call is synchronous and non-blocking.
//
// The caller's loop, for either side:
//
//   on socket bytes:  feed(bytes); then handshake() until Done, or read() until WantIo
//   after EVERY call: while (pendingCiphertext()) send peekCiphertext(), consumeCiphertext(n)
//                     (handshake(), read(), write() and shutdown() all may produce ciphertext:
//                     handshake flights, alerts, TLS 1.3 KeyUpdate answers, close_notify)
//   to send data:     write(plaintext), then flush as above
//   to close:         shutdown(), flush, close the socket
//   on Failed:        log failure(), flush (OpenSSL has usually queued an alert for the peer,
//                     and a refused tunnel gets an alert where one can be sent), close the socket
//
// Socket EOF is the caller's business: it is never fed in, and a peer that closes without
// close_notify is simply a closed socket.
//
// Ownership and lifetime: move-only; owns its SSL and both byte queues (one heap block, so
// moving is cheap and never invalidates what OpenSSL points at). The SSL holds references to
// its SSL_CTX, certificate, key and resumed session, so none of them needs to outlive the
// TlsSession. A moved-from TlsSession may only be destroyed or assigned to. Not thread-safe:
// one connection, one thread at a time.
//
// Errors: no exceptions (except std::bad_alloc from the byte queues, like any container);
// every OpenSSL failure path leaves the thread's error queue empty, and each OpenSSL I/O call
// starts from an empty queue so SSL_get_error() is reliable.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/ssl.h>

#include "base/result.h"
#include "certs/openssl_ptr.h"
#include "proxy/tls/plaintext_scratch.h"

namespace sluice::proxy::tls {

using certs::SslSessionPtr;

enum class HandshakeStatus : std::uint8_t { Done, WantIo, Failed };

// The protocols a client session offers (ALPN).
enum class OfferAlpn : std::uint8_t { Http11, H2AndHttp11 };

enum class ReadStatus : std::uint8_t {
  Data,    // *n > 0 bytes of plaintext were written to `out`
  WantIo,  // no plaintext until more ciphertext is fed (flush pending ciphertext first)
  Closed,  // the peer sent close_notify: no more data will come
  Failed,  // fatal; see failure()
};

enum class FailureKind : std::uint8_t {
  None,
  Certificate,  // the upstream certificate did not verify (chain, validity or name)
  Alert,        // the peer sent a fatal alert
  Protocol,     // anything else: malformed records, version or cipher mismatch, misuse
};
std::string_view toString(FailureKind kind);

struct Failure {
  FailureKind kind = FailureKind::None;
  std::string detail;     // one line for debug logs, e.g. "certificate verify failed at
                          // depth 0: hostname mismatch (X509 error 62; expected pkg.test)"
  int verify_error = 0;   // Certificate: the X509_V_ERR_* code
  int verify_depth = -1;  // Certificate: 0 is the leaf
  int alert = -1;         // Alert: the TLS alert description (e.g. 40 handshake_failure)
};

class TlsSession {
 public:
  // Sandbox-facing: accepts a handshake from the sandbox, presenting `leaf` (from the sandbox's
  // LeafCache, for the host the caller has already decided on) with `key` (the cache's shared
  // leaf key). `ctx` comes from makeServerContext(); it is shared, the certificate is per
  // connection. Fails only when OpenSSL cannot allocate or `key` does not match `leaf`.
  static Result<TlsSession, std::string> server(SSL_CTX* ctx, X509* leaf, EVP_PKEY* key);

  // Upstream: connects as a client to `host`, which must be canonical (a DNS name, or an IP
  // literal's text: certs::certificateHostKind). A name is sent as SNI and verified against
  // the certificate's DNS SANs (no partial wildcards such as "f*.example.com", never the
  // subject CN); an IP literal is sent without SNI (RFC 6066) and verified against the IP
  // SANs. Peer verification is always on, whatever `ctx` says. `ctx` comes from
  // makeUpstreamContext().
  //
  // `resume`: a session from session() of an earlier connection to the same (host, port); the
  // caller keeps its own reference (SSL_set_session takes another). Ignored, with a full
  // handshake instead, if it is not resumable, was made for another host, or did not come
  // from session() (which tags each session with its host).
  //
  // `alpn`: what the origin is offered (docs/wire.md#http2-toward-origins): "h2" and
  // "http/1.1", or "http/1.1" alone (a WebSocket upgrade, which sluice asks of HTTP/1.1 only).
  static Result<TlsSession, std::string> client(SSL_CTX* ctx, std::string_view host,
                                                SSL_SESSION* resume = nullptr,
                                                OfferAlpn alpn = OfferAlpn::Http11);

  TlsSession(TlsSession&&) noexcept;
  TlsSession& operator=(TlsSession&&) noexcept;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  // Appends ciphertext from the peer. Takes all of it (one copy into the incoming queue);
  // nothing is processed until handshake() or read(). The queue grows without bound if the
  // caller keeps feeding without reading: stop reading the socket while bufferedCiphertext()
  // is large. Once read() has met the end (close_notify) or a failure, nothing more will be
  // read, and what is fed is dropped.
  void feed(std::span<const char> ciphertext);
  std::size_t bufferedCiphertext() const;

  // Advances the handshake with what has been fed. Done once it completes (and on every call
  // after); WantIo: feed more (after flushing pending ciphertext); Failed: see failure().
  HandshakeStatus handshake();
  bool handshakeDone() const;

  // Decrypts as much plaintext as fits into `out` (which must not be empty). Data may be
  // returned while more is buffered inside OpenSSL: call again until WantIo. A Closed or
  // Failed that happens after some data was returned is reported by the next call. On a
  // client, also processes TLS 1.3 NewSessionTickets: see session().
  //
  // Post-handshake messages (a KeyUpdate, a request to renegotiate) make OpenSSL derive keys
  // or answer, and carry no data: a peer may send kPostHandshakeAllowance of them, plus one per
  // kDataPerPostHandshakeMessage of application data the connection has carried (both ways).
  // One more is Failed (Protocol), and nothing the peer sent after it is processed. Session
  // tickets are not counted (no answer, and a server sends them when it likes); OpenSSL itself
  // bounds the other records without data (empty records, warning alerts).
  ReadStatus read(std::span<char> out, std::size_t* n);
  // read() until there is no more plaintext, into the thread's PlaintextScratch, handing each
  // piece to `deliver(std::span<const char>)` before the next is decrypted (nothing of it is
  // kept after). `deliver` returns false to stop at once: the session may be gone then, and
  // nothing of it is touched after. Returns what ended it: WantIo, Closed or Failed, or Data
  // when `deliver` stopped it.
  template <typename Deliver>
  ReadStatus readEach(Deliver&& deliver);
  static constexpr std::uint64_t kPostHandshakeAllowance = 32;
  static constexpr std::uint64_t kDataPerPostHandshakeMessage = 1024 * 1024;

  // Encrypts all of `plaintext` into pending ciphertext (records of at most 16 KiB). Needs a
  // completed handshake. False on a fatal error (see failure()); then nothing more can be
  // sent but the alert OpenSSL may have queued.
  [[nodiscard]] bool write(std::span<const char> plaintext);

  // Queues close_notify, once the handshake has completed (before that there is nothing to
  // close politely: just drop the connection). Idempotent.
  void shutdown();

  // Ciphertext waiting to be sent to the peer.
  std::size_t pendingCiphertext() const;
  // A view of all pending ciphertext, valid until the next non-const call. Send it and
  // consume what the socket took: no copy on the way out. Not for asynchronous writes that
  // outlive the next call (uv_write): use takeCiphertextBuffer() for those.
  std::span<const char> peekCiphertext() const;
  void consumeCiphertext(std::size_t n);
  // Copies up to out.size() bytes of pending ciphertext into `out` and consumes them.
  std::size_t takeCiphertext(std::span<char> out);
  // Moves all pending ciphertext out, without copying it, as a buffer the caller owns (e.g.
  // until its uv_write completes). `spare` (its contents discarded, its capacity kept) becomes
  // the new internal queue, so two buffers can alternate without reallocation.
  std::vector<char> takeCiphertextBuffer(std::vector<char> spare = {});

  // Why the last Failed happened; kind None while nothing failed.
  const Failure& failure() const;

  // Server: the SNI the client sent (empty if none). The session code must compare it with
  // the SNI its own ClientHello parser read (docs/wire.md#tls-toward-the-sandbox:
  // `sni_mismatch` otherwise).
  // Client: the SNI sent (empty for IP literals). Valid while the session lives.
  std::string_view servername() const;
  // The protocol ALPN agreed on: "http/1.1" or empty.
  std::string_view alpn() const;
  // "TLSv1.3", "TLSv1.2", for logs.
  std::string_view protocolVersion() const;

  // Client: the session to resume the next connection to the same (host, port) with, or null
  // if there is none yet (and always on a server). Returns a copy tagged with this
  // connection's host, owned by the caller alone; it may be shared read-only across threads
  // and used by any number of later client() calls for the same host. With TLS 1.3 the
  // server sends its tickets after the handshake, so a resumable session exists only after
  // read() has processed them: take it after the first response bytes were read (or at the
  // latest when the connection goes idle), not right after handshake() returns Done.
  SslSessionPtr session() const;
  // Whether this connection resumed a session (an abbreviated handshake: no certificate was
  // sent; the original connection's verification stands).
  bool sessionReused() const;

  // Frees OpenSSL's record buffers and the byte queues' memory while nothing is buffered, so
  // an idle connection costs little. Call when the connection goes idle; harmless otherwise.
  void releaseBuffers();

 private:
  struct State;
  explicit TlsSession(std::unique_ptr<State> state);
  void recordFailure(int ssl_error);
  static void watchPostHandshake(SSL* ssl, State* state);
  static void onProtocolMessage(int write_p, int version, int content_type, const void* buf,
                                std::size_t len, SSL* ssl, void* arg) noexcept;

  std::unique_ptr<State> state_;
};

template <typename Deliver>
ReadStatus TlsSession::readEach(Deliver&& deliver) {
  const PlaintextScratch scratch;
  const std::span<char> out = scratch.bytes();
  for (;;) {
    std::size_t n = 0;
    const ReadStatus status = read(out, &n);
    if (status != ReadStatus::Data) {
      return status;
    }
    if (!deliver(std::span<const char>(out.data(), n))) {
      return ReadStatus::Data;
    }
  }
}

}  // namespace sluice::proxy::tls
