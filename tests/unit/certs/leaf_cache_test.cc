#include "certs/leaf_cache.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certs/x509_util.h"
#include "tests/support/temp_dir.h"

namespace sluice::certs {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using std::chrono::system_clock;
using ::testing::HasSubstr;
using namespace std::string_view_literals;

// ---- fixtures --------------------------------------------------------------------------------

using test_support::TempDir;


CertificateAuthority createOrDie(const std::string& dir) {
  auto made = CertificateAuthority::create(dir, "leaf test CA");
  if (!made) {
    ADD_FAILURE() << made.error();
    std::abort();
  }
  return std::move(made).value();
}

// One sandbox CA for the whole file (creating one is the slow part of each test); its
// directory goes when the process exits.
const CertificateAuthority& sharedCa() {
  struct Shared {
    TempDir dir;
    CertificateAuthority ca = createOrDie(dir.path());
  };
  static const Shared shared;
  return shared.ca;
}

// A clock the test moves by hand, callable from any thread.
class FakeClock {
 public:
  FakeClock() : now_(system_clock::now().time_since_epoch().count()) {}
  system_clock::time_point now() const {
    return system_clock::time_point(system_clock::duration(now_.load()));
  }
  void set(system_clock::time_point t) { now_.store(t.time_since_epoch().count()); }
  void advance(system_clock::duration d) { set(now() + d); }
  LeafCache::Clock function() {
    return [this] { return now(); };
  }

 private:
  std::atomic<system_clock::rep> now_;
};

system_clock::time_point timeOf(const ASN1_TIME* t) {
  std::tm tm{};
  EXPECT_EQ(ASN1_TIME_to_tm(t, &tm), 1);
  return system_clock::from_time_t(::timegm(&tm));
}

system_clock::time_point wholeSeconds(system_clock::time_point t) {
  return std::chrono::floor<seconds>(t);
}

struct CaOptions {
  seconds not_before{-3600};
  seconds not_after{hours(24 * 365)};
  bool subject_key_id = true;
};

// A CA the way an operator might bring one (load() accepts P-384 and RSA >= 2048 too).
CertificateAuthority operatorCa(const TempDir& dir, EVP_PKEY* key, const CaOptions& options) {
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), X509_VERSION_3);
  EXPECT_TRUE(setRandomSerial(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(options.not_before.count()));
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(options.not_after.count()));
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("operator CA"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, const char*>> extensions = {
      {NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
      {NID_key_usage, "critical,keyCertSign,cRLSign"}};
  if (options.subject_key_id) {
    extensions.emplace_back(NID_subject_key_identifier, "hash");
  }
  for (auto [nid, value] : extensions) {
    X509ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    EXPECT_TRUE(ext);
    X509_add_ext(cert.get(), ext.get(), -1);
  }
  EXPECT_GT(X509_sign(cert.get(), key, EVP_sha256()), 0);

  BioPtr cert_pem(BIO_new_file(dir.file("ca.pem").c_str(), "w"));
  PEM_write_bio_X509(cert_pem.get(), cert.get());
  cert_pem.reset();
  BioPtr key_pem(BIO_new_file(dir.file("ca.key").c_str(), "w"));
  PEM_write_bio_PrivateKey(key_pem.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  key_pem.reset();
  EXPECT_EQ(::chmod(dir.file("ca.key").c_str(), 0600), 0);
  auto loaded = CertificateAuthority::load(dir.path());
  if (!loaded) {
    ADD_FAILURE() << loaded.error();
    std::abort();
  }
  return std::move(loaded).value();
}

EvpPkeyPtr newKey(const char* type, const char* curve_or_null, std::size_t bits = 0) {
  if (curve_or_null != nullptr) {
    return EvpPkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, type, curve_or_null));
  }
  return EvpPkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, type, bits));
}

// Verifies `leaf` the way a TLS client of the sandbox would: trusting only `ca`, for a TLS
// server, for `host` (a name or an IP literal), at `when`. Returns the X509_V_* result.
int verify(X509* ca, X509* leaf, std::string_view host,
           system_clock::time_point when = system_clock::now()) {
  X509StorePtr store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca);
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, system_clock::to_time_t(when));
  std::string text(host);
  if (certificateHostKind(host) == HostKind::DnsName) {
    X509_VERIFY_PARAM_set1_host(param, text.c_str(), text.size());
  } else {
    X509_VERIFY_PARAM_set1_ip_asc(param, text.c_str());
  }
  int ok = X509_verify_cert(ctx.get());
  int error = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return ok == 1 ? X509_V_OK : (error == X509_V_OK ? -1 : error);
}

