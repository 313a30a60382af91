// CertificateAuthority::load() and loadOrCreate(): what an operator may bring, and what is refused.
#include "certs/ca.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/certs/ca_test_support.h"

namespace sluice::certs {
namespace {

using namespace ca_test;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---- load() ---------------------------------------------------------------------------------

TEST(CaLoad, RoundTripsCertificateAndKey) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_EQ(der(loaded->certificate()), der(created.certificate()));
  EXPECT_EQ(EVP_PKEY_eq(loaded->key(), created.key()), 1);
  EXPECT_EQ(loaded->certificatePath(), tmp.file("ca.pem"));
}

TEST(CaLoad, RefusesGroupReadableKey) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  ASSERT_EQ(::chmod(tmp.file("ca.key").c_str(), 0640), 0);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.key") + " is readable by others"));
  EXPECT_THAT(loaded.error(), HasSubstr("0640"));
  EXPECT_THAT(loaded.error(), HasSubstr("chmod 600"));
}

TEST(CaLoad, RefusesKeyWithAnyGroupOrOtherBit) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  for (mode_t mode : {0604, 0620, 0610, 0602, 0601, 0400 | 0040}) {
    ASSERT_EQ(::chmod(tmp.file("ca.key").c_str(), mode), 0);
    auto loaded = CertificateAuthority::load(tmp.path());
    EXPECT_FALSE(loaded) << std::oct << mode;
    if (!loaded) {
      EXPECT_THAT(loaded.error(), HasSubstr("chmod 600")) << std::oct << mode;
    }
  }
  ASSERT_EQ(::chmod(tmp.file("ca.key").c_str(), 0400), 0);  // owner-only but read-only: fine
  auto loaded = CertificateAuthority::load(tmp.path());
  EXPECT_TRUE(loaded) << loaded.error();
}

TEST(CaLoad, RefusesKeyOfAnotherCa) {
  TempDir tmp;
  TempDir other;
  auto mine = createOrDie(tmp.path());
  auto theirs = createOrDie(other.path());
  writeFile(tmp.file("ca.key"), readFile(other.file("ca.key")), 0600);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.key") + " is not the key of"));
  EXPECT_THAT(loaded.error(), HasSubstr("OpenSSL: error:"));
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

TEST(CaLoad, RefusesNonCaCertificate) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  X509Ptr cert = makeCert(key.get(), {.basic_constraints = "critical,CA:FALSE",
                                      .key_usage = "critical,digitalSignature"});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.pem") + ": not a CA certificate"));
}

TEST(CaLoad, RefusesCertificateWithoutBasicConstraints) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  // keyUsage alone makes X509_check_ca() answer 4, which verifiers do not take for a CA.
  X509Ptr cert = makeCert(key.get(), {.basic_constraints = nullptr});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("not a CA certificate"));
}

TEST(CaLoad, RefusesCaWithoutKeyCertSign) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  X509Ptr cert = makeCert(key.get(), {.key_usage = "critical,digitalSignature,cRLSign"});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("keyCertSign"));
}

TEST(CaLoad, AcceptsCaWithoutKeyUsageExtension) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  X509Ptr cert = makeCert(key.get(), {.key_usage = nullptr});  // RFC 5280: any usage
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  EXPECT_TRUE(loaded) << loaded.error();
}

TEST(CaLoad, RefusesExpiredCa) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  X509Ptr cert = makeCert(key.get(), {.not_before = -2 * 86400, .not_after = -60});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("expired"));
}

TEST(CaLoad, RefusesCaNotValidYet) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  X509Ptr cert = makeCert(key.get(), {.not_before = 86400, .not_after = 2 * 86400});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("not valid yet"));
}

TEST(CaLoad, RefusesGarbageCertificatePem) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  writeFile(tmp.file("ca.pem"), "-----BEGIN CERTIFICATE-----\nnot base64!\n", 0644);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.pem") + ": not a PEM certificate"));
  EXPECT_THAT(loaded.error(), HasSubstr("OpenSSL: error:"));
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

TEST(CaLoad, RefusesGarbageKeyPem) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  writeFile(tmp.file("ca.key"), "hello\n", 0600);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.key") + ": not a PEM private key"));
  EXPECT_THAT(loaded.error(), HasSubstr("OpenSSL: error:"));
}

