#pragma once
// What the tests of the ClientHello reader share: hellos built field by field (so that each can
// be broken in one place), genuine ones from an OpenSSL client, and OpenSSL 3.0 as the server
// that later reads the same bytes, whose verdict the reader must agree with.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "certs/openssl_ptr.h"
#include "proxy/tls/client_hello.h"

namespace sluice::proxy::tls::client_hello_test {

using Bytes = std::vector<std::uint8_t>;

inline Bytes bytesOf(std::string_view s) { return Bytes(s.begin(), s.end()); }

inline HelloResult parse(const Bytes& b, std::size_t n) {
  return parseClientHello(std::span<const std::uint8_t>(b.data(), n));
}
inline HelloResult parse(const Bytes& b) { return parse(b, b.size()); }

// ---------------------------------------------------------------------------------------------
// A ClientHello builder that remembers where its length fields are, so tests can break them.

struct LengthField {
  std::size_t offset = 0;
  std::size_t width = 0;
};

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) {
    u8(static_cast<std::uint8_t>(v >> 8));
    u8(static_cast<std::uint8_t>(v));
  }
  void append(const Bytes& b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void append(const Bytes& b, const std::vector<LengthField>& inner) {
    for (const LengthField& f : inner) {
      lengths_.push_back({out_.size() + f.offset, f.width});
    }
    append(b);
  }
  void open(std::size_t width) {
    open_.push_back({out_.size(), width});
    out_.resize(out_.size() + width);
  }
  void close() {
    const LengthField f = open_.back();
    open_.pop_back();
    const std::size_t n = out_.size() - f.offset - f.width;
    for (std::size_t i = 0; i < f.width; ++i) {
      out_[f.offset + i] = static_cast<std::uint8_t>(n >> (8 * (f.width - 1 - i)));
    }
    lengths_.push_back(f);
  }
  void block(std::size_t width, const Bytes& b) {
    open(width);
    append(b);
    close();
  }
  Bytes& out() { return out_; }
  std::vector<LengthField>& lengths() { return lengths_; }

 private:
  Bytes out_;
  std::vector<LengthField> lengths_;
  std::vector<LengthField> open_;
};

struct Ext {
  std::uint16_t type = 0;
  Bytes body;
  std::vector<LengthField> lengths;  // inside body
};

inline Ext serverNameExt(const std::vector<std::pair<std::uint8_t, std::string>>& names) {
  Writer w;
  w.open(2);
  for (const auto& [type, name] : names) {
    w.u8(type);
    w.block(2, bytesOf(name));
  }
  w.close();
  return {0, w.out(), w.lengths()};
}
inline Ext serverNameExt(std::string_view host) { return serverNameExt({{0, std::string(host)}}); }

inline Ext alpnExt(const std::vector<std::string>& protocols) {
  Writer w;
  w.open(2);
  for (const std::string& p : protocols) {
    w.block(1, bytesOf(p));
  }
  w.close();
  return {16, w.out(), w.lengths()};
}

inline Ext versionsExt(const std::vector<std::uint16_t>& versions) {
  Writer w;
  w.open(1);
  for (std::uint16_t v : versions) {
    w.u16(v);
  }
  w.close();
  return {43, w.out(), w.lengths()};
}

struct HelloSpec {
  std::uint16_t version = 0x0303;
  Bytes random = Bytes(32, 0xaa);
  Bytes session_id = Bytes(32, 0xbb);
  Bytes cipher_suites = {0x13, 0x01, 0x13, 0x02, 0xc0, 0x2b, 0xc0, 0x2f};
  Bytes compressions = {0};
  bool has_extensions = true;
  std::vector<Ext> extensions = {serverNameExt("allowed.test"), alpnExt({"h2", "http/1.1"}),
                                 versionsExt({0x0304, 0x0303})};
  Bytes trailing;  // inside the message, after the extensions

  HelloSpec& set(Ext e) {
    for (Ext& have : extensions) {
      if (have.type == e.type) {
        have = std::move(e);
        return *this;
      }
    }
    extensions.push_back(std::move(e));
    return *this;
  }
  HelloSpec& add(Ext e) {
    extensions.push_back(std::move(e));
    return *this;
  }
  HelloSpec& remove(std::uint16_t type) {
    std::erase_if(extensions, [type](const Ext& e) { return e.type == type; });
    return *this;
  }
};

struct Built {
  Bytes message;                     // the handshake message, header included
  std::vector<LengthField> lengths;  // every length field but the handshake header's
};

inline Built build(const HelloSpec& s) {
  Writer w;
  w.u8(1);
  w.open(3);
  w.u16(s.version);
  w.append(s.random);
  w.block(1, s.session_id);
  w.block(2, s.cipher_suites);
  w.block(1, s.compressions);
  if (s.has_extensions) {
    w.open(2);
    for (const Ext& e : s.extensions) {
      w.u16(e.type);
      w.open(2);
      w.append(e.body, e.lengths);
      w.close();
    }
    w.close();
  }
  w.append(s.trailing);
  w.close();
  w.lengths().pop_back();  // the handshake header: framing, tested on its own
  return {w.out(), w.lengths()};
}