std::string commonName(X509* cert) {
  X509_NAME* name = X509_get_subject_name(cert);
  int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) {
    return "";
  }
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     static_cast<std::size_t>(ASN1_STRING_length(data)));
}

struct San {
  int type;
  std::string value;  // DNS text, or the raw address octets
};

std::vector<San> subjectAltNames(X509* cert, int* critical = nullptr) {
  GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, critical, nullptr)));
  std::vector<San> out;
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    int type = 0;
    const auto* value = static_cast<const ASN1_STRING*>(GENERAL_NAME_get0_value(name, &type));
    out.push_back({type, std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                                     static_cast<std::size_t>(ASN1_STRING_length(value)))});
  }
  return out;
}

std::shared_ptr<const Leaf> getOrDie(LeafCache& cache, std::string_view host) {
  auto leaf = cache.get(host);
  if (!leaf) {
    ADD_FAILURE() << host << ": " << leaf.error();
    return nullptr;
  }
  return std::move(leaf).value();
}

// ---- what a leaf says ------------------------------------------------------------------------

TEST(LeafCache, MintedLeafVerifiesAgainstTheCaForItsHostOnly) {
  LeafCache cache(sharedCa());
  auto leaf = getOrDie(cache, "pkg.test");
  ASSERT_TRUE(leaf);
  X509* ca = sharedCa().certificate();
  EXPECT_EQ(verify(ca, leaf->certificate.get(), "pkg.test"), X509_V_OK);
  EXPECT_EQ(verify(ca, leaf->certificate.get(), "evil.test"), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(verify(ca, leaf->certificate.get(), "sub.pkg.test"), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(X509_verify(leaf->certificate.get(), X509_get0_pubkey(ca)), 1);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(LeafCache, SubjectCnAndDnsSanNameTheHost) {
  LeafCache cache(sharedCa());
  auto leaf = getOrDie(cache, "files.pythonhosted.org");
  ASSERT_TRUE(leaf);
  X509* cert = leaf->certificate.get();
  EXPECT_EQ(commonName(cert), "files.pythonhosted.org");
  EXPECT_EQ(X509_NAME_entry_count(X509_get_subject_name(cert)), 1);
  int critical = -1;
  auto sans = subjectAltNames(cert, &critical);
  ASSERT_EQ(sans.size(), 1u);
  EXPECT_EQ(sans[0].type, GEN_DNS);
  EXPECT_EQ(sans[0].value, "files.pythonhosted.org");
  EXPECT_EQ(critical, 0);
  EXPECT_EQ(
      X509_NAME_cmp(X509_get_issuer_name(cert), X509_get_subject_name(sharedCa().certificate())),
      0);
}

TEST(LeafCache, HostLongerThan64HasNoCnAndACriticalSan) {
  LeafCache cache(sharedCa());
  std::string host = std::string(60, 'a') + ".example.test";
  auto leaf = getOrDie(cache, host);
  ASSERT_TRUE(leaf);
  EXPECT_EQ(commonName(leaf->certificate.get()), "");
  EXPECT_EQ(X509_NAME_entry_count(X509_get_subject_name(leaf->certificate.get())), 0);
  int critical = -1;
  auto sans = subjectAltNames(leaf->certificate.get(), &critical);
  ASSERT_EQ(sans.size(), 1u);
  EXPECT_EQ(sans[0].value, host);
  EXPECT_EQ(critical, 1);  // RFC 5280 4.2.1.6: an empty subject makes the SAN critical
  EXPECT_EQ(verify(sharedCa().certificate(), leaf->certificate.get(), host), X509_V_OK);

  auto at_limit = getOrDie(cache, std::string(51, 'b') + ".example.test");  // 64 characters
  ASSERT_TRUE(at_limit);
  EXPECT_EQ(commonName(at_limit->certificate.get()).size(), 64u);
}

TEST(LeafCache, IpLiteralLeafHasOnlyAnIpSan) {
  LeafCache cache(sharedCa());
  const std::pair<std::string_view, std::string> cases[] = {
      {"192.0.2.1", std::string("\xc0\x00\x02\x01", 4)},
      {"2001:db8::1", std::string("\x20\x01\x0d\xb8"
                                  "\0\0\0\0"
                                  "\0\0\0\0"
                                  "\0\0\0\x01",
                                  16)},
  };
  for (const auto& [host, octets] : cases) {
    auto leaf = getOrDie(cache, host);
    ASSERT_TRUE(leaf);
    auto sans = subjectAltNames(leaf->certificate.get());
    ASSERT_EQ(sans.size(), 1u) << host;
    EXPECT_EQ(sans[0].type, GEN_IPADD) << host;
    EXPECT_EQ(sans[0].value, octets) << host;
    EXPECT_EQ(verify(sharedCa().certificate(), leaf->certificate.get(), host), X509_V_OK) << host;
  }
  auto leaf = getOrDie(cache, "192.0.2.1");
  EXPECT_EQ(verify(sharedCa().certificate(), leaf->certificate.get(), "192.0.2.2"),
            X509_V_ERR_IP_ADDRESS_MISMATCH);
}

TEST(LeafCache, ExtensionsMakeItAServerLeafThatIsNoCa) {
  LeafCache cache(sharedCa());
  auto leaf = getOrDie(cache, "pkg.test");
  ASSERT_TRUE(leaf);
  X509* cert = leaf->certificate.get();
  EXPECT_EQ(X509_get_version(cert), X509_VERSION_3);

  int critical = -1;
  BasicConstraintsPtr bc(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, &critical, nullptr)));
  ASSERT_TRUE(bc);
  EXPECT_EQ(critical, 1);
  EXPECT_EQ(bc->ca, 0);
  EXPECT_EQ(X509_check_ca(cert), 0);

  Asn1BitStringPtr ku(
      static_cast<ASN1_BIT_STRING*>(X509_get_ext_d2i(cert, NID_key_usage, &critical, nullptr)));
  ASSERT_TRUE(ku);
  EXPECT_EQ(critical, 1);
  EXPECT_EQ(X509_get_key_usage(cert), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));

  ExtendedKeyUsagePtr eku(static_cast<EXTENDED_KEY_USAGE*>(
      X509_get_ext_d2i(cert, NID_ext_key_usage, &critical, nullptr)));
  ASSERT_TRUE(eku);
  ASSERT_EQ(sk_ASN1_OBJECT_num(eku.get()), 1);
  EXPECT_EQ(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku.get(), 0)), NID_server_auth);

  const ASN1_OCTET_STRING* skid = X509_get0_subject_key_id(cert);
  ASSERT_NE(skid, nullptr);
  const ASN1_OCTET_STRING* akid = X509_get0_authority_key_id(cert);
  ASSERT_NE(akid, nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(akid, X509_get0_subject_key_id(sharedCa().certificate())), 0);
  EXPECT_EQ(X509_get0_authority_issuer(cert), nullptr);  // keyid only

  BignumPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
  ASSERT_TRUE(serial);
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_LE(BN_num_bits(serial.get()), kSerialBits);
  EXPECT_GT(BN_num_bits(serial.get()), 64);
  EXPECT_EQ(X509_get_signature_nid(cert), NID_ecdsa_with_SHA256);
}

