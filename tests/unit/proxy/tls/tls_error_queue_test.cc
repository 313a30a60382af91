// A stale error on the thread's OpenSSL queue, left by other work on the worker's thread (a leaf
// minted, another connection's failure), never decides a session's read, write or handshake:
// SSL_get_error() would read it as this call's own and fail a healthy connection. Each case puts
// one there first, of a library and of the system, and sees the session carry on.
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "proxy/tls/tls_context.h"
#include "proxy/tls/tls_session.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy::tls {
namespace {

struct Pki {
  test_support::TempDir dir;
  certs::CertificateAuthority ca = [this] {
    auto made = certs::CertificateAuthority::create(dir.path(), "error queue test CA");
    if (!made) {
      ADD_FAILURE() << made.error();
      std::abort();
    }
    return std::move(made).value();
  }();
  certs::LeafCache leaves{ca};
  std::shared_ptr<const certs::Leaf> leaf = leaves.get("pkg.test").value();
  SslCtxPtr server_ctx = makeServerContext();
  SslCtxPtr client_ctx = makeUpstreamContext(ca.certificatePath()).value();
};

Pki& pki() {
  static Pki* shared = new Pki();  // freed at exit
  struct Free {
    ~Free() { delete shared; }
  };
  static Free free_at_exit;
  return *shared;
}

void staleErrors() {
  ERR_raise(ERR_LIB_X509, X509_R_CERT_ALREADY_IN_HASH_TABLE);
  ERR_raise(ERR_LIB_SYS, 0);
  ASSERT_NE(ERR_peek_error(), 0u);
}

bool transfer(TlsSession& from, TlsSession& to) {
  std::span<const char> bytes = from.peekCiphertext();
  if (bytes.empty()) {
    return false;
  }
  to.feed(bytes);
  from.consumeCiphertext(bytes.size());
  return true;
}

struct Pair {
  TlsSession server =
      TlsSession::server(pki().server_ctx.get(), pki().leaf->certificate.get(), pki().leaves.key())
          .value();
  TlsSession client = TlsSession::client(pki().client_ctx.get(), "pkg.test").value();

  // Both handshakes, with stale errors on the queue before every step.
  void handshake() {
    HandshakeStatus c = HandshakeStatus::WantIo;
    HandshakeStatus s = HandshakeStatus::WantIo;
    for (int round = 0; round < 20 && (c != HandshakeStatus::Done || s != HandshakeStatus::Done);
         ++round) {
      staleErrors();
      if (c == HandshakeStatus::WantIo) {
        c = client.handshake();
      }
      transfer(client, server);
      staleErrors();
      if (s == HandshakeStatus::WantIo) {
        s = server.handshake();
      }
      transfer(server, client);
    }
    ASSERT_EQ(c, HandshakeStatus::Done) << client.failure().detail;
    ASSERT_EQ(s, HandshakeStatus::Done) << server.failure().detail;
  }
};

std::span<const char> bytesOf(std::string_view text) { return {text.data(), text.size()}; }

TEST(TlsErrorQueue, AStaleErrorFailsNoHandshake) {
  Pair p;
  p.handshake();
  EXPECT_EQ(p.server.servername(), "pkg.test");
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsErrorQueue, AStaleErrorFailsNoWriteAndNoRead) {
  Pair p;
  p.handshake();
  staleErrors();
  ASSERT_TRUE(p.client.write(bytesOf("GET / HTTP/1.1\r\n\r\n"))) << p.client.failure().detail;
  transfer(p.client, p.server);
  char buf[256];
  std::size_t n = 0;
  staleErrors();
  ASSERT_EQ(p.server.read(buf, &n), ReadStatus::Data) << p.server.failure().detail;
  EXPECT_EQ(std::string_view(buf, n), "GET / HTTP/1.1\r\n\r\n");
  // Nothing more to read: SSL_read_ex fails with SSL_ERROR_WANT_READ, which a stale error on the
  // queue would have turned into SSL_ERROR_SSL, a failed session.
  staleErrors();
  EXPECT_EQ(p.server.read(buf, &n), ReadStatus::WantIo) << p.server.failure().detail;
  EXPECT_EQ(p.server.failure().kind, FailureKind::None);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// And the queue left empty by one call stays so for the next: an empty queue is not cleared,
// and the session still reports the errors that are its own.
TEST(TlsErrorQueue, ACallsOwnErrorIsStillReported) {
  Pair p;
  p.handshake();
  // An application-data record of 32 bytes that do not decrypt: bad_record_mac.
  const std::string forged = std::string("\x17\x03\x03\x00\x20", 5) + std::string(32, 'x');
  p.server.feed(bytesOf(forged));
  char buf[256];
  std::size_t n = 0;
  EXPECT_EQ(p.server.read(buf, &n), ReadStatus::Failed);
  EXPECT_EQ(p.server.failure().kind, FailureKind::Protocol) << p.server.failure().detail;
  EXPECT_EQ(ERR_peek_error(), 0u);  // drained into failure().detail
}

}  // namespace
}  // namespace sluice::proxy::tls
