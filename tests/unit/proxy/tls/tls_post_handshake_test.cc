// The bound on post-handshake messages (TlsSession::read): a peer may send 32 KeyUpdates plus
// one per MiB of data carried; one more fails the session, and nothing the peer sent after it is
// processed. The peer here is raw OpenSSL, which can send them.
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "certs/openssl_ptr.h"
#include "proxy/tls/tls_context.h"
#include "proxy/tls/tls_session.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy::tls {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kAllowance = TlsSession::kPostHandshakeAllowance;
// A TLS 1.3 KeyUpdate record: 5 bytes of header, 5 of message, 1 of content type, 16 of tag.
constexpr std::size_t kKeyUpdateRecord = 27;

using certs::SslPtr;

// The test's own CA, a leaf for pkg.test, and the contexts of both ends.
struct Pki {
  test_support::TempDir dir;
  certs::CertificateAuthority ca = [this] {
    auto made = certs::CertificateAuthority::create(dir.path(), "post-handshake test CA");
    if (!made) {
      ADD_FAILURE() << made.error();
      std::abort();
    }
    return std::move(made).value();
  }();
  certs::LeafCache leaves{ca};
  std::shared_ptr<const certs::Leaf> leaf = leaves.get("pkg.test").value();
  SslCtxPtr sluice_server = makeServerContext();
  SslCtxPtr sluice_client = makeUpstreamContext(ca.certificatePath()).value();
  SslCtxPtr raw_client{SSL_CTX_new(TLS_client_method())};
  SslCtxPtr raw_server{SSL_CTX_new(TLS_server_method())};
};

Pki& pki() {
  static Pki* shared = new Pki();  // freed at exit
  struct Free {
    ~Free() { delete shared; }
  };
  static Free free_at_exit;
  return *shared;
}

// Raw OpenSSL on two memory BIOs, speaking TLS 1.3 to a TlsSession.
class RawPeer {
 public:
  explicit RawPeer(bool server) {
    Pki& p = pki();
    ssl_.reset(SSL_new(server ? p.raw_server.get() : p.raw_client.get()));
    SSL_set_min_proto_version(ssl_.get(), TLS1_3_VERSION);
    SSL_set_bio(ssl_.get(), in_ = BIO_new(BIO_s_mem()), out_ = BIO_new(BIO_s_mem()));
    if (server) {
      SSL_use_cert_and_key(ssl_.get(), p.leaf->certificate.get(), p.leaves.key(), nullptr, 1);
      SSL_set_accept_state(ssl_.get());
    } else {
      SSL_set_tlsext_host_name(ssl_.get(), "pkg.test");
      SSL_set_connect_state(ssl_.get());
    }
  }

  // Shuttles bytes until both handshakes are done.
  void handshake(TlsSession& sluice) {
    for (int round = 0; round < 20; ++round) {
      int raw = SSL_do_handshake(ssl_.get());
      sendTo(sluice);
      HandshakeStatus status = sluice.handshake();
      takeFrom(sluice);
      if (raw == 1 && status == HandshakeStatus::Done) {
        SSL_do_handshake(ssl_.get());  // the client's Finished, seen by the raw server
        takeFrom(sluice);
        return;
      }
      ASSERT_NE(status, HandshakeStatus::Failed) << sluice.failure().detail;
    }
    FAIL() << "no handshake after 20 rounds";
  }

  // `n` KeyUpdates (each asking the peer to update too, when `requested`), sent to `sluice`.
  void keyUpdates(TlsSession& sluice, int n, bool requested = true) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(SSL_key_update(ssl_.get(), requested ? SSL_KEY_UPDATE_REQUESTED
                                                     : SSL_KEY_UPDATE_NOT_REQUESTED),
                1);
      ASSERT_EQ(SSL_do_handshake(ssl_.get()), 1);
    }
    sendTo(sluice);
  }

  // A server's `n` NewSessionTickets, sent to `sluice`.
  void tickets(TlsSession& sluice, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(SSL_new_session_ticket(ssl_.get()), 1);
      ASSERT_EQ(SSL_do_handshake(ssl_.get()), 1);
    }
    sendTo(sluice);
  }

  void write(TlsSession& sluice, std::string_view data) {
    std::size_t written = 0;
    ASSERT_EQ(SSL_write_ex(ssl_.get(), data.data(), data.size(), &written), 1);
    sendTo(sluice);
  }

  // Takes what `sluice` sent and reads it; false if OpenSSL found anything wrong with it.
  bool readAll(TlsSession& sluice) {
    takeFrom(sluice);
    char buf[16384];
    std::size_t n = 0;
    while (SSL_read_ex(ssl_.get(), buf, sizeof buf, &n) == 1) {
    }
    bool fine = SSL_get_error(ssl_.get(), 0) == SSL_ERROR_WANT_READ;
    ERR_clear_error();
    return fine;
  }

 private:
  void sendTo(TlsSession& sluice) {
    char buf[16384];
    int n = 0;
    while ((n = BIO_read(out_, buf, sizeof buf)) > 0) {
      sluice.feed(std::span<const char>(buf, static_cast<std::size_t>(n)));
    }
  }
  void takeFrom(TlsSession& sluice) {
    std::span<const char> bytes = sluice.peekCiphertext();
    if (!bytes.empty()) {
      BIO_write(in_, bytes.data(), static_cast<int>(bytes.size()));
      sluice.consumeCiphertext(bytes.size());
    }
  }

  SslPtr ssl_;
  BIO* in_ = nullptr;   // owned by ssl_
  BIO* out_ = nullptr;  // owned by ssl_
};

