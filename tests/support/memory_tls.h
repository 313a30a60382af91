#pragma once
// One end of a TLS connection on OpenSSL memory BIOs, for a test peer that runs on the test's
// loop (loop_peer.h): ciphertext from the socket goes in, plaintext comes out, and the other way
// round. Written on OpenSSL directly, with none of sluice's TLS code, so that a test of the
// gateway cannot share a bug with it.
//
// A client verifies the server's chain against a CA file and the server's name against the host
// it was made for (also its SNI); a server presents one certificate and its key.

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::test_support {

class MemoryTls {
 public:
  // What a client offers in ALPN.
  enum class Alpn : std::uint8_t { Http11, H2 };
  // A client offering ALPN `alpn`, SNI `host`; `host` empty: no SNI and no name check.
  static std::unique_ptr<MemoryTls> client(const std::string& ca_file, const std::string& host,
                                           Alpn alpn = Alpn::Http11);
  // A server presenting `certificate` with `key` (both are up-referenced).
  static std::unique_ptr<MemoryTls> server(X509* certificate, EVP_PKEY* key);
  ~MemoryTls();
  MemoryTls(const MemoryTls&) = delete;
  MemoryTls& operator=(const MemoryTls&) = delete;

  // Ciphertext from the peer. Plaintext it carried is appended to `plain`. False once TLS
  // failed (error() says why); a close_notify sets closeNotifyReceived().
  bool feed(std::string_view ciphertext, std::string& plain);
  // Encrypts `plaintext` (handshake permitting: written once it is done).
  void write(std::string_view plaintext);
  // A client starts its handshake (the ClientHello).
  void start();
  // close_notify.
  void shutdown();
  // Ciphertext waiting to be sent to the peer; taken out.
  std::string takeOutput();

  bool handshakeDone() const { return SSL_is_init_finished(ssl_) == 1; }
  // The protocol the server selected by ALPN ("" if none).
  std::string_view selectedAlpn() const;
  bool failed() const { return failed_; }
  bool closeNotifyReceived() const { return close_notify_; }
  const std::string& error() const { return error_; }
  // The alert the peer sent, as OpenSSL describes it ("" if none was seen).
  const std::string& peerAlert() const { return peer_alert_; }

 private:
  MemoryTls(SSL_CTX* ctx, bool is_server);
  void advance(std::string& plain);
  void noteError(const char* where);

  SSL_CTX* ctx_;
  SSL* ssl_;
  BIO* in_;   // the peer's ciphertext, read by OpenSSL
  BIO* out_;  // ciphertext for the peer, written by OpenSSL
  std::string pending_;  // plaintext written before the handshake finished
  bool failed_ = false;
  bool close_notify_ = false;
  std::string error_;
  std::string peer_alert_;
};

}  // namespace sluice::test_support