// Frames a handshake message as records of at most `fragment` bytes.
inline Bytes records(const Bytes& message, std::size_t fragment = 16384, std::uint8_t minor = 1) {
  Bytes out;
  for (std::size_t at = 0; at < message.size(); at += fragment) {
    const std::size_t n = std::min(fragment, message.size() - at);
    out.insert(out.end(),
               {22, 3, minor, static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)});
    out.insert(out.end(), message.begin() + static_cast<std::ptrdiff_t>(at),
               message.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  return out;
}

inline Bytes wire(const HelloSpec& s) { return records(build(s).message); }

// The handshake bytes carried by well-formed records (the test trusts its own inputs).
inline Bytes payloadOf(const Bytes& w) {
  Bytes m;
  for (std::size_t at = 0; at + 5 <= w.size();) {
    const std::size_t n = static_cast<std::size_t>(w[at + 3] << 8 | w[at + 4]);
    m.insert(m.end(), w.begin() + static_cast<std::ptrdiff_t>(at + 5),
             w.begin() + static_cast<std::ptrdiff_t>(at + 5 + n));
    at += 5 + n;
  }
  return m;
}

// A genuine hello taken apart, so tests can change one extension and keep the rest real.
inline HelloSpec specOf(const Bytes& genuine) {
  const Bytes m = payloadOf(genuine);
  std::size_t p = 4;
  auto take = [&](std::size_t n) {
    Bytes b(m.begin() + static_cast<std::ptrdiff_t>(p),
            m.begin() + static_cast<std::ptrdiff_t>(p + n));
    p += n;
    return b;
  };
  auto len = [&](std::size_t width) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < width; ++i) {
      n = n << 8 | m[p++];
    }
    return n;
  };
  HelloSpec s;
  s.version = static_cast<std::uint16_t>(len(2));
  s.random = take(32);
  s.session_id = take(len(1));
  s.cipher_suites = take(len(2));
  s.compressions = take(len(1));
  s.extensions.clear();
  const std::size_t end = p + len(2);
  while (p < end) {
    const auto type = static_cast<std::uint16_t>(len(2));
    s.extensions.push_back({type, take(len(2)), {}});
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// OpenSSL on both ends, on memory BIOs.

using certs::SslCtxPtr;
using certs::SslPtr;

inline Bytes drain(BIO* b) {
  Bytes out(BIO_ctrl_pending(b));
  if (!out.empty() && BIO_read(b, out.data(), static_cast<int>(out.size())) <= 0) {
    out.clear();
  }
  return out;
}

struct ClientOptions {
  const char* sni = nullptr;
  int max_version = TLS1_3_VERSION;
  Bytes alpn;  // wire format
};

// The first flight of an OpenSSL client: a genuine ClientHello in one record.
inline Bytes genuineHello(const ClientOptions& o) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  EXPECT_EQ(SSL_CTX_set_max_proto_version(ctx.get(), o.max_version), 1);
  SslPtr ssl(SSL_new(ctx.get()));
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), BIO_new(BIO_s_mem()), out);
  if (o.sni != nullptr) {
    EXPECT_EQ(SSL_set_tlsext_host_name(ssl.get(), o.sni), 1);
  }
  if (!o.alpn.empty()) {
    EXPECT_EQ(SSL_set_alpn_protos(ssl.get(), o.alpn.data(), static_cast<unsigned>(o.alpn.size())),
              0);
  }
  const int rc = SSL_connect(ssl.get());
  EXPECT_EQ(SSL_get_error(ssl.get(), rc), SSL_ERROR_WANT_READ);
  return drain(out);
}

inline const Bytes kAlpnBoth = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

inline Bytes genuine13() { return genuineHello({"allowed.test", TLS1_3_VERSION, kAlpnBoth}); }

// What OpenSSL 3.0, as the server sluice runs, makes of a hello.
struct ServerVerdict {
  bool accepted = false;                  // it answered with a ServerHello
  std::optional<std::string> servername;  // SSL_get_servername() in the servername callback
  int alert = -1;                         // the fatal alert it sent instead
  std::string error_func;                 // the OpenSSL function that refused it
};

class OpenSslServer {
 public:
  static OpenSslServer& instance() {
    static OpenSslServer server;
    return server;
  }

  ServerVerdict read(const Bytes& w) {
    ERR_clear_error();
    ServerVerdict v;
    SslPtr ssl(SSL_new(ctx_.get()));
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    BIO_write(in, w.data(), static_cast<int>(w.size()));
    BIO_set_mem_eof_return(in, -1);  // no more bytes: "want read", not EOF
    SSL_set_bio(ssl.get(), in, out);
    SSL_set_app_data(ssl.get(), &v);
    (void)SSL_accept(ssl.get());
    const Bytes sent = drain(out);
    v.accepted = sent.size() >= 6 && sent[0] == 22 && sent[5] == 2;
    if (sent.size() >= 7 && sent[0] == 21) {
      v.alert = sent[6];
    }
    const char* func = nullptr;
    if (ERR_peek_error_all(nullptr, nullptr, &func, nullptr, nullptr) != 0 && func != nullptr) {
      v.error_func = func;
    }
    ERR_clear_error();
    return v;
  }

 private:
  OpenSslServer() : ctx_(SSL_CTX_new(TLS_server_method())) {
    // A throwaway self-signed EC certificate: enough for OpenSSL to answer any hello.
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    X509_set_version(cert, X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("allowed.test"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_set_pubkey(cert, key);
    EXPECT_GT(X509_sign(cert, key, EVP_sha256()), 0);
    EXPECT_EQ(SSL_CTX_use_certificate(ctx_.get(), cert), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx_.get(), key), 1);
    X509_free(cert);
    EVP_PKEY_free(key);
    SSL_CTX_set_tlsext_servername_callback(ctx_.get(), &OpenSslServer::onServerName);
  }

  static int onServerName(SSL* ssl, int* /*alert*/, void* /*arg*/) {
    auto* v = static_cast<ServerVerdict*>(SSL_get_app_data(ssl));
    if (const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)) {
      v->servername = name;
    }
    return SSL_TLSEXT_ERR_OK;
  }

  SslCtxPtr ctx_;
};

}  // namespace sluice::proxy::tls::client_hello_test