TlsSession sluiceServer() {
  Pki& p = pki();
  return TlsSession::server(p.sluice_server.get(), p.leaf->certificate.get(), p.leaves.key())
      .value();
}

// Reads until WantIo or an end; returns the last status and appends the data to `text`.
ReadStatus drain(TlsSession& sluice, std::string* text = nullptr) {
  char buf[16384];
  for (;;) {
    std::size_t n = 0;
    ReadStatus status = sluice.read(buf, &n);
    if (status != ReadStatus::Data) {
      return status;
    }
    if (text != nullptr) {
      text->append(buf, n);
    }
  }
}

TEST(TlsPostHandshake, ThirtyTwoKeyUpdatesAreAnsweredAndTheNextOneFails) {
  TlsSession sluice = sluiceServer();
  RawPeer client(false);
  client.handshake(sluice);
  client.keyUpdates(sluice, static_cast<int>(kAllowance));
  ASSERT_EQ(drain(sluice), ReadStatus::WantIo) << sluice.failure().detail;
  // Answered (OpenSSL may hold the last answer back until its next call), and the client
  // follows every one of them.
  EXPECT_GE(sluice.pendingCiphertext(), (kAllowance - 1) * kKeyUpdateRecord);
  EXPECT_TRUE(client.readAll(sluice));

  client.write(sluice, "GET / HTTP/1.1\r\n");  // data still flows both ways
  std::string text;
  EXPECT_EQ(drain(sluice, &text), ReadStatus::WantIo);
  EXPECT_EQ(text, "GET / HTTP/1.1\r\n");

  client.keyUpdates(sluice, 1);
  EXPECT_EQ(drain(sluice), ReadStatus::Failed);
  EXPECT_EQ(sluice.failure().kind, FailureKind::Protocol);
  EXPECT_THAT(sluice.failure().detail, HasSubstr("post-handshake messages"));
  EXPECT_EQ(drain(sluice), ReadStatus::Failed);  // final
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsPostHandshake, NothingAfterTheMessageOverTheLimitIsProcessed) {
  // A flood in one read: OpenSSL stops at the first message over the limit instead of deriving
  // keys for, and answering, every one of them.
  TlsSession sluice = sluiceServer();
  RawPeer client(false);
  client.handshake(sluice);
  client.keyUpdates(sluice, 1000);
  EXPECT_EQ(drain(sluice), ReadStatus::Failed);
  EXPECT_LE(sluice.pendingCiphertext(), (kAllowance + 1) * kKeyUpdateRecord);
  EXPECT_EQ(sluice.bufferedCiphertext(), 0u);
  client.keyUpdates(sluice, 1000);  // what comes after the end is dropped, not queued
  EXPECT_EQ(sluice.bufferedCiphertext(), 0u);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsPostHandshake, EachMebibyteOfDataEarnsOneMore) {
  TlsSession sluice = sluiceServer();
  RawPeer client(false);
  client.handshake(sluice);
  std::string mebibyte(TlsSession::kDataPerPostHandshakeMessage, 'x');
  ASSERT_TRUE(sluice.write(std::span<const char>(mebibyte.data(), mebibyte.size())));
  EXPECT_TRUE(client.readAll(sluice));
  client.keyUpdates(sluice, static_cast<int>(kAllowance) + 1, false);
  EXPECT_EQ(drain(sluice), ReadStatus::WantIo) << sluice.failure().detail;
  client.keyUpdates(sluice, 1, false);
  EXPECT_EQ(drain(sluice), ReadStatus::Failed);
}

TEST(TlsPostHandshake, AnUpstreamFloodingKeyUpdatesFailsToo) {
  Pki& p = pki();
  TlsSession sluice = TlsSession::client(p.sluice_client.get(), "pkg.test").value();
  RawPeer origin(true);
  origin.handshake(sluice);
  origin.keyUpdates(sluice, static_cast<int>(kAllowance));
  EXPECT_EQ(drain(sluice), ReadStatus::WantIo) << sluice.failure().detail;
  origin.keyUpdates(sluice, 1);
  EXPECT_EQ(drain(sluice), ReadStatus::Failed);
  EXPECT_THAT(sluice.failure().detail, HasSubstr("post-handshake messages"));
}

TEST(TlsPostHandshake, SessionTicketsAreNotCounted) {
  // A server may send tickets when it likes (some send one with every response).
  Pki& p = pki();
  TlsSession sluice = TlsSession::client(p.sluice_client.get(), "pkg.test").value();
  RawPeer origin(true);
  origin.handshake(sluice);
  origin.tickets(sluice, static_cast<int>(kAllowance) * 2);
  EXPECT_EQ(drain(sluice), ReadStatus::WantIo) << sluice.failure().detail;
  origin.keyUpdates(sluice, static_cast<int>(kAllowance));
  EXPECT_EQ(drain(sluice), ReadStatus::WantIo) << sluice.failure().detail;
}

}  // namespace
}  // namespace sluice::proxy::tls