TEST(CaLoad, RefusesEncryptedKeyWithoutPrompting) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("P-256");
  X509Ptr cert = makeCert(key.get(), {});
  writeFile(tmp.file("ca.pem"), pem(cert.get()), 0644);
  writeFile(tmp.file("ca.key"), pem(key.get(), EVP_aes_256_cbc()), 0600);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("encrypted"));
}

TEST(CaLoad, RefusesKeyThatIsNotARegularFile) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  ASSERT_EQ(::unlink(tmp.file("ca.key").c_str()), 0);
  ASSERT_EQ(::mkdir(tmp.file("ca.key").c_str(), 0700), 0);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("not a regular file"));
}

TEST(CaLoad, NamesTheMissingFile) {
  TempDir tmp;
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.key") + ": cannot open"));
  auto created = createOrDie(tmp.path());
  ASSERT_EQ(::unlink(tmp.file("ca.pem").c_str()), 0);
  loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr(tmp.file("ca.pem") + ": cannot open"));
}

TEST(CaLoad, RefusesEd25519Key) {
  TempDir tmp;
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  ASSERT_TRUE(key);
  X509Ptr cert = makeCert(key.get(), {});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("unsupported key type ED25519"));
}

TEST(CaLoad, RefusesEcKeyOnOtherCurve) {
  TempDir tmp;
  EvpPkeyPtr key = ecKey("secp256k1");
  ASSERT_TRUE(key);
  X509Ptr cert = makeCert(key.get(), {});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("curve secp256k1"));
}

TEST(CaLoad, RefusesRsaKeyShorterThan2048Bits) {
  TempDir tmp;
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(1024)));
  ASSERT_TRUE(key);
  X509Ptr cert = makeCert(key.get(), {});
  writeCa(tmp, cert.get(), key.get());
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_THAT(loaded.error(), HasSubstr("RSA key of 1024 bits"));
}

TEST(CaLoad, AcceptsOperatorCaOnP384AndRsa2048) {
  EvpPkeyPtr p384 = ecKey("P-384");
  EvpPkeyPtr rsa(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(2048)));
  for (EVP_PKEY* key : {p384.get(), rsa.get()}) {
    ASSERT_NE(key, nullptr);
    TempDir tmp;
    X509Ptr cert = makeCert(key, {});
    writeCa(tmp, cert.get(), key);
    auto loaded = CertificateAuthority::load(tmp.path());
    ASSERT_TRUE(loaded) << loaded.error();
    EXPECT_EQ(EVP_PKEY_eq(loaded->key(), key), 1);
  }
}

// ---- loadOrCreate() -------------------------------------------------------------------------

TEST(CaLoadOrCreate, CreatesThenLoadsTheSameCa) {
  TempDir tmp;
  std::string dir = tmp.file("agent-1");
  auto first = CertificateAuthority::loadOrCreate(dir, "test CA");
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(modeOf(dir), 0755u);
  auto second = CertificateAuthority::loadOrCreate(dir, "another name");
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(der(first->certificate()), der(second->certificate()));
  EXPECT_EQ(EVP_PKEY_eq(first->key(), second->key()), 1);
}

TEST(CaLoadOrCreate, RefusesCertWithoutKey) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  std::string cert = readFile(tmp.file("ca.pem"));
  ASSERT_EQ(::unlink(tmp.file("ca.key").c_str()), 0);
  auto ca = CertificateAuthority::loadOrCreate(tmp.path(), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr(tmp.file("ca.key") + " is missing"));
  EXPECT_FALSE(exists(tmp.file("ca.key")));
  EXPECT_EQ(readFile(tmp.file("ca.pem")), cert);
}

TEST(CaLoadOrCreate, RefusesKeyWithoutCert) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  std::string key = readFile(tmp.file("ca.key"));
  ASSERT_EQ(::unlink(tmp.file("ca.pem").c_str()), 0);
  auto ca = CertificateAuthority::loadOrCreate(tmp.path(), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr(tmp.file("ca.pem") + " is missing"));
  EXPECT_FALSE(exists(tmp.file("ca.pem")));
  EXPECT_EQ(readFile(tmp.file("ca.key")), key);
}

TEST(CaLoadOrCreate, PassesLoadErrorsThrough) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  ASSERT_EQ(::chmod(tmp.file("ca.key").c_str(), 0644), 0);
  auto ca = CertificateAuthority::loadOrCreate(tmp.path(), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr("chmod 600"));
}

}  // namespace
}  // namespace sluice::certs
