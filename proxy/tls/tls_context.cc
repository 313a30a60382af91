#include "proxy/tls/tls_context.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "certs/openssl_error.h"
#include "certs/x509_util.h"

namespace sluice::proxy::tls {

namespace {

// At least 2 (RSA/DH >= 2048 bits, ECC >= 224, no SHA-1 signatures), or what the system's
// openssl.cnf already demands if that is stricter.
constexpr int kMinSecurityLevel = 2;

// The sandbox side's TLS 1.2 suites: forward-secret AEAD only. The leaf key is ECDSA, so
// these are the ECDHE-ECDSA-AES-GCM and -CHACHA20-POLY1305 suites every current client has.
// AES-128-GCM first, as in kTls13Suites.
constexpr const char* kServerTls12Ciphers = "ECDHE+AESGCM+AES128:ECDHE+AESGCM:ECDHE+CHACHA20";

// TLS 1.3 suites, both sides: OpenSSL's three (all AEAD), AES-128-GCM first. sluice encrypts
// and decrypts every byte twice (once per leg), and AES-128 takes 10 rounds a block where
// AES-256 takes 14: a download costs sluice about a sixth less CPU
// (docs/wire.md#tls-toward-the-sandbox). This is the order Go's crypto/tls and BoringSSL use on
// hardware with AES instructions; 128-bit AES-GCM is what TLS 1.3 requires every peer to support
// (RFC 8446 section 9.1). sluice picks the suite toward the sandbox (server preference), except
// that a client that prefers ChaCha20 (hardware without AES instructions) gets it
// (SSL_OP_PRIORITIZE_CHACHA); toward origins it offers this order, which origins commonly follow.
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// Key exchange, both sides: X25519, P-256 and P-384. OpenSSL's default list also has X448, P-521
// and the finite-field groups up to ffdhe8192 (RFC 7919), and the client chooses among what the
// server accepts: a sandbox offering only ffdhe8192 would make every handshake cost sluice modular
// exponentiations over 8192 bits (over a hundred milliseconds of CPU per handshake, against about a
// millisecond for X25519). X25519 first: the cheapest, and what current clients send a key share
// for.
constexpr const char* kGroups = "X25519:P-256:P-384";

// The upstream side's TLS 1.2 suites: OpenSSL's defaults less those whose key exchange is
// finite-field Diffie-Hellman (DHE-*, DHE-PSK-*), in which the origin picks the group and its
// size. ECDHE and RSA key exchange stay, for origins that still have only those.
constexpr const char* kUpstreamTls12Ciphers = "DEFAULT:!kDHE:!kDHEPSK";

// The ALPN wire list sluice offers upstream: one length-prefixed protocol name.
constexpr unsigned char kAlpnWire[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// Selects "h2" if the client's list has it, else "http/1.1" if it has that (the server's
// preference, whatever the client's order: every stream of an h2 connection is decided on its
// own, docs/wire.md#http2); otherwise no ALPN at all (NOACK), so the client falls back to its
// default, HTTP/1.1 (docs/threat-model.md#protocol-escapes: nothing but HTTP is agreed to).
// `out` points into the client's list, as SSL_select_next_proto does; OpenSSL has already
// checked the list's framing, and the bounds are checked again here anyway.
int selectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_len,
               const unsigned char* in, unsigned int in_len, void* /*arg*/) noexcept {
  const unsigned char* http11 = nullptr;
  unsigned int i = 0;
  while (i < in_len) {
    unsigned int len = in[i++];
    if (len == 0 || len > in_len - i) {
      return SSL_TLSEXT_ERR_NOACK;
    }
    const std::string_view protocol(reinterpret_cast<const char*>(in + i), len);
    if (protocol == kAlpnH2) {
      *out = in + i;
      *out_len = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    if (protocol == kAlpnHttp11) {
      http11 = in + i;
    }
    i += len;
  }
  if (http11 == nullptr) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = http11;
  *out_len = static_cast<unsigned char>(kAlpnHttp11.size());
  return SSL_TLSEXT_ERR_OK;
}

// Settings both sides share.
bool configureCommon(SSL_CTX* ctx) {
  SSL_CTX_set_security_level(ctx, std::max(kMinSecurityLevel, SSL_CTX_get_security_level(ctx)));
  // Renegotiation is a DoS lever and a source of identity confusion; nothing here needs it.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // No SSL_MODE_RELEASE_BUFFERS: it frees and reallocates a 16 KiB record buffer around every
  // record, a malloc and a free per read on a busy connection. The session releases buffers
  // itself once a connection has been idle for a second (TlsSession::releaseBuffers), so idle
  // connections still hold none. The write buffer is a growable memory queue, so SSL_write
  // always takes everything in one call; partial writes are not enabled (TlsSession::write
  // still loops, in case they ever are), and a retried write may come from a moved buffer.
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return SSL_CTX_set_ciphersuites(ctx, kTls13Suites) == 1 &&
         SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
         SSL_CTX_set_max_proto_version(ctx, 0) == 1 &&  // 0: the highest this OpenSSL knows
         SSL_CTX_set1_groups_list(ctx, kGroups) == 1;
}

// Says what is wrong with a trust file (the key `what` names it by) in words an operator can
// act on, before OpenSSL's more cryptic "no certificate or crl found" or "system lib". The file
// is read once, into a store of its own (the context's may hold the default certificates
// already, so only the file's own count says whether it holds one), and its objects are then
// added to the context's store.
Result<Ok, std::string> loadTrustFile(SSL_CTX* ctx, std::string_view what,
                                      const std::string& path) {
  const std::string named = std::string(what) + " " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Err{named + ": " + std::strerror(errno)};
  }
  if (!S_ISREG(st.st_mode)) {
    return Err{named + ": not a regular file"};
  }
  certs::X509StorePtr file(X509_STORE_new());
  if (!file || X509_STORE_load_file(file.get(), path.c_str()) != 1) {
    return certs::opensslFailure(named +
                                 ": cannot load it as PEM certificates (unreadable, empty, or "
                                 "not PEM)");
  }
  X509_STORE* trusted = SSL_CTX_get_cert_store(ctx);
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(file.get());
  int certificates = 0;
  for (int i = 0; objects != nullptr && i < sk_X509_OBJECT_num(objects); ++i) {
    X509_OBJECT* object = sk_X509_OBJECT_value(objects, i);
    bool added = true;
    if (X509_OBJECT_get_type(object) == X509_LU_X509) {
      ++certificates;
      added = X509_STORE_add_cert(trusted, X509_OBJECT_get0_X509(object)) == 1;
    } else if (X509_OBJECT_get_type(object) == X509_LU_CRL) {
      added = X509_STORE_add_crl(trusted, X509_OBJECT_get0_X509_CRL(object)) == 1;
    }
    if (!added) {
      return certs::opensslFailure(named + ": cannot add it to the trust store");
    }
  }
  if (certificates == 0) {
    ERR_clear_error();
    return Err{named + ": holds no certificate"};
  }
  return Ok{};
}

}  // namespace

SslCtxPtr makeServerContext() {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx || !configureCommon(ctx.get()) ||
      SSL_CTX_set_cipher_list(ctx.get(), kServerTls12Ciphers) != 1 ||
      SSL_CTX_set_num_tickets(ctx.get(), 0) != 1) {
    ERR_clear_error();
    return nullptr;
  }
  // No resumption (see the header): no TLS 1.2 tickets, no TLS 1.3 tickets (num_tickets 0
  // above), and no server-side session cache.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET);
  // The suite is sluice's pick (kTls13Suites, kServerTls12Ciphers), but a client that puts
  // ChaCha20 first gets it.
  SSL_CTX_set_options(ctx.get(), SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // no client certificates
  SSL_CTX_set_alpn_select_cb(ctx.get(), selectAlpn, nullptr);
  return ctx;
}

Result<SslCtxPtr, std::string> makeUpstreamContext(const std::optional<std::string>& ca_file,
                                                   std::span<const std::string> extra_ca_files) {
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx || !configureCommon(ctx.get()) ||
      SSL_CTX_set_cipher_list(ctx.get(), kUpstreamTls12Ciphers) != 1) {
    return certs::opensslFailure("cannot create the upstream TLS context");
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (ca_file) {
    if (auto loaded = loadTrustFile(ctx.get(), "upstream.ca_file", *ca_file); !loaded) {
      return Err{std::move(loaded).error()};
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    return certs::opensslFailure("cannot use OpenSSL's default trust store");
  }
  for (const std::string& extra : extra_ca_files) {
    if (auto loaded = loadTrustFile(ctx.get(), "upstream.extra_ca_files", extra); !loaded) {
      return Err{std::move(loaded).error()};
    }
  }
  // Unusually, 0 means success here.
  if (SSL_CTX_set_alpn_protos(ctx.get(), kAlpnWire, sizeof kAlpnWire) != 0) {
    return certs::opensslFailure("cannot set the upstream ALPN list");
  }
  SSL_CTX_set_session_cache_mode(ctx.get(),
                                 SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  ERR_clear_error();  // loading a bundle may queue errors for entries it skipped
  return ctx;
}

}  // namespace sluice::proxy::tls
