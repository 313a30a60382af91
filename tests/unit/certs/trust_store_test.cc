// The sandbox CA as a Java trust store (certs/trust_store.h): read back with OpenSSL, as Java's
// PKCS12 KeyStore reads it (one certificate bag, the trusted-usage attribute, no key, a MAC under
// "changeit"); written beside ca.pem only when missing or stale. The real Java reads it in
// tests/integration/gateway/test_cli_env_audit.py.
#include "certs/trust_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/pkcs12.h>

#include "tests/unit/certs/ca_test_support.h"

namespace sluice::certs {
namespace {

using namespace ca_test;

std::string storeOf(X509* cert) {
  auto der = javaTrustStore(cert);
  EXPECT_TRUE(der.ok()) << (der ? "" : der.error());
  return der ? der.value() : std::string();
}

Pkcs12Ptr parse(const std::string& der) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(der.data());
  return Pkcs12Ptr(d2i_PKCS12(nullptr, &bytes, static_cast<long>(der.size())));
}

TEST(JavaTrustStore, HoldsTheCertificateAloneUnderTheJdkPassword) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  const std::string der = storeOf(ca.certificate());
  Pkcs12Ptr p12 = parse(der);
  ASSERT_TRUE(p12);
  EXPECT_EQ(PKCS12_verify_mac(p12.get(), "changeit", -1), 1);
  EXPECT_NE(PKCS12_verify_mac(p12.get(), "other", -1), 1);
  // PKCS12_parse: no key, and the certificate among the "CA" certificates (it has no key).
  EVP_PKEY* key = nullptr;
  X509* leaf = nullptr;
  STACK_OF(X509)* others = nullptr;
  ASSERT_EQ(PKCS12_parse(p12.get(), "changeit", &key, &leaf, &others), 1);
  EXPECT_EQ(key, nullptr);
  EXPECT_EQ(leaf, nullptr);
  ASSERT_EQ(sk_X509_num(others), 1);
  EXPECT_EQ(X509_cmp(sk_X509_value(others, 0), ca.certificate()), 0);
  sk_X509_pop_free(others, X509_free);
}

TEST(JavaTrustStore, TheBagCarriesTheAliasAndTheTrustedUsageAttribute) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  Pkcs12Ptr p12 = parse(storeOf(ca.certificate()));
  ASSERT_TRUE(p12);
  Pkcs7sPtr safes(PKCS12_unpack_authsafes(p12.get()));
  ASSERT_EQ(sk_PKCS7_num(safes.get()), 1);
  Pkcs12SafebagsPtr bags(PKCS12_unpack_p7data(sk_PKCS7_value(safes.get(), 0)));
  ASSERT_EQ(sk_PKCS12_SAFEBAG_num(bags.get()), 1);
  PKCS12_SAFEBAG* bag = sk_PKCS12_SAFEBAG_value(bags.get(), 0);
  EXPECT_EQ(PKCS12_SAFEBAG_get_nid(bag), NID_certBag);
  char* name = PKCS12_get_friendlyname(bag);
  ASSERT_NE(name, nullptr);
  EXPECT_STREQ(name, "sluice sandbox ca");
  OPENSSL_free(name);
  const STACK_OF(X509_ATTRIBUTE)* attrs = PKCS12_SAFEBAG_get0_attrs(bag);
  bool trusted = false;
  for (int i = 0; i < sk_X509_ATTRIBUTE_num(attrs); ++i) {
    X509_ATTRIBUTE* attr = sk_X509_ATTRIBUTE_value(attrs, i);
    char oid[80];
    OBJ_obj2txt(oid, sizeof oid, X509_ATTRIBUTE_get0_object(attr), 1);
    if (std::string_view(oid) == "2.16.840.1.113894.746875.1.1") {
      const ASN1_TYPE* value = X509_ATTRIBUTE_get0_type(attr, 0);
      ASSERT_NE(value, nullptr);
      ASSERT_EQ(value->type, V_ASN1_OBJECT);
      char usage[80];
      OBJ_obj2txt(usage, sizeof usage, value->value.object, 1);
      EXPECT_STREQ(usage, "2.5.29.37.0");  // anyExtendedKeyUsage
      trusted = true;
    }
  }
  EXPECT_TRUE(trusted);
  EXPECT_TRUE(trustStoreHolds(storeOf(ca.certificate()), ca.certificate()));
}

