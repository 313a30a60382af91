#pragma once
// What the tests of the sandbox CA share: files and their modes, certificates and keys made
// to order (as an operator might bring them), and a CA created in a temporary directory.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certs/ca.h"
#include "tests/support/temp_dir.h"

namespace sluice::certs::ca_test {

using test_support::readFile;
using test_support::TempDir;

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

inline unsigned modeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

inline void writeFile(const std::string& path, const std::string& content, mode_t mode) {
  test_support::writeFile(path, content);
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

inline std::vector<unsigned char> der(X509* cert) {
  int len = i2d_X509(cert, nullptr);
  EXPECT_GT(len, 0);
  std::vector<unsigned char> out(static_cast<std::size_t>(len));
  unsigned char* p = out.data();
  i2d_X509(cert, &p);
  return out;
}

inline X509Ptr readCert(const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

inline std::string pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

inline std::string pem(EVP_PKEY* key, const EVP_CIPHER* cipher = nullptr) {
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
inline X509Ptr makeCert(EVP_PKEY* key, const CertOptions& options) {
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

inline EvpPkeyPtr ecKey(const char* curve) {
  return EvpPkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve));
}

// Writes a CA pair the way an operator might bring one: ca.pem plus a 0600 ca.key.
inline void writeCa(const TempDir& dir, X509* cert, EVP_PKEY* key) {
  writeFile(dir.file("ca.pem"), pem(cert), 0644);
  writeFile(dir.file("ca.key"), pem(key), 0600);
}

inline CertificateAuthority createOrDie(const std::string& dir,
                                         std::string_view cn = "test CA") {
  auto ca = CertificateAuthority::create(dir, cn);
  if (!ca) {
    ADD_FAILURE() << ca.error();
    std::abort();
  }
  return std::move(ca).value();
}

}  // namespace sluice::certs::ca_test
