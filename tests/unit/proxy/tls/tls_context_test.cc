// The key exchanges sluice's two TLS contexts agree to. A finite-field group (ffdhe2048 up to
// ffdhe8192) costs the side that generates its key far more than an elliptic curve does, and a
// client chooses what it offers: so neither side of sluice offers or accepts one, and neither
// offers a TLS 1.2 suite whose key exchange is finite-field Diffie-Hellman (DHE-*). X25519,
// P-256 and P-384 only.
#include "proxy/tls/tls_context.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/obj_mac.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "certs/openssl_ptr.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy::tls {
namespace {

using test_support::TempDir;

using certs::SslPtr;

// A CA, a leaf for "pkg.test", and the CA's path for an upstream context to trust.
struct Pki {
  TempDir dir;
  certs::CertificateAuthority ca = create(dir.path());
  certs::LeafCache leaves{ca};
  std::shared_ptr<const certs::Leaf> leaf = leafOrDie();

  static certs::CertificateAuthority create(const std::string& path) {
    auto made = certs::CertificateAuthority::create(path, "tls context test CA");
    if (!made) {
      ADD_FAILURE() << made.error();
      std::abort();
    }
    return std::move(made).value();
  }
  std::shared_ptr<const certs::Leaf> leafOrDie() {
    auto got = leaves.get("pkg.test");
    if (!got) {
      ADD_FAILURE() << got.error();
      std::abort();
    }
    return std::move(got).value();
  }
};

Pki& pki() {
  static Pki* shared = new Pki();
  struct Free {
    ~Free() { delete shared; }
  };
  static Free free_at_exit;
  return *shared;
}

// One end of a handshake over memory BIOs.
SslPtr endOf(SSL_CTX* ctx, bool server) {
  SslPtr ssl(SSL_new(ctx));
  SSL_set_bio(ssl.get(), BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
  if (server) {
    SSL_use_certificate(ssl.get(), pki().leaf->certificate.get());
    SSL_use_PrivateKey(ssl.get(), pki().leaves.key());
    SSL_set_accept_state(ssl.get());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), "pkg.test");
    SSL_set1_host(ssl.get(), "pkg.test");
    SSL_set_connect_state(ssl.get());
  }
  return ssl;
}

bool move(SSL* from, SSL* to) {
  char buf[16384];
  bool moved = false;
  for (;;) {
    int n = BIO_read(SSL_get_wbio(from), buf, sizeof buf);
    if (n <= 0) {
      return moved;
    }
    BIO_write(SSL_get_rbio(to), buf, n);
    moved = true;
  }
}

// Runs both handshakes to their end; true when both completed. The group they agreed on
// (an NID) in `group`.
bool handshake(SSL* client, SSL* server, int* group = nullptr) {
  bool client_done = false;
  bool server_done = false;
  for (int round = 0; round < 20 && !(client_done && server_done); ++round) {
    if (!client_done) {
      int rc = SSL_do_handshake(client);
      if (rc == 1) {
        client_done = true;
      } else if (SSL_get_error(client, rc) != SSL_ERROR_WANT_READ) {
        break;
      }
    }
    bool moved = move(client, server);
    if (!server_done) {
      int rc = SSL_do_handshake(server);
      if (rc == 1) {
        server_done = true;
      } else if (SSL_get_error(server, rc) != SSL_ERROR_WANT_READ) {
        move(server, client);  // the alert
        SSL_do_handshake(client);
        break;
      }
    }
    moved = move(server, client) || moved;
    if (!moved && !client_done && !server_done) {
      break;
    }
  }
  if (group != nullptr) {
    *group = static_cast<int>(SSL_get_negotiated_group(client));
  }
  ERR_clear_error();
  return client_done && server_done;
}