TEST(JavaTrustStore, HoldsIsFalseForAnotherCaGarbageOrAKeyStore) {
  TempDir a, b;
  auto first = createOrDie(a.path());
  auto second = createOrDie(b.path());
  const std::string der = storeOf(first.certificate());
  EXPECT_TRUE(trustStoreHolds(der, first.certificate()));
  EXPECT_FALSE(trustStoreHolds(der, second.certificate()));
  EXPECT_FALSE(trustStoreHolds("not a pkcs12", first.certificate()));
  EXPECT_FALSE(trustStoreHolds(der.substr(0, der.size() / 2), first.certificate()));
  // A PKCS#12 with the key too (what `openssl pkcs12 -export` makes by default) is no trust
  // store sluice wrote.
  Pkcs12Ptr with_key(PKCS12_create("changeit", "x", first.key(), first.certificate(), nullptr, 0,
                                   0, 0, 0, 0));
  ASSERT_TRUE(with_key);
  unsigned char* raw = nullptr;
  const int size = i2d_PKCS12(with_key.get(), &raw);
  OpensslBytesPtr bytes(raw);
  ASSERT_GT(size, 0);
  EXPECT_FALSE(trustStoreHolds(
      std::string(reinterpret_cast<const char*>(bytes.get()), static_cast<std::size_t>(size)),
      first.certificate()));
}

TEST(JavaTrustStore, WrittenWhenMissingOrStaleAndLeftAloneOtherwise) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  const std::string path = tmp.file("ca.p12");
  auto wrote = writeJavaTrustStore(tmp.path(), ca.certificate());
  ASSERT_TRUE(wrote.ok()) << (wrote ? "" : wrote.error());
  EXPECT_TRUE(wrote.value());
  EXPECT_EQ(modeOf(path), 0644u);
  const std::string first = readFile(path);
  EXPECT_TRUE(trustStoreHolds(first, ca.certificate()));

  wrote = writeJavaTrustStore(tmp.path(), ca.certificate());
  ASSERT_TRUE(wrote.ok());
  EXPECT_FALSE(wrote.value());  // it holds this CA: left alone
  EXPECT_EQ(readFile(path), first);

  TempDir other;
  auto rotated = createOrDie(other.path());
  wrote = writeJavaTrustStore(tmp.path(), rotated.certificate());  // the CA was replaced
  ASSERT_TRUE(wrote.ok());
  EXPECT_TRUE(wrote.value());
  EXPECT_TRUE(trustStoreHolds(readFile(path), rotated.certificate()));

  writeFile(path, "garbage", 0600);
  wrote = writeJavaTrustStore(tmp.path(), ca.certificate());
  ASSERT_TRUE(wrote.ok());
  EXPECT_TRUE(wrote.value());
  EXPECT_EQ(modeOf(path), 0644u);
  EXPECT_TRUE(trustStoreHolds(readFile(path), ca.certificate()));
  // No temporary file is left beside it.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(tmp.path())) {
    ++entries;
  }
  EXPECT_EQ(entries, 3u);  // ca.pem, ca.key, ca.p12
}

TEST(JavaTrustStore, AnUnwritableDirectoryIsAnErrorNamingTheFile) {
  TempDir tmp;
  auto ca = createOrDie(tmp.path());
  auto wrote = writeJavaTrustStore("/nonexistent/sluice-ca", ca.certificate());
  ASSERT_FALSE(wrote.ok());
  EXPECT_THAT(wrote.error(), ::testing::HasSubstr("/nonexistent/sluice-ca/"));
}

}  // namespace
}  // namespace sluice::certs
