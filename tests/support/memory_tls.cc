#include "tests/support/memory_tls.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

namespace sluice::test_support {

namespace {

constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};

void onInfo(const SSL* ssl, int where, int ret) {
  if ((where & SSL_CB_READ_ALERT) == 0) {
    return;
  }
  auto* alert = static_cast<std::string*>(SSL_get_app_data(ssl));
  if (alert != nullptr && alert->empty()) {
    *alert = SSL_alert_desc_string_long(ret);
  }
}

}  // namespace

MemoryTls::MemoryTls(SSL_CTX* ctx, bool is_server)
    : ctx_(ctx), ssl_(SSL_new(ctx)), in_(BIO_new(BIO_s_mem())), out_(BIO_new(BIO_s_mem())) {
  BIO_set_mem_eof_return(in_, -1);  // no more input yet, not end of stream
  SSL_set_bio(ssl_, in_, out_);     // ssl_ owns both
  SSL_set_app_data(ssl_, &peer_alert_);
  SSL_set_info_callback(ssl_, &onInfo);
  if (is_server) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
  }
}

MemoryTls::~MemoryTls() {
  SSL_free(ssl_);
  SSL_CTX_free(ctx_);
}

std::unique_ptr<MemoryTls> MemoryTls::client(const std::string& ca_file, const std::string& host,
                                             Alpn alpn) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  if (alpn == Alpn::H2) {
    SSL_CTX_set_alpn_protos(ctx, kAlpnH2, sizeof kAlpnH2);
  } else {
    SSL_CTX_set_alpn_protos(ctx, kAlpnHttp11, sizeof kAlpnHttp11);
  }
  std::unique_ptr<MemoryTls> tls(new MemoryTls(ctx, false));
  if (!host.empty()) {
    SSL_set_tlsext_host_name(tls->ssl_, host.c_str());
    SSL_set1_host(tls->ssl_, host.c_str());
  }
  return tls;
}

std::unique_ptr<MemoryTls> MemoryTls::server(X509* certificate, EVP_PKEY* key) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate(ctx, certificate);
  SSL_CTX_use_PrivateKey(ctx, key);
  return std::unique_ptr<MemoryTls>(new MemoryTls(ctx, true));
}

std::string_view MemoryTls::selectedAlpn() const {
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &data, &length);
  return {reinterpret_cast<const char*>(data), length};
}

void MemoryTls::noteError(const char* where) {
  failed_ = true;
  char text[256];
  unsigned long code = ERR_get_error();
  ERR_error_string_n(code, text, sizeof text);
  error_ = std::string(where) + ": " + text;
  long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    error_ += std::string(" (verify: ") + X509_verify_cert_error_string(verify) + ")";
  }
  ERR_clear_error();
}

void MemoryTls::start() {
  std::string ignored;
  advance(ignored);
}

bool MemoryTls::feed(std::string_view ciphertext, std::string& plain) {
  if (!ciphertext.empty()) {
    BIO_write(in_, ciphertext.data(), static_cast<int>(ciphertext.size()));
  }
  advance(plain);
  return !failed_;
}

void MemoryTls::advance(std::string& plain) {
  if (failed_) {
    return;
  }
  if (!handshakeDone()) {
    int rc = SSL_do_handshake(ssl_);
    if (rc != 1) {
      int error = SSL_get_error(ssl_, rc);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        noteError("handshake");
      }
      return;
    }
  }
  if (!pending_.empty()) {
    std::string queued;
    queued.swap(pending_);
    write(queued);
  }
  char buffer[16384];
  for (;;) {
    int n = SSL_read(ssl_, buffer, sizeof buffer);
    if (n > 0) {
      plain.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_ZERO_RETURN) {
      close_notify_ = true;
    } else if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      noteError("read");
    }
    return;
  }
}

void MemoryTls::write(std::string_view plaintext) {
  if (failed_ || plaintext.empty()) {
    return;
  }
  if (!handshakeDone()) {
    pending_.append(plaintext);
    return;
  }
  if (SSL_write(ssl_, plaintext.data(), static_cast<int>(plaintext.size())) <= 0) {
    noteError("write");
  }
}

void MemoryTls::shutdown() { SSL_shutdown(ssl_); }

std::string MemoryTls::takeOutput() {
  std::string out;
  char buffer[16384];
  for (;;) {
    int n = BIO_read(out_, buffer, sizeof buffer);
    if (n <= 0) {
      return out;
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace sluice::test_support