// A plain OpenSSL context standing in for the other side, offering only `groups` (OpenSSL's
// names), between TLS `min_version` and `max_version`.
SslCtxPtr peer(bool server, const char* groups, int min_version = TLS1_2_VERSION,
               int max_version = TLS1_3_VERSION) {
  SslCtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  EXPECT_EQ(SSL_CTX_set1_groups_list(ctx.get(), groups), 1) << groups;
  SSL_CTX_set_min_proto_version(ctx.get(), min_version);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  // Every suite this OpenSSL has, DHE ones included: whatever sluice agrees to is sluice's
  // choice, not the peer's.
  EXPECT_EQ(SSL_CTX_set_cipher_list(ctx.get(), "ALL"), 1);
  return ctx;
}

SslCtxPtr upstreamContext() {
  auto ctx = makeUpstreamContext(pki().ca.certificatePath());
  if (!ctx) {
    ADD_FAILURE() << ctx.error();
    return nullptr;
  }
  return std::move(ctx).value();
}

struct GroupCase {
  const char* offered;  // OpenSSL's names, as -groups takes them
  int version;          // TLS1_2_VERSION or TLS1_3_VERSION
  bool agreed;
  int nid;  // the group agreed on, when agreed
};

const std::vector<GroupCase>& groupCases() {
  static const std::vector<GroupCase> cases = {
      {"X25519", TLS1_3_VERSION, true, NID_X25519},
      {"P-256", TLS1_3_VERSION, true, NID_X9_62_prime256v1},
      {"P-384", TLS1_3_VERSION, true, NID_secp384r1},
      // Over TLS 1.2 a client's groups also name the curves it accepts in the certificate:
      // the leaves are ECDSA P-256, so a TLS 1.2 sandbox lists P-256 too. Each side takes the
      // client's first shared group.
      {"X25519:P-256", TLS1_2_VERSION, true, NID_X25519},
      {"P-256", TLS1_2_VERSION, true, NID_X9_62_prime256v1},
      // The finite-field groups: refused, however small or large.
      {"ffdhe2048", TLS1_3_VERSION, false, 0},
      {"ffdhe8192", TLS1_3_VERSION, false, 0},
      {"ffdhe2048:ffdhe3072:ffdhe4096:ffdhe6144:ffdhe8192", TLS1_3_VERSION, false, 0},
      {"ffdhe8192", TLS1_2_VERSION, false, 0},  // and no DHE suite to fall back to
      // Curves beyond the three: refused too.
      {"P-521", TLS1_3_VERSION, false, 0},
      {"X448", TLS1_3_VERSION, false, 0},
      // Offered beside a finite-field group, a curve of the three is the one agreed on,
      // even when the client lists it last.
      {"ffdhe8192:P-384", TLS1_3_VERSION, true, NID_secp384r1},
  };
  return cases;
}

TEST(TlsContextGroups, TheSandboxSideAgreesOnlyToX25519P256AndP384) {
  SslCtxPtr server_ctx = makeServerContext();
  ASSERT_TRUE(server_ctx);
  for (const GroupCase& c : groupCases()) {
    SslCtxPtr client_ctx = peer(false, c.offered, c.version, c.version);
    SslPtr client = endOf(client_ctx.get(), false);
    SslPtr server = endOf(server_ctx.get(), true);
    int group = 0;
    bool done = handshake(client.get(), server.get(), &group);
    EXPECT_EQ(done, c.agreed) << c.offered << " over " << SSL_get_version(client.get());
    if (c.agreed && done) {
      EXPECT_EQ(group, c.nid) << c.offered;
    }
  }
}

TEST(TlsContextGroups, TheUpstreamSideAgreesOnlyToX25519P256AndP384) {
  SslCtxPtr client_ctx = upstreamContext();
  ASSERT_TRUE(client_ctx);
  for (const GroupCase& c : groupCases()) {
    SslCtxPtr server_ctx = peer(true, c.offered, c.version, c.version);
    SslPtr client = endOf(client_ctx.get(), false);
    SslPtr server = endOf(server_ctx.get(), true);
    int group = 0;
    bool done = handshake(client.get(), server.get(), &group);
    EXPECT_EQ(done, c.agreed) << c.offered << " over " << SSL_get_version(client.get());
    if (c.agreed && done) {
      EXPECT_EQ(group, c.nid) << c.offered;
    }
  }
}

