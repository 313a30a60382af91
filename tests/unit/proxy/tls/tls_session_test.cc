#include "proxy/tls/tls_session.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "proxy/tls/tls_context.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy::tls {
namespace {

using ::testing::HasSubstr;
using namespace std::string_view_literals;

// ---- fixtures --------------------------------------------------------------------------------

using test_support::TempDir;

certs::CertificateAuthority createOrDie(const std::string& dir) {
  auto made = certs::CertificateAuthority::create(dir, "tls test CA");
  if (!made) {
    ADD_FAILURE() << made.error();
    std::abort();
  }
  return std::move(made).value();
}

// A sandbox: its CA (in a temp dir), its leaf cache, and the two contexts. The client side
// plays the upstream role with the sandbox CA as its trust store, so one CA serves both ends.
struct Sandbox {
  TempDir dir;
  certs::CertificateAuthority ca = createOrDie(dir.path());
  certs::LeafCache leaves{ca};
  SslCtxPtr server_ctx = makeServerContext();
  SslCtxPtr client_ctx = clientContext(ca.certificatePath());

  static SslCtxPtr clientContext(const std::string& ca_file) {
    auto ctx = makeUpstreamContext(ca_file);
    if (!ctx) {
      ADD_FAILURE() << ctx.error();
      return nullptr;
    }
    return std::move(ctx).value();
  }

  std::shared_ptr<const certs::Leaf> leaf(std::string_view host) {
    auto got = leaves.get(host);
    if (!got) {
      ADD_FAILURE() << got.error();
      return nullptr;
    }
    return std::move(got).value();
  }

  TlsSession server(std::string_view leaf_host, SSL_CTX* ctx = nullptr) {
    auto l = leaf(leaf_host);
    auto session = TlsSession::server(ctx != nullptr ? ctx : server_ctx.get(), l->certificate.get(),
                                      leaves.key());
    if (!session) {
      ADD_FAILURE() << session.error();
      std::abort();
    }
    return std::move(session).value();
  }