TEST(LeafCache, EveryLeafUsesTheOneSharedP256Key) {
  LeafCache cache(sharedCa());
  ASSERT_NE(cache.key(), nullptr);
  EXPECT_TRUE(EVP_PKEY_is_a(cache.key(), "EC"));
  char group[64] = {};
  std::size_t len = 0;
  ASSERT_EQ(EVP_PKEY_get_utf8_string_param(cache.key(), OSSL_PKEY_PARAM_GROUP_NAME, group,
                                           sizeof group, &len),
            1);
  EXPECT_EQ(std::string_view(group, len), "prime256v1");
  auto a = getOrDie(cache, "a.test");
  auto b = getOrDie(cache, "b.test");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(a->certificate.get()), cache.key()), 1);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(b->certificate.get()), cache.key()), 1);
  EXPECT_EQ(X509_check_private_key(a->certificate.get(), cache.key()), 1);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a->certificate.get()),
                             X509_get0_serialNumber(b->certificate.get())),
            0);
  EXPECT_EQ(cache.caCertificate(), sharedCa().certificate());

  LeafCache other(sharedCa());  // another sandbox's cache: another key
  EXPECT_NE(EVP_PKEY_eq(other.key(), cache.key()), 1);
}

TEST(LeafCache, ValidFromAnHourAgoForTwentyFourHours) {
  // The CA first: its notBefore is an hour before its making, and a leaf's is clamped to it. A
  // clock read before a CA made in a later second would see its leaf start a second late.
  const CertificateAuthority& issuer = sharedCa();
  FakeClock clock;
  LeafCache cache(issuer, 16, clock.function());
  auto leaf = getOrDie(cache, "pkg.test");
  ASSERT_TRUE(leaf);
  auto now = wholeSeconds(clock.now());
  EXPECT_EQ(timeOf(X509_get0_notBefore(leaf->certificate.get())), now - hours(1));
  EXPECT_EQ(timeOf(X509_get0_notAfter(leaf->certificate.get())), now + hours(24));
  EXPECT_EQ(leaf->not_after, now + hours(24));
  // Inside the CA's validity.
  X509* ca = issuer.certificate();
  EXPECT_GE(timeOf(X509_get0_notBefore(leaf->certificate.get())), timeOf(X509_get0_notBefore(ca)));
  EXPECT_LE(leaf->not_after, timeOf(X509_get0_notAfter(ca)));
}