// What sluice's upstream ClientHello offers, as an origin reads it.
struct Offered {
  std::vector<int> groups;      // supported_groups, in order (IANA code points)
  std::vector<int> key_shares;  // the groups of the key_share entries
  std::vector<std::uint16_t> suites;
};

int readHello(SSL* ssl, int* /*alert*/, void* arg) noexcept {
  auto* offered = static_cast<Offered*>(arg);
  const unsigned char* data = nullptr;
  std::size_t len = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_supported_groups, &data, &len) == 1 && len >= 2) {
    for (std::size_t i = 2; i + 1 < len; i += 2) {
      offered->groups.push_back(data[i] << 8 | data[i + 1]);
    }
  }
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_key_share, &data, &len) == 1 && len >= 2) {
    for (std::size_t i = 2; i + 3 < len;) {
      offered->key_shares.push_back(data[i] << 8 | data[i + 1]);
      i += 4 + (static_cast<std::size_t>(data[i + 2]) << 8 | data[i + 3]);
    }
  }
  const unsigned char* suites = nullptr;
  std::size_t suites_len = SSL_client_hello_get0_ciphers(ssl, &suites);
  for (std::size_t i = 0; i + 1 < suites_len; i += 2) {
    offered->suites.push_back(static_cast<std::uint16_t>(suites[i] << 8 | suites[i + 1]));
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

TEST(TlsContextGroups, TheUpstreamClientHelloOffersTheThreeCurvesAndNoDheSuite) {
  SslCtxPtr client_ctx = upstreamContext();
  ASSERT_TRUE(client_ctx);
  SslCtxPtr server_ctx = peer(true, "X25519");
  Offered offered;
  SSL_CTX_set_client_hello_cb(server_ctx.get(), readHello, &offered);
  SslPtr client = endOf(client_ctx.get(), false);
  SslPtr server = endOf(server_ctx.get(), true);
  ASSERT_TRUE(handshake(client.get(), server.get()));
  EXPECT_EQ(offered.groups, (std::vector<int>{0x001d, 0x0017, 0x0018}));  // x25519, P-256, P-384
  ASSERT_FALSE(offered.key_shares.empty());
  for (int share : offered.key_shares) {
    EXPECT_TRUE(share == 0x001d || share == 0x0017 || share == 0x0018) << share;
  }
  ASSERT_FALSE(offered.suites.empty());
  for (std::uint16_t id : offered.suites) {
    const unsigned char code[2] = {static_cast<unsigned char>(id >> 8),
                                   static_cast<unsigned char>(id & 0xff)};
    const SSL_CIPHER* suite = SSL_CIPHER_find(server.get(), code);
    if (suite == nullptr) {
      continue;  // a signalling value (TLS_EMPTY_RENEGOTIATION_INFO_SCSV)
    }
    int kx = SSL_CIPHER_get_kx_nid(suite);
    EXPECT_NE(kx, NID_kx_dhe) << SSL_CIPHER_get_name(suite);
    EXPECT_NE(kx, NID_kx_dhe_psk) << SSL_CIPHER_get_name(suite);
  }
}

// The TLS 1.2 suites a context would use: none whose key exchange is finite-field DH.
void expectNoDheSuite(SSL_CTX* ctx) {
  STACK_OF(SSL_CIPHER)* suites = SSL_CTX_get_ciphers(ctx);
  ASSERT_NE(suites, nullptr);
  ASSERT_GT(sk_SSL_CIPHER_num(suites), 0);
  for (int i = 0; i < sk_SSL_CIPHER_num(suites); ++i) {
    const SSL_CIPHER* suite = sk_SSL_CIPHER_value(suites, i);
    int kx = SSL_CIPHER_get_kx_nid(suite);
    EXPECT_NE(kx, NID_kx_dhe) << SSL_CIPHER_get_name(suite);
    EXPECT_NE(kx, NID_kx_dhe_psk) << SSL_CIPHER_get_name(suite);
  }
}

TEST(TlsContextGroups, NeitherSideHasADheSuite) {
  SslCtxPtr server_ctx = makeServerContext();
  ASSERT_TRUE(server_ctx);
  expectNoDheSuite(server_ctx.get());
  SslCtxPtr client_ctx = upstreamContext();
  ASSERT_TRUE(client_ctx);
  expectNoDheSuite(client_ctx.get());
}

TEST(TlsContextGroups, ASandboxOfferingOnlyDheSuitesOverTls12IsRefused) {
  SslCtxPtr server_ctx = makeServerContext();
  ASSERT_TRUE(server_ctx);
  SslCtxPtr client_ctx = peer(false, "ffdhe2048:X25519", TLS1_2_VERSION, TLS1_2_VERSION);
  ASSERT_EQ(SSL_CTX_set_cipher_list(client_ctx.get(), "kDHE"), 1);
  SslPtr client = endOf(client_ctx.get(), false);
  SslPtr server = endOf(server_ctx.get(), true);
  EXPECT_FALSE(handshake(client.get(), server.get()));
}

// The suite each side agrees on (docs/wire.md#tls-toward-the-sandbox): AES-128-GCM first,
// whatever order a sandbox lists the AES suites in, but ChaCha20 for a client that puts it first
// (no AES instructions); toward origins, AES-128-GCM offered first.
struct SuiteCase {
  const char* tls13;  // the peer's TLS 1.3 suites, in its order
  int version;
  const char* agreed;
};

TEST(TlsContextSuites, TheSandboxSidePicksAes128GcmUnlessTheClientPrefersChaCha20) {
  const SuiteCase cases[] = {
      {"TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256", TLS1_3_VERSION,
       "TLS_AES_128_GCM_SHA256"},  // OpenSSL's own client order
      {"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384", TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256"},
      {"TLS_AES_256_GCM_SHA384", TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384"},
      {"TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256", TLS1_3_VERSION,
       "TLS_CHACHA20_POLY1305_SHA256"},
      // TLS 1.2 (the peer offers every suite, AES-256 before AES-128 in OpenSSL's order).
      {"TLS_AES_256_GCM_SHA384", TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256"},
  };
  SslCtxPtr server_ctx = makeServerContext();
  ASSERT_TRUE(server_ctx);
  for (const SuiteCase& c : cases) {
    SslCtxPtr client_ctx = peer(false, "X25519:P-256", c.version, c.version);
    ASSERT_EQ(SSL_CTX_set_ciphersuites(client_ctx.get(), c.tls13), 1) << c.tls13;
    SslPtr client = endOf(client_ctx.get(), false);
    SslPtr server = endOf(server_ctx.get(), true);
    ASSERT_TRUE(handshake(client.get(), server.get())) << c.tls13;
    EXPECT_STREQ(SSL_CIPHER_get_name(SSL_get_current_cipher(client.get())), c.agreed)
        << c.tls13 << " over " << SSL_get_version(client.get());
  }
}

TEST(TlsContextSuites, TheUpstreamSideOffersAes128GcmFirst) {
  SslCtxPtr client_ctx = upstreamContext();
  ASSERT_TRUE(client_ctx);
  // An origin that follows the client's order (OpenSSL's default, and nginx's).
  SslCtxPtr server_ctx = peer(true, "X25519");
  SslPtr client = endOf(client_ctx.get(), false);
  SslPtr server = endOf(server_ctx.get(), true);
  ASSERT_TRUE(handshake(client.get(), server.get()));
  EXPECT_STREQ(SSL_CIPHER_get_name(SSL_get_current_cipher(client.get())), "TLS_AES_128_GCM_SHA256");
}

}  // namespace
}  // namespace sluice::proxy::tls
