// CertificateAuthority::create(): the files, their modes and what the certificate says.
#include "certs/ca.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/certs/ca_test_support.h"

namespace sluice::certs {
namespace {

using namespace ca_test;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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

// Searchable by anyone: a sandbox client of another user opens ca.pem; the key is 0600.
TEST(CaCreate, CreatesMissingDirectoriesWithMode0755) {
  TempDir tmp;
  std::string parent = tmp.file("state");
  std::string dir = parent + "/agent-1";
  auto ca = createOrDie(dir);
  EXPECT_EQ(modeOf(parent), 0755u);
  EXPECT_EQ(modeOf(dir), 0755u);
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
  EXPECT_EQ(modeOf(tmp.file("new")), 0755u);
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

}  // namespace
}  // namespace sluice::certs