TEST(LeafCache, ValidityIsClampedToTheCas) {
  TempDir dir;
  EvpPkeyPtr key = newKey("EC", "P-256");
  // A CA issued ten minutes ago that expires in two hours.
  CertificateAuthority ca = operatorCa(dir, key.get(), {seconds(-600), seconds(7200), true});
  FakeClock clock;
  LeafCache cache(ca, 16, clock.function());
  auto leaf = getOrDie(cache, "pkg.test");
  ASSERT_TRUE(leaf);
  EXPECT_EQ(timeOf(X509_get0_notBefore(leaf->certificate.get())),
            timeOf(X509_get0_notBefore(ca.certificate())));
  EXPECT_EQ(timeOf(X509_get0_notAfter(leaf->certificate.get())),
            timeOf(X509_get0_notAfter(ca.certificate())));
  EXPECT_EQ(leaf->not_after, timeOf(X509_get0_notAfter(ca.certificate())));
  EXPECT_EQ(verify(ca.certificate(), leaf->certificate.get(), "pkg.test"), X509_V_OK);
}

TEST(LeafCache, RefusesToMintOutsideTheCasValidity) {
  FakeClock clock;
  LeafCache cache(sharedCa(), 16, clock.function());
  auto ca_not_after = timeOf(X509_get0_notAfter(sharedCa().certificate()));
  clock.set(ca_not_after + seconds(1));
  auto expired = cache.get("pkg.test");
  ASSERT_FALSE(expired);
  EXPECT_THAT(expired.error(), HasSubstr("expired"));

  clock.set(timeOf(X509_get0_notBefore(sharedCa().certificate())) - seconds(1));
  auto early = cache.get("pkg.test");
  ASSERT_FALSE(early);
  EXPECT_THAT(early.error(), HasSubstr("not valid before"));
  EXPECT_EQ(cache.stats().minted, 0u);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// ---- the cache -------------------------------------------------------------------------------

TEST(LeafCache, HitReturnsTheSameCertificateObject) {
  LeafCache cache(sharedCa());
  auto first = getOrDie(cache, "pkg.test");
  auto second = getOrDie(cache, "pkg.test");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(first->certificate.get(), second->certificate.get());
  LeafCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.minted, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 1u);
}

