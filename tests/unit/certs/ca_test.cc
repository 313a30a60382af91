#include "certs/ca.h"
#include "tests/support/temp_dir.h"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
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

namespace sluice::certs {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using test_support::readFile;
using test_support::TempDir;


bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

unsigned modeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void writeFile(const std::string& path, const std::string& content, mode_t mode) {
  test_support::writeFile(path, content);
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

std::vector<unsigned char> der(X509* cert) {
  int len = i2d_X509(cert, nullptr);
  EXPECT_GT(len, 0);
  std::vector<unsigned char> out(static_cast<std::size_t>(len));
  unsigned char* p = out.data();
  i2d_X509(cert, &p);
  return out;
}

X509Ptr readCert(const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

std::string pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

std::string pem(EVP_PKEY* key, const EVP_CIPHER* cipher = nullptr) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  const auto* pass = reinterpret_cast<const unsigned char*>("secret");
  PEM_write_bio_PrivateKey(bio.get(), key, cipher, cipher ? pass : nullptr, cipher ? 6 : 0, nullptr,
                           nullptr);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

struct CertOptions {
  const char* basic_constraints = "critical,CA:TRUE";
  const char* key_usage = "critical,keyCertSign,cRLSign";  // nullptr: no keyUsage extension
  long not_before = -3600;                                 // seconds from now
  long not_after = 86400;
};

// A self-signed certificate of `key` shaped by `options`: the CAs load() must refuse.
X509Ptr makeCert(EVP_PKEY* key, const CertOptions& options) {
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 4242);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), options.not_before);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), options.not_after);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("test cert"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_basic_constraints, options.basic_constraints},
                            std::pair{NID_key_usage, options.key_usage}}) {
    if (value == nullptr) {
      continue;
    }
    X509ExtensionPtr ext(
        X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    EXPECT_TRUE(ext);
    X509_add_ext(cert.get(), ext.get(), -1);
  }
  // EdDSA signs the whole message itself: no separate digest.
  const EVP_MD* md = EVP_PKEY_is_a(key, "ED25519") ? nullptr : EVP_sha256();
  EXPECT_GT(X509_sign(cert.get(), key, md), 0);
  return cert;
}

EvpPkeyPtr ecKey(const char* curve) {
  return EvpPkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve));
}

// Writes a CA pair the way an operator might bring one: ca.pem plus a 0600 ca.key.
void writeCa(const TempDir& dir, X509* cert, EVP_PKEY* key) {
  writeFile(dir.file("ca.pem"), pem(cert), 0644);
  writeFile(dir.file("ca.key"), pem(key), 0600);
}

CertificateAuthority createOrDie(const std::string& dir, std::string_view cn = "test CA") {
  auto ca = CertificateAuthority::create(dir, cn);
  if (!ca) {
    ADD_FAILURE() << ca.error();
    std::abort();
  }
  return std::move(ca).value();
}

// ---- create() -------------------------------------------------------------------------------

TEST(CaCreate, WritesBothFilesWithKeyMode0600AndCertMode0644) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  EXPECT_TRUE(exists(tmp.file("ca.pem")));
  EXPECT_TRUE(exists(tmp.file("ca.key")));
  EXPECT_EQ(modeOf(tmp.file("ca.key")), 0600u);
  EXPECT_EQ(modeOf(tmp.file("ca.pem")), 0644u);
  EXPECT_EQ(ca.certificatePath(), tmp.file("ca.pem"));
}

TEST(CaCreate, CreatesMissingDirectoriesWithMode0700) {
  TempDir tmp;
  std::string parent = tmp.file("state");
  std::string dir = parent + "/agent-1";
  auto ca = createOrDie(dir);
  EXPECT_EQ(modeOf(parent), 0700u);
  EXPECT_EQ(modeOf(dir), 0700u);
  EXPECT_EQ(modeOf(dir + "/ca.key"), 0600u);
}

TEST(CaCreate, AcceptsTrailingSlashInDir) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path() + "/");
  EXPECT_EQ(ca.certificatePath(), tmp.file("ca.pem"));
  EXPECT_TRUE(exists(tmp.file("ca.key")));
}