  TlsSession client(std::string_view host, SSL_CTX* ctx = nullptr, SSL_SESSION* resume = nullptr) {
    auto session = TlsSession::client(ctx != nullptr ? ctx : client_ctx.get(), host, resume);
    if (!session) {
      ADD_FAILURE() << session.error();
      std::abort();
    }
    return std::move(session).value();
  }
};

Sandbox& sandbox() {
  static Sandbox* shared = new Sandbox();  // one CA and key for the file; freed at exit
  struct Free {
    ~Free() { delete shared; }
  };
  static Free free_at_exit;
  return *shared;
}

// Moves all pending ciphertext from one end to the other; true if anything moved.
bool transfer(TlsSession& from, TlsSession& to) {
  std::span<const char> bytes = from.peekCiphertext();
  if (bytes.empty()) {
    return false;
  }
  to.feed(bytes);
  from.consumeCiphertext(bytes.size());
  return true;
}

struct Outcome {
  HandshakeStatus client;
  HandshakeStatus server;
};

// Runs both handshakes by shuttling bytes until neither can progress.
Outcome handshake(TlsSession& client, TlsSession& server) {
  Outcome o{HandshakeStatus::WantIo, HandshakeStatus::WantIo};
  for (int round = 0; round < 20; ++round) {
    if (o.client == HandshakeStatus::WantIo) {
      o.client = client.handshake();
    }
    bool moved = transfer(client, server);
    if (o.server == HandshakeStatus::WantIo) {
      o.server = server.handshake();
    }
    moved = transfer(server, client) || moved;
    if (!moved && (o.client != HandshakeStatus::WantIo || o.server != HandshakeStatus::WantIo)) {
      // One side is finished or failed and nothing is in flight: let the other see the end.
      if (o.client == HandshakeStatus::WantIo) {
        o.client = client.handshake();
      }
      if (o.server == HandshakeStatus::WantIo) {
        o.server = server.handshake();
      }
      if (!transfer(client, server) && !transfer(server, client)) {
        break;
      }
    }
  }
  return o;
}

// Reads everything available (until WantIo / Closed / Failed) and returns it.
std::string readAll(TlsSession& session, ReadStatus* last = nullptr) {
  std::string text;
  char buf[4096];
  for (;;) {
    std::size_t n = 0;
    ReadStatus status = session.read(buf, &n);
    if (status != ReadStatus::Data) {
      if (last != nullptr) {
        *last = status;
      }
      return text;
    }
    text.append(buf, n);
  }
}

std::span<const char> bytesOf(std::string_view text) { return {text.data(), text.size()}; }

// ---- handshakes and data ---------------------------------------------------------------------

TEST(TlsSession, HandshakeCarriesSniAlpnAndDataBothWays) {
  Sandbox& sb = sandbox();
  TlsSession server = sb.server("pkg.test");
  TlsSession client = sb.client("pkg.test");
  Outcome o = handshake(client, server);
  ASSERT_EQ(o.client, HandshakeStatus::Done) << client.failure().detail;
  ASSERT_EQ(o.server, HandshakeStatus::Done) << server.failure().detail;
  EXPECT_TRUE(client.handshakeDone());
  EXPECT_EQ(server.servername(), "pkg.test");
  EXPECT_EQ(client.servername(), "pkg.test");
  EXPECT_EQ(server.alpn(), "http/1.1");
  EXPECT_EQ(client.alpn(), "http/1.1");
  EXPECT_EQ(server.protocolVersion(), "TLSv1.3");
  EXPECT_FALSE(client.sessionReused());

  ASSERT_TRUE(client.write(bytesOf("GET / HTTP/1.1\r\nHost: pkg.test\r\n\r\n")));
  transfer(client, server);
  EXPECT_EQ(readAll(server), "GET / HTTP/1.1\r\nHost: pkg.test\r\n\r\n");
  ASSERT_TRUE(server.write(bytesOf("HTTP/1.1 204 No Content\r\n\r\n")));
  transfer(server, client);
  ReadStatus last = ReadStatus::Data;
  EXPECT_EQ(readAll(client, &last), "HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_EQ(last, ReadStatus::WantIo);
  EXPECT_EQ(client.failure().kind, FailureKind::None);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, Tls12HandshakeWorksToo) {
  Sandbox& sb = sandbox();
  SslCtxPtr ctx = Sandbox::clientContext(sb.ca.certificatePath());
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_2_VERSION);
  TlsSession server = sb.server("pkg.test");
  TlsSession client = sb.client("pkg.test", ctx.get());
  Outcome o = handshake(client, server);
  ASSERT_EQ(o.client, HandshakeStatus::Done) << client.failure().detail;
  ASSERT_EQ(o.server, HandshakeStatus::Done) << server.failure().detail;
  EXPECT_EQ(server.protocolVersion(), "TLSv1.2");
  EXPECT_EQ(server.servername(), "pkg.test");
  EXPECT_EQ(client.alpn(), "http/1.1");
}

TEST(TlsSession, TenMebibytesIn16KiBPiecesBothWays) {
  Sandbox& sb = sandbox();
  TlsSession server = sb.server("pkg.test");
  TlsSession client = sb.client("pkg.test");
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);