TEST(LeafCache, EvictsTheLeastRecentlyUsedBeyondCapacity) {
  LeafCache cache(sharedCa(), 2);
  auto a = getOrDie(cache, "a.test");
  auto b = getOrDie(cache, "b.test");
  EXPECT_EQ(getOrDie(cache, "a.test").get(), a.get());  // a is now the most recent
  auto c = getOrDie(cache, "c.test");                   // evicts b
  EXPECT_EQ(cache.stats().minted, 3u);
  EXPECT_EQ(getOrDie(cache, "a.test").get(), a.get());
  EXPECT_EQ(getOrDie(cache, "c.test").get(), c.get());
  EXPECT_EQ(cache.stats().minted, 3u);
  auto b_again = getOrDie(cache, "b.test");  // minted anew; evicts a
  EXPECT_NE(b_again.get(), b.get());
  EXPECT_EQ(cache.stats().minted, 4u);
  EXPECT_NE(getOrDie(cache, "a.test").get(), a.get());
  EXPECT_EQ(cache.stats().minted, 5u);
  // An evicted leaf stays valid for whoever still holds it.
  EXPECT_EQ(verify(sharedCa().certificate(), b->certificate.get(), "b.test"), X509_V_OK);
}

TEST(LeafCache, CapacityZeroStillCachesOne) {
  LeafCache cache(sharedCa(), 0);
  auto a = getOrDie(cache, "a.test");
  EXPECT_EQ(getOrDie(cache, "a.test").get(), a.get());
}

TEST(LeafCache, RemintsWhenLessThanAnHourRemains) {
  FakeClock clock;
  LeafCache cache(sharedCa(), 16, clock.function());
  auto first = getOrDie(cache, "pkg.test");
  clock.advance(hours(22));  // two hours left: still served
  EXPECT_EQ(getOrDie(cache, "pkg.test").get(), first.get());
  clock.advance(minutes(61));  // 59 minutes left: renewed
  auto renewed = getOrDie(cache, "pkg.test");
  ASSERT_TRUE(renewed);
  EXPECT_NE(renewed.get(), first.get());
  EXPECT_EQ(renewed->not_after, wholeSeconds(clock.now()) + hours(24));
  EXPECT_EQ(cache.stats().minted, 2u);
  EXPECT_EQ(getOrDie(cache, "pkg.test").get(), renewed.get());
}

TEST(LeafCache, DoesNotRemintWhenTheCasExpiryEndsTheLeaf) {
  TempDir dir;
  EvpPkeyPtr key = newKey("EC", "P-256");
  CertificateAuthority ca = operatorCa(dir, key.get(), {seconds(-600), seconds(1800), true});
  FakeClock clock;
  LeafCache cache(ca, 16, clock.function());
  auto first = getOrDie(cache, "pkg.test");  // 30 minutes left, and no leaf could have more
  EXPECT_EQ(getOrDie(cache, "pkg.test").get(), first.get());
  EXPECT_EQ(cache.stats().minted, 1u);
}