TEST(CaCreate, KeepsExactModesUnderRestrictiveUmask) {
  TempDir tmp;
  mode_t old = ::umask(0277);  // would leave the directory unwritable and the key 0400
  auto ca = CertificateAuthority::create(tmp.file("new"), "test CA");
  ::umask(old);
  ASSERT_TRUE(ca) << ca.error();
  EXPECT_EQ(modeOf(tmp.file("new")), 0700u);
  EXPECT_EQ(modeOf(tmp.file("new/ca.key")), 0600u);
  EXPECT_EQ(modeOf(tmp.file("new/ca.pem")), 0644u);
}

TEST(CaCreate, CertificateIsSelfSignedWithSluiceSubject) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path(), "sluice sandbox CA");
  X509Ptr cert = readCert(tmp.file("ca.pem"));
  ASSERT_TRUE(cert);
  EXPECT_EQ(der(cert.get()), der(ca.certificate()));
  EXPECT_EQ(X509_get_version(cert.get()), X509_VERSION_3);
  EXPECT_EQ(X509_check_issued(cert.get(), cert.get()), X509_V_OK);
  EXPECT_EQ(X509_verify(cert.get(), X509_get0_pubkey(cert.get())), 1);
  EXPECT_EQ(X509_verify(cert.get(), ca.key()), 1);
  EXPECT_EQ(X509_get_signature_nid(cert.get()), NID_ecdsa_with_SHA256);
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(cert.get()), subject, sizeof subject);
  EXPECT_STREQ(subject, "/O=sluice/CN=sluice sandbox CA");
  EXPECT_EQ(X509_NAME_cmp(X509_get_subject_name(cert.get()), X509_get_issuer_name(cert.get())), 0);
}

TEST(CaCreate, KeyIsEcP256) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  for (EVP_PKEY* key : {ca.key(), X509_get0_pubkey(ca.certificate())}) {
    EXPECT_TRUE(EVP_PKEY_is_a(key, "EC"));
    char group[64] = {};
    std::size_t len = 0;
    ASSERT_EQ(
        EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len),
        1);
    EXPECT_STREQ(group, "prime256v1");
    EXPECT_EQ(EVP_PKEY_get_bits(key), 256);
  }
}

TEST(CaCreate, KeyFileIsUnencryptedPkcs8Pem) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  EXPECT_THAT(readFile(tmp.file("ca.key")), StartsWith("-----BEGIN PRIVATE KEY-----\n"));
  EXPECT_THAT(readFile(tmp.file("ca.pem")), StartsWith("-----BEGIN CERTIFICATE-----\n"));
}

TEST(CaCreate, BasicConstraintsAreCriticalCaWithPathLenZero) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  int critical = -1;
  BasicConstraintsPtr bc(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(ca.certificate(), NID_basic_constraints, &critical, nullptr)));
  ASSERT_TRUE(bc);
  EXPECT_EQ(critical, 1);
  EXPECT_NE(bc->ca, 0);
  ASSERT_NE(bc->pathlen, nullptr);
  EXPECT_EQ(ASN1_INTEGER_get(bc->pathlen), 0);
  EXPECT_EQ(X509_check_ca(ca.certificate()), 1);
}

TEST(CaCreate, KeyUsageIsCriticalKeyCertSignAndCrlSignOnly) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  int critical = -1;
  Asn1BitStringPtr ku(static_cast<ASN1_BIT_STRING*>(
      X509_get_ext_d2i(ca.certificate(), NID_key_usage, &critical, nullptr)));
  ASSERT_TRUE(ku);
  EXPECT_EQ(critical, 1);
  EXPECT_EQ(X509_get_key_usage(ca.certificate()),
            static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
}

TEST(CaCreate, HasSubjectKeyIdentifierForLeavesToReference) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(ca.certificate());
  ASSERT_NE(ski, nullptr);
  EXPECT_EQ(ASN1_STRING_length(ski), 20);  // SHA-1 of the public key, RFC 5280 method 1
}

TEST(CaCreate, SerialIsPositiveAtMost159BitsAndDiffersBetweenCas) {
  TempDir tmp1;
  TempDir tmp2;
  auto a = createOrDie(tmp1.path());
  auto b = createOrDie(tmp2.path());
  for (X509* cert : {a.certificate(), b.certificate()}) {
    BignumPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
    ASSERT_TRUE(serial);
    EXPECT_FALSE(BN_is_negative(serial.get()));
    EXPECT_FALSE(BN_is_zero(serial.get()));
    EXPECT_LE(BN_num_bits(serial.get()), 159);
    EXPECT_GT(BN_num_bits(serial.get()), 64);  // random, not a counter (fails ~1 in 2^95)
  }
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a.certificate()),
                             X509_get0_serialNumber(b.certificate())),
            0);
  EXPECT_NE(EVP_PKEY_eq(a.key(), b.key()), 1);
}