  constexpr std::size_t kTotal = 10 * 1024 * 1024;
  constexpr std::size_t kPiece = 16 * 1024;
  std::vector<char> up(kTotal);
  std::vector<char> down(kTotal);
  for (std::size_t i = 0; i < kTotal; ++i) {
    up[i] = static_cast<char>((i * 31 + 7) % 251);
    down[i] = static_cast<char>((i * 17 + 3) % 241);
  }
  std::vector<char> got_up;
  std::vector<char> got_down;
  got_up.reserve(kTotal);
  got_down.reserve(kTotal);
  std::vector<char> buf(64 * 1024);
  auto drain = [&](TlsSession& reader, std::vector<char>& into) {
    for (;;) {
      std::size_t n = 0;
      ReadStatus status = reader.read(buf, &n);
      if (status != ReadStatus::Data) {
        EXPECT_EQ(status, ReadStatus::WantIo);
        return;
      }
      into.insert(into.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
  };
  for (std::size_t offset = 0; offset < kTotal; offset += kPiece) {
    ASSERT_TRUE(client.write(std::span<const char>(up).subspan(offset, kPiece)));
    ASSERT_TRUE(server.write(std::span<const char>(down).subspan(offset, kPiece)));
    if ((offset / kPiece) % 4 == 3) {  // let a few pieces queue up before they travel
      transfer(client, server);
      transfer(server, client);
      drain(server, got_up);
      drain(client, got_down);
    }
  }
  transfer(client, server);
  transfer(server, client);
  drain(server, got_up);
  drain(client, got_down);
  EXPECT_TRUE(got_up == up);
  EXPECT_TRUE(got_down == down);
  EXPECT_EQ(client.pendingCiphertext(), 0u);
  EXPECT_EQ(server.bufferedCiphertext(), 0u);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, HandshakeSurvivesOneByteFeedsAndMovesMidway) {
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test");
  HandshakeStatus cs = client.handshake();
  HandshakeStatus ss = HandshakeStatus::WantIo;
  std::optional<TlsSession> moved;
  for (int round = 0; round < 10 && (cs != HandshakeStatus::Done || ss != HandshakeStatus::Done);
       ++round) {
    TlsSession& s = moved ? *moved : server;
    std::vector<char> flight(client.peekCiphertext().begin(), client.peekCiphertext().end());
    client.consumeCiphertext(flight.size());
    for (char byte : flight) {
      s.feed(std::span<const char>(&byte, 1));
      ss = s.handshake();
      ASSERT_NE(ss, HandshakeStatus::Failed) << s.failure().detail;
    }
    if (!moved) {
      moved.emplace(std::move(server));  // the queues OpenSSL points at move with it
    }
    transfer(*moved, client);
    cs = client.handshake();
    ASSERT_NE(cs, HandshakeStatus::Failed) << client.failure().detail;
  }
  ASSERT_EQ(cs, HandshakeStatus::Done);
  ASSERT_EQ(ss, HandshakeStatus::Done);
  ASSERT_TRUE(client.write(bytesOf("after the move")));
  transfer(client, *moved);
  EXPECT_EQ(readAll(*moved), "after the move");
}

TEST(TlsSession, ReadFillsTheBufferAcrossRecordsAndKeepsTheRest) {
  Sandbox& sb = sandbox();
  TlsSession server = sb.server("pkg.test");
  TlsSession client = sb.client("pkg.test");
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
  ASSERT_TRUE(client.write(bytesOf("first ")));
  ASSERT_TRUE(client.write(bytesOf("second ")));
  ASSERT_TRUE(client.write(bytesOf("third")));
  transfer(client, server);
  char out[10];
  std::size_t n = 0;
  ASSERT_EQ(server.read(out, &n), ReadStatus::Data);
  EXPECT_EQ(std::string_view(out, n), "first seco");  // two records in one read
  EXPECT_EQ(readAll(server), "nd third");
}

// ---- ALPN and versions -----------------------------------------------------------------------

SslCtxPtr clientOffering(std::string_view wire_list) {
  SslCtxPtr ctx = Sandbox::clientContext(sandbox().ca.certificatePath());
  EXPECT_EQ(
      SSL_CTX_set_alpn_protos(ctx.get(), reinterpret_cast<const unsigned char*>(wire_list.data()),
                              static_cast<unsigned int>(wire_list.size())),
      0);
  return ctx;
}

// h2 is sluice's preference whatever the client's order: each stream is then decided on its own
// (docs/wire.md#http2). Before HTTP/2 this was "http/1.1, or nothing for an h2-only client".
TEST(TlsSession, AlpnPicksH2WhenOfferedInAnyOrder) {
  for (std::string_view offer :
       {"\x02h2\x08http/1.1"sv, "\x08http/1.1\x02h2"sv, "\x02h2"sv, "\x06spdy/3\x02h2"sv}) {
    SslCtxPtr ctx = clientOffering(offer);
    TlsSession server = sandbox().server("pkg.test");
    TlsSession client = sandbox().client("pkg.test", ctx.get());
    ASSERT_EQ(handshake(client, server).client, HandshakeStatus::Done) << client.failure().detail;
    EXPECT_EQ(server.alpn(), "h2");
    EXPECT_EQ(client.alpn(), "h2");
  }
}

TEST(TlsSession, AlpnPicksHttp11WhenH2IsNotOffered) {
  SslCtxPtr ctx = clientOffering("\x06spdy/3\x08http/1.1"sv);
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  ASSERT_EQ(handshake(client, server).client, HandshakeStatus::Done) << client.failure().detail;
  EXPECT_EQ(server.alpn(), "http/1.1");
  EXPECT_EQ(client.alpn(), "http/1.1");
}

// Near misses of the two names are other protocols: no ALPN, and HTTP/1.1 is parsed.
TEST(TlsSession, AlpnNearMissesOfH2GetNoProtocol) {
  SslCtxPtr ctx = clientOffering("\x03h2c\x02H2\x03h2 \x05h2-14"sv);
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  Outcome o = handshake(client, server);
  ASSERT_EQ(o.client, HandshakeStatus::Done) << client.failure().detail;
  ASSERT_EQ(o.server, HandshakeStatus::Done);
  EXPECT_EQ(server.alpn(), "");
  EXPECT_EQ(client.alpn(), "");
}

TEST(TlsSession, AlpnOfferingOtherProtocolsGetsNoProtocol) {
  SslCtxPtr ctx = clientOffering("\x08x-custom\x04imap\x06http/1"sv);
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
  EXPECT_EQ(server.alpn(), "");
}

TEST(TlsSession, RefusesAClientThatOffersAtMostTls10) {
  SslCtxPtr ctx = Sandbox::clientContext(sandbox().ca.certificatePath());
  SSL_CTX_set_security_level(ctx.get(), 0);  // TLS 1.0 needs SHA-1: level 0 only
  ASSERT_EQ(SSL_CTX_set_cipher_list(ctx.get(), "DEFAULT:@SECLEVEL=0"), 1);
  ASSERT_EQ(SSL_CTX_set_min_proto_version(ctx.get(), TLS1_VERSION), 1);
  ASSERT_EQ(SSL_CTX_set_max_proto_version(ctx.get(), TLS1_VERSION), 1);
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  Outcome o = handshake(client, server);
  EXPECT_EQ(o.server, HandshakeStatus::Failed);
  EXPECT_EQ(server.failure().kind, FailureKind::Protocol);
  EXPECT_THAT(server.failure().detail, HasSubstr("unsupported protocol"));
  EXPECT_EQ(o.client, HandshakeStatus::Failed);
  EXPECT_EQ(client.failure().kind, FailureKind::Alert);
  EXPECT_EQ(client.failure().alert, SSL_AD_PROTOCOL_VERSION);
  EXPECT_THAT(client.failure().detail, HasSubstr("protocol version"));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// ---- upstream verification -------------------------------------------------------------------

TEST(TlsSession, LeafForAnotherHostFailsWithHostnameMismatch) {
  TlsSession server = sandbox().server("other.test");
  TlsSession client = sandbox().client("pkg.test");
  Outcome o = handshake(client, server);
  ASSERT_EQ(o.client, HandshakeStatus::Failed);
  const Failure& failure = client.failure();
  EXPECT_EQ(failure.kind, FailureKind::Certificate);
  EXPECT_EQ(failure.verify_error, X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(failure.verify_depth, 0);
  EXPECT_THAT(failure.detail, HasSubstr("hostname mismatch"));
  EXPECT_THAT(failure.detail, HasSubstr("depth 0"));
  EXPECT_THAT(failure.detail, HasSubstr("pkg.test"));
  EXPECT_EQ(client.session(), nullptr);  // nothing to resume from a failed connection
  // The client told the server why, in an alert.
  EXPECT_EQ(o.server, HandshakeStatus::Failed);
  EXPECT_EQ(server.failure().kind, FailureKind::Alert);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, CaNotInTheTrustStoreFails) {
  TempDir other;
  certs::CertificateAuthority other_ca = createOrDie(other.path());
  SslCtxPtr ctx = Sandbox::clientContext(other_ca.certificatePath());
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  ASSERT_EQ(handshake(client, server).client, HandshakeStatus::Failed);
  EXPECT_EQ(client.failure().kind, FailureKind::Certificate);
  EXPECT_EQ(client.failure().verify_error, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_EQ(client.failure().verify_depth, 0);
  EXPECT_THAT(client.failure().detail, HasSubstr("unable to get local issuer certificate"));
}

// An expired leaf: the client verifies as of two days from now, when the 24-hour leaf has
// expired and the ten-year CA has not. (A CA created now cannot mint a leaf that is already
// expired: leaves never start before their CA.)
TEST(TlsSession, ExpiredLeafFails) {
  SslCtxPtr ctx = Sandbox::clientContext(sandbox().ca.certificatePath());
  auto later = std::chrono::system_clock::now() + std::chrono::hours(48);
  X509_VERIFY_PARAM_set_time(SSL_CTX_get0_param(ctx.get()),
                             std::chrono::system_clock::to_time_t(later));
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  ASSERT_EQ(handshake(client, server).client, HandshakeStatus::Failed);
  EXPECT_EQ(client.failure().kind, FailureKind::Certificate);
  EXPECT_EQ(client.failure().verify_error, X509_V_ERR_CERT_HAS_EXPIRED);
  EXPECT_EQ(client.failure().verify_depth, 0);
  EXPECT_THAT(client.failure().detail, HasSubstr("certificate has expired"));
}

TEST(TlsSession, VerifiesEvenWhenTheContextSaysNotTo) {
  SslCtxPtr ctx = Sandbox::clientContext(sandbox().ca.certificatePath());
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  TlsSession server = sandbox().server("other.test");
  TlsSession client = sandbox().client("pkg.test", ctx.get());
  ASSERT_EQ(handshake(client, server).client, HandshakeStatus::Failed);
  EXPECT_EQ(client.failure().kind, FailureKind::Certificate);
}

TEST(TlsSession, IpLiteralUpstreamIsVerifiedAgainstIpSanWithoutSni) {
  TlsSession server = sandbox().server("127.0.0.1");
  TlsSession client = sandbox().client("127.0.0.1");
  Outcome o = handshake(client, server);
  ASSERT_EQ(o.client, HandshakeStatus::Done) << client.failure().detail;
  ASSERT_EQ(o.server, HandshakeStatus::Done);
  EXPECT_EQ(server.servername(), "");  // RFC 6066: no IP literals in SNI
  EXPECT_EQ(client.servername(), "");

  TlsSession name_server = sandbox().server("pkg.test");
  TlsSession ip_client = sandbox().client("127.0.0.1");
  ASSERT_EQ(handshake(ip_client, name_server).client, HandshakeStatus::Failed);
  EXPECT_EQ(ip_client.failure().verify_error, X509_V_ERR_IP_ADDRESS_MISMATCH);
}

TEST(TlsSession, ClientRefusesHostsThatAreNotCanonical) {
  for (std::string_view host : {"pkg.test\0.evil.test"sv, "*.pkg.test"sv, "PKG.test"sv, ""sv,
                                "[::1]"sv, "pkg.test:443"sv}) {
    auto client = TlsSession::client(sandbox().client_ctx.get(), host);
    EXPECT_FALSE(client) << host;
  }
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, ServerRefusesAKeyThatIsNotTheLeafs) {
  TempDir other;
  certs::CertificateAuthority other_ca = createOrDie(other.path());
  certs::LeafCache other_leaves(other_ca);
  auto leaf = sandbox().leaf("pkg.test");
  auto session =
      TlsSession::server(sandbox().server_ctx.get(), leaf->certificate.get(), other_leaves.key());
  ASSERT_FALSE(session);
  EXPECT_THAT(session.error(), HasSubstr("leaf certificate and key"));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// ---- endings and garbage ---------------------------------------------------------------------

TEST(TlsSession, CloseNotifyReadsAsClosedAfterTheData) {
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test");
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
  ASSERT_TRUE(client.write(bytesOf("bye")));
  client.shutdown();
  client.shutdown();  // idempotent: one close_notify
  transfer(client, server);
  char buf[64];
  std::size_t n = 0;
  ASSERT_EQ(server.read(buf, &n), ReadStatus::Data);
  EXPECT_EQ(std::string_view(buf, n), "bye");
  EXPECT_EQ(server.read(buf, &n), ReadStatus::Closed);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(server.read(buf, &n), ReadStatus::Closed);
  server.shutdown();  // answering close_notify
  EXPECT_GT(server.pendingCiphertext(), 0u);
  transfer(server, client);
  EXPECT_EQ(client.read(buf, &n), ReadStatus::Closed);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, PlainHttpInsteadOfAClientHelloFails) {
  TlsSession server = sandbox().server("pkg.test");
  server.feed(bytesOf("GET / HTTP/1.1\r\nHost: pkg.test\r\n\r\n"));
  EXPECT_EQ(server.handshake(), HandshakeStatus::Failed);
  EXPECT_EQ(server.failure().kind, FailureKind::Protocol);
  EXPECT_FALSE(server.failure().detail.empty());
  EXPECT_EQ(server.handshake(), HandshakeStatus::Failed);  // stays failed
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, GarbageRecordAfterTheHandshakeFails) {
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test");
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
  // An application-data record whose ciphertext was not made with the session's keys.
  std::string record("\x17\x03\x03\x00\x20", 5);
  record.append(32, '\x5a');
  server.feed(bytesOf(record));
  char buf[64];
  std::size_t n = 0;
  EXPECT_EQ(server.read(buf, &n), ReadStatus::Failed);
  EXPECT_EQ(server.failure().kind, FailureKind::Protocol);
  EXPECT_THAT(server.failure().detail, HasSubstr("decrypt"));
  EXPECT_GT(server.pendingCiphertext(), 0u);  // the alert for the peer
  EXPECT_FALSE(server.write(bytesOf("too late")));
  EXPECT_EQ(server.read(buf, &n), ReadStatus::Failed);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, WriteBeforeTheHandshakeIsRefused) {
  TlsSession client = sandbox().client("pkg.test");
  EXPECT_FALSE(client.write(bytesOf("early")));
  EXPECT_EQ(client.failure().kind, FailureKind::Protocol);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// ---- ciphertext buffers ----------------------------------------------------------------------

TEST(TlsSession, CiphertextCanBeCopiedOrHandedOverWithoutCopy) {
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test");
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);

  ASSERT_TRUE(client.write(bytesOf("copied in small pieces")));
  std::size_t pending = client.pendingCiphertext();
  ASSERT_GT(pending, 0u);
  std::string wire;
  char piece[7];
  while (std::size_t n = client.takeCiphertext(piece)) {
    wire.append(piece, n);
  }
  EXPECT_EQ(wire.size(), pending);
  server.feed(bytesOf(wire));
  EXPECT_EQ(readAll(server), "copied in small pieces");

  std::vector<char> spare;
  spare.reserve(1 << 16);
  const char* spare_storage = spare.data();
  ASSERT_TRUE(client.write(bytesOf("handed over")));
  std::vector<char> handed = client.takeCiphertextBuffer(std::move(spare));
  EXPECT_EQ(client.pendingCiphertext(), 0u);
  ASSERT_TRUE(client.write(bytesOf(" and again")));
  EXPECT_EQ(client.peekCiphertext().data(), spare_storage);  // the spare is the queue now
  server.feed(handed);
  transfer(client, server);
  EXPECT_EQ(readAll(server), "handed over and again");
}

TEST(TlsSession, ReleaseBuffersWhenIdleThenCarryOn) {
  TlsSession server = sandbox().server("pkg.test");
  TlsSession client = sandbox().client("pkg.test");
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
  std::string big(256 * 1024, 'x');
  ASSERT_TRUE(client.write(bytesOf(big)));
  transfer(client, server);
  EXPECT_EQ(readAll(server).size(), big.size());
  client.releaseBuffers();
  server.releaseBuffers();
  ASSERT_TRUE(client.write(bytesOf("still here")));
  transfer(client, server);
  EXPECT_EQ(readAll(server), "still here");
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// ---- resumption ------------------------------------------------------------------------------

// A server that allows resumption, standing in for an upstream (sluice's own sandbox-facing
// context does not: see NoResumptionOnTheSandboxSide).
SslCtxPtr resumingServerContext() {
  SslCtxPtr ctx = makeServerContext();
  SSL_CTX_clear_options(ctx.get(), SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx.get(), 2);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_SERVER);
  const unsigned char id[] = "sluice-test";
  SSL_CTX_set_session_id_context(ctx.get(), id, sizeof id - 1);
  return ctx;
}

// Connects once, takes the session the way the session code must, and resumes with it.
void expectResumption(int max_version) {
  SslCtxPtr server_ctx = resumingServerContext();
  SslCtxPtr client_ctx = Sandbox::clientContext(sandbox().ca.certificatePath());
  SSL_CTX_set_max_proto_version(client_ctx.get(), max_version);

  TlsSession server = sandbox().server("pkg.test", server_ctx.get());
  TlsSession client = sandbox().client("pkg.test", client_ctx.get());
  ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
  if (max_version == TLS1_3_VERSION) {
    // TLS 1.3: the tickets come after the handshake; until read() has processed them there
    // is no resumable session.
    EXPECT_EQ(client.session(), nullptr);
  }
  transfer(server, client);
  char buf[16];
  std::size_t n = 0;
  EXPECT_EQ(client.read(buf, &n), ReadStatus::WantIo);  // consumes the tickets, no data
  SslSessionPtr saved = client.session();
  ASSERT_NE(saved, nullptr);

  TlsSession server2 = sandbox().server("pkg.test", server_ctx.get());
  TlsSession client2 = sandbox().client("pkg.test", client_ctx.get(), saved.get());
  Outcome o = handshake(client2, server2);
  ASSERT_EQ(o.client, HandshakeStatus::Done) << client2.failure().detail;
  ASSERT_EQ(o.server, HandshakeStatus::Done) << server2.failure().detail;
  EXPECT_TRUE(client2.sessionReused());
  EXPECT_TRUE(server2.sessionReused());
  ASSERT_TRUE(client2.write(bytesOf("resumed")));
  transfer(client2, server2);
  EXPECT_EQ(readAll(server2), "resumed");

  // The same session offered for another name is not used: full handshake, full checks.
  TlsSession server3 = sandbox().server("other.test", server_ctx.get());
  TlsSession client3 = sandbox().client("other.test", client_ctx.get(), saved.get());
  ASSERT_EQ(handshake(client3, server3).client, HandshakeStatus::Done);
  EXPECT_FALSE(client3.sessionReused());
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsSession, ResumesATls13Session) { expectResumption(TLS1_3_VERSION); }

TEST(TlsSession, ResumesATls12Session) { expectResumption(TLS1_2_VERSION); }

TEST(TlsSession, NoResumptionOnTheSandboxSide) {
  for (int version : {TLS1_3_VERSION, TLS1_2_VERSION}) {
    SslCtxPtr client_ctx = Sandbox::clientContext(sandbox().ca.certificatePath());
    SSL_CTX_set_max_proto_version(client_ctx.get(), version);
    TlsSession server = sandbox().server("pkg.test");
    TlsSession client = sandbox().client("pkg.test", client_ctx.get());
    ASSERT_EQ(handshake(client, server).server, HandshakeStatus::Done);
    char buf[16];
    std::size_t n = 0;
    EXPECT_EQ(client.read(buf, &n), ReadStatus::WantIo);
    EXPECT_EQ(client.session(), nullptr) << version;  // no ticket, no session id
  }
}

// ---- contexts --------------------------------------------------------------------------------

TEST(TlsContext, UpstreamCaFileMustExistAndHoldACertificate) {
  TempDir dir;
  auto missing = makeUpstreamContext(dir.file("missing.pem"));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("missing.pem"));
  EXPECT_THAT(missing.error(), HasSubstr("No such file"));

  auto directory = makeUpstreamContext(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.error(), HasSubstr("not a regular file"));

  dir.write("empty.pem", "");
  auto empty = makeUpstreamContext(dir.file("empty.pem"));
  ASSERT_FALSE(empty);
  EXPECT_THAT(empty.error(), HasSubstr("empty.pem"));

  dir.write("text.pem", "not a certificate\n");
  auto text = makeUpstreamContext(dir.file("text.pem"));
  ASSERT_FALSE(text);
  EXPECT_THAT(text.error(), HasSubstr("text.pem"));

  EXPECT_TRUE(makeUpstreamContext(sandbox().ca.certificatePath()));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

std::size_t trustedCertificates(SSL_CTX* ctx) {
  std::size_t n = 0;
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
  for (int i = 0; objects != nullptr && i < sk_X509_OBJECT_num(objects); ++i) {
    n += X509_OBJECT_get_type(sk_X509_OBJECT_value(objects, i)) == X509_LU_X509 ? 1 : 0;
  }
  return n;
}

// upstream.extra_ca_files add to the trust store (docs/configuration.md#upstream): the default
// one's certificates stay, the extra one joins them; each file is checked as ca_file is.
TEST(TlsContext, ExtraCaFilesAddToTheTrustStore) {
  auto plain = makeUpstreamContext(std::nullopt);
  ASSERT_TRUE(plain) << plain.error();
  const std::string extra = sandbox().ca.certificatePath();
  auto more = makeUpstreamContext(std::nullopt, std::vector<std::string>{extra});
  ASSERT_TRUE(more) << more.error();
  EXPECT_EQ(trustedCertificates(more->get()), trustedCertificates(plain->get()) + 1);
  EXPECT_GT(trustedCertificates(plain->get()), 0u) << "Debian's bundle, read by default";

  auto with_file = makeUpstreamContext(extra, std::vector<std::string>{extra});
  ASSERT_TRUE(with_file) << with_file.error();  // the same certificate twice is no error

  TempDir dir;
  dir.write("text.pem", "not a certificate\n");
  auto bad = makeUpstreamContext(std::nullopt, std::vector<std::string>{dir.file("text.pem")});
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error(), HasSubstr("upstream.extra_ca_files " + dir.file("text.pem")));
  auto missing =
      makeUpstreamContext(std::nullopt, std::vector<std::string>{dir.file("missing.pem")});
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("upstream.extra_ca_files " + dir.file("missing.pem") +
                                         ": No such file"));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(TlsContext, UpstreamWithoutCaFileUsesTheDefaultTrustStore) {
  auto ctx = makeUpstreamContext(std::nullopt);
  ASSERT_TRUE(ctx) << ctx.error();
  EXPECT_EQ(SSL_CTX_get_verify_mode(ctx->get()), SSL_VERIFY_PEER);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx->get()), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_session_cache_mode(ctx->get()) & SSL_SESS_CACHE_CLIENT,
            SSL_SESS_CACHE_CLIENT);
}

TEST(TlsContext, ServerContextSettings) {
  SslCtxPtr ctx = makeServerContext();
  ASSERT_TRUE(ctx);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx.get()), TLS1_2_VERSION);
  EXPECT_GE(SSL_CTX_get_security_level(ctx.get()), 2);
  EXPECT_NE(SSL_CTX_get_options(ctx.get()) & SSL_OP_NO_RENEGOTIATION, 0u);
  // Record buffers are released by the session once a connection idles (releaseBuffers()),
  // not by OpenSSL around every record, which cost a 16 KiB malloc and free per read.
  EXPECT_EQ(SSL_CTX_get_mode(ctx.get()) & SSL_MODE_RELEASE_BUFFERS, 0u);
  EXPECT_EQ(SSL_CTX_get_verify_mode(ctx.get()), SSL_VERIFY_NONE);
}

}  // namespace
}  // namespace sluice::proxy::tls