TEST(LeafCache, RefusesHostsThatAreNotCanonical) {
  LeafCache cache(sharedCa());
  for (std::string_view host :
       {"a\0b"sv, "*.x"sv, "a b"sv, ""sv, "pkg.test\0.evil.test"sv, "PKG.test"sv, "pkg.test."sv,
        "a..b"sv, "a_b.test"sv, "[::1]"sv, "010.0.0.1"sv, "2001:DB8::1"sv, "fe80::1%eth0"sv,
        "1.2.3"sv, "-a.test"sv}) {
    auto leaf = cache.get(host);
    ASSERT_FALSE(leaf) << host;
    EXPECT_THAT(leaf.error(), HasSubstr("not a canonical")) << host;
  }
  auto nul = cache.get("a\0b"sv);
  ASSERT_FALSE(nul);
  EXPECT_THAT(nul.error(), HasSubstr("a\\x00b"));  // escaped for the log, never raw
  EXPECT_EQ(cache.stats().minted, 0u);
  EXPECT_EQ(cache.stats().misses, 0u);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(LeafCache, OutlivesTheCaObjectItWasBuiltFrom) {
  std::unique_ptr<LeafCache> cache;
  X509Ptr ca_cert;
  {
    TempDir dir;
    auto ca = CertificateAuthority::create(dir.path(), "short-lived CA object");
    ASSERT_TRUE(ca) << ca.error();
    cache = std::make_unique<LeafCache>(*ca);
    X509_up_ref(ca->certificate());
    ca_cert.reset(ca->certificate());
  }
  auto leaf = getOrDie(*cache, "pkg.test");
  ASSERT_TRUE(leaf);
  EXPECT_EQ(verify(ca_cert.get(), leaf->certificate.get(), "pkg.test"), X509_V_OK);
}

// 8 threads x 1000 gets over 50 hosts. Single flight: each host is minted exactly once, even
// when several threads miss it at the same moment, and every thread sees the same object.
TEST(LeafCache, ConcurrentGetsMintEachHostOnce) {
  constexpr int kThreads = 8;
  constexpr int kGets = 1000;
  constexpr int kHosts = 50;
  LeafCache cache(sharedCa());
  std::vector<std::string> hosts;
  for (int i = 0; i < kHosts; ++i) {
    hosts.push_back("host" + std::to_string(i) + ".test");
  }
  std::vector<std::vector<const Leaf*>> seen(kThreads, std::vector<const Leaf*>(kHosts));
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) {
        std::this_thread::yield();
      }
      for (int i = 0; i < kGets; ++i) {
        int h = (i * 7 + t) % kHosts;  // threads start on different hosts, then overlap
        auto leaf = cache.get(hosts[static_cast<std::size_t>(h)]);
        if (!leaf) {
          failures.fetch_add(1);
          continue;
        }
        const Leaf*& slot = seen[static_cast<std::size_t>(t)][static_cast<std::size_t>(h)];
        if (slot != nullptr && slot != leaf->get()) {
          failures.fetch_add(1);
        }
        slot = leaf->get();
        if (ERR_peek_error() != 0) {
          failures.fetch_add(1);
        }
      }
    });
  }
  go.store(true);
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  LeafCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.minted, static_cast<std::uint64_t>(kHosts));
  EXPECT_EQ(stats.misses, static_cast<std::uint64_t>(kHosts));
  EXPECT_EQ(stats.hits + stats.misses, static_cast<std::uint64_t>(kThreads * kGets));
  for (int h = 0; h < kHosts; ++h) {
    for (int t = 1; t < kThreads; ++t) {
      EXPECT_EQ(seen[static_cast<std::size_t>(t)][static_cast<std::size_t>(h)],
                seen[0][static_cast<std::size_t>(h)]);
    }
  }
}

// ---- other CA key types ----------------------------------------------------------------------

TEST(LeafCache, WorksWithRsa2048AndP384Cas) {
  struct Case {
    const char* name;
    EvpPkeyPtr key;
    int signature_nid;
  };
  Case cases[] = {
      {"RSA-2048", newKey("RSA", nullptr, 2048), NID_sha256WithRSAEncryption},
      {"P-384", newKey("EC", "P-384"), NID_ecdsa_with_SHA384},
  };
  for (Case& c : cases) {
    ASSERT_TRUE(c.key) << c.name;
    for (bool with_ski : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + (with_ski ? " with SKI" : " without SKI"));
      TempDir dir;
      CertificateAuthority ca = operatorCa(dir, c.key.get(), {seconds(-3600), hours(48), with_ski});
      LeafCache cache(ca);
      auto leaf = getOrDie(cache, "pkg.test");
      ASSERT_TRUE(leaf);
      EXPECT_EQ(verify(ca.certificate(), leaf->certificate.get(), "pkg.test"), X509_V_OK);
      EXPECT_EQ(X509_get_signature_nid(leaf->certificate.get()), c.signature_nid);
      EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(leaf->certificate.get()), cache.key()), 1);
      const ASN1_OCTET_STRING* akid = X509_get0_authority_key_id(leaf->certificate.get());
      ASSERT_NE(akid, nullptr);
      if (with_ski) {
        EXPECT_EQ(ASN1_OCTET_STRING_cmp(akid, X509_get0_subject_key_id(ca.certificate())), 0);
      } else {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int md_len = 0;
        ASSERT_EQ(X509_pubkey_digest(ca.certificate(), EVP_sha1(), md, &md_len), 1);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(akid)),
                              static_cast<std::size_t>(ASN1_STRING_length(akid))),
                  std::string(reinterpret_cast<const char*>(md), md_len));
      }
    }
  }
  EXPECT_EQ(ERR_peek_error(), 0u);
}

}  // namespace
}  // namespace sluice::certs