TEST(CaCreate, ValidFromAnHourAgoForTenYears) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  const ASN1_TIME* not_before = X509_get0_notBefore(ca.certificate());
  const ASN1_TIME* not_after = X509_get0_notAfter(ca.certificate());
  EXPECT_LT(X509_cmp_current_time(not_before), 0);
  EXPECT_GT(X509_cmp_current_time(not_after), 0);
  int days = 0;
  int secs = 0;
  ASSERT_EQ(ASN1_TIME_diff(&days, &secs, nullptr, not_before), 1);
  EXPECT_EQ(days, 0);
  EXPECT_NEAR(secs, -3600, 60);
  ASSERT_EQ(ASN1_TIME_diff(&days, &secs, not_before, not_after), 1);
  EXPECT_GE(days, 3650);
  EXPECT_LE(days, 3653);
}

TEST(CaCreate, LeavesNoOpenSslErrorQueued) {
  TempDir tmp;
  auto created = createOrDie(tmp.path());
  EXPECT_EQ(ERR_peek_error(), 0ul);
  auto loaded = CertificateAuthority::load(tmp.path());
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

TEST(CaCreate, NeverOverwritesExistingCert) {
  TempDir tmp;
  writeFile(tmp.file("ca.pem"), "an operator's certificate\n", 0644);
  auto ca = CertificateAuthority::create(tmp.path(), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr(tmp.file("ca.pem") + " already exists"));
  EXPECT_EQ(readFile(tmp.file("ca.pem")), "an operator's certificate\n");
  EXPECT_FALSE(exists(tmp.file("ca.key")));
}

TEST(CaCreate, NeverOverwritesExistingKey) {
  TempDir tmp;
  writeFile(tmp.file("ca.key"), "an operator's key\n", 0600);
  auto ca = CertificateAuthority::create(tmp.path(), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr(tmp.file("ca.key") + " already exists"));
  EXPECT_EQ(readFile(tmp.file("ca.key")), "an operator's key\n");
  EXPECT_EQ(modeOf(tmp.file("ca.key")), 0600u);
  EXPECT_FALSE(exists(tmp.file("ca.pem")));
}

TEST(CaCreate, NeverOverwritesAnExistingCa) {
  TempDir tmp;
  auto first = createOrDie(tmp.path());
  std::string cert = readFile(tmp.file("ca.pem"));
  std::string key = readFile(tmp.file("ca.key"));
  auto second = CertificateAuthority::create(tmp.path(), "test CA");
  ASSERT_FALSE(second);
  EXPECT_EQ(readFile(tmp.file("ca.pem")), cert);
  EXPECT_EQ(readFile(tmp.file("ca.key")), key);
}

TEST(CaCreate, RefusesToWriteThroughDanglingSymlink) {
  TempDir tmp;
  // A planted link would otherwise make sluice write its key wherever the link points.
  ASSERT_EQ(::symlink(tmp.file("elsewhere").c_str(), tmp.file("ca.key").c_str()), 0);
  auto ca = CertificateAuthority::create(tmp.path(), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr("already exists"));
  EXPECT_FALSE(exists(tmp.file("elsewhere")));
  EXPECT_FALSE(exists(tmp.file("ca.pem")));
}

TEST(CaCreate, RefusesEmptyCommonNameWithoutWritingFiles) {
  TempDir tmp;
  auto ca = CertificateAuthority::create(tmp.file("new"), "");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr("common name"));
  EXPECT_THAT(ca.error(), HasSubstr("OpenSSL: error:"));
  EXPECT_FALSE(exists(tmp.file("new")));
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

TEST(CaCreate, FailsWhenDirIsAFile) {
  TempDir tmp;
  writeFile(tmp.file("plain"), "x", 0644);
  auto ca = CertificateAuthority::create(tmp.file("plain"), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr(tmp.file("plain")));
}

TEST(CaCreate, FailsWhenAParentIsAFile) {
  TempDir tmp;
  writeFile(tmp.file("plain"), "x", 0644);
  auto ca = CertificateAuthority::create(tmp.file("plain/sub"), "test CA");
  ASSERT_FALSE(ca);
  EXPECT_THAT(ca.error(), HasSubstr(tmp.file("plain")));
}

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
  EXPECT_EQ(modeOf(dir), 0700u);
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
