#include "certs/trust_store.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/objects.h>
#include <openssl/pkcs12.h>
#include <openssl/x509v3.h>

#include "certs/openssl_error.h"
#include "certs/openssl_ptr.h"
#include "certs/public_file.h"

namespace sluice::certs {

namespace {

// Oracle's "trusted key usage" attribute: what makes Java's PKCS12 KeyStore read a certificate
// bag as a trustedCertEntry (without it the bag is ignored as a trust anchor).
constexpr const char* kJdkTrustedKeyUsage = "2.16.840.1.113894.746875.1.1";
constexpr std::size_t kMaxTrustStoreBytes = 64 * 1024;  // a one-certificate store is ~1 KiB

// Whether `bag` carries the trusted-usage attribute with the value anyExtendedKeyUsage.
bool trustedForAnyUsage(const PKCS12_SAFEBAG* bag) {
  const STACK_OF(X509_ATTRIBUTE)* attrs = PKCS12_SAFEBAG_get0_attrs(bag);
  for (int i = 0; i < sk_X509_ATTRIBUTE_num(attrs); ++i) {
    X509_ATTRIBUTE* attr = sk_X509_ATTRIBUTE_value(attrs, i);
    char oid[80];
    if (OBJ_obj2txt(oid, sizeof oid, X509_ATTRIBUTE_get0_object(attr), 1) <= 0 ||
        std::strcmp(oid, kJdkTrustedKeyUsage) != 0) {
      continue;
    }
    const ASN1_TYPE* value = X509_ATTRIBUTE_get0_type(attr, 0);
    return value != nullptr && value->type == V_ASN1_OBJECT &&
           OBJ_obj2nid(value->value.object) == NID_anyExtendedKeyUsage;
  }
  return false;
}

}  // namespace

Result<std::string, std::string> javaTrustStore(X509* cert) {
  // PKCS12_add_cert and PKCS12_add_safe grow stacks through a pointer to a raw pointer; the
  // guards take them over once made.
  STACK_OF(PKCS12_SAFEBAG)* raw_bags = nullptr;
  PKCS12_SAFEBAG* bag = PKCS12_add_cert(&raw_bags, cert);
  Pkcs12SafebagsPtr bags(raw_bags);
  if (bag == nullptr) {
    return Err{"cannot make the certificate bag: " + drainOpensslErrors()};
  }
  // ASN1_TYPE_set1 copies the object, so the shared table entry is only read.
  const ASN1_OBJECT* any_usage = OBJ_nid2obj(NID_anyExtendedKeyUsage);
  if (PKCS12_add_friendlyname_utf8(bag, kTrustStoreAlias.data(),
                                   static_cast<int>(kTrustStoreAlias.size())) != 1 ||
      PKCS12_add1_attr_by_txt(bag, kJdkTrustedKeyUsage, V_ASN1_OBJECT,
                              reinterpret_cast<const unsigned char*>(any_usage), -1) != 1) {
    return Err{"cannot label the certificate bag: " + drainOpensslErrors()};
  }
  // Unencrypted (-1): a certificate is public, and any Java reads a plain data safe.
  STACK_OF(PKCS7)* raw_safes = nullptr;
  const int added = PKCS12_add_safe(&raw_safes, bags.get(), -1, 0, nullptr);
  Pkcs7sPtr safes(raw_safes);
  if (added != 1) {
    return Err{"cannot make the PKCS#12 safe: " + drainOpensslErrors()};
  }
  Pkcs12Ptr p12(PKCS12_add_safes(safes.get(), 0));
  if (!p12 || PKCS12_set_mac(p12.get(), kTrustStorePassword.data(),
                             static_cast<int>(kTrustStorePassword.size()), nullptr, 0,
                             PKCS12_DEFAULT_ITER, EVP_sha256()) != 1) {
    return Err{"cannot make the PKCS#12: " + drainOpensslErrors()};
  }
  unsigned char* raw_der = nullptr;
  const int size = i2d_PKCS12(p12.get(), &raw_der);
  OpensslBytesPtr der(raw_der);
  if (size <= 0) {
    return Err{"cannot encode the PKCS#12: " + drainOpensslErrors()};
  }
  return std::string(reinterpret_cast<const char*>(der.get()), static_cast<std::size_t>(size));
}

bool trustStoreHolds(std::string_view der, X509* cert) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(der.data());
  Pkcs12Ptr p12(
      d2i_PKCS12(nullptr, &bytes, static_cast<long>(der.size())));
  if (!p12 || PKCS12_verify_mac(p12.get(), kTrustStorePassword.data(),
                                static_cast<int>(kTrustStorePassword.size())) != 1) {
    drainOpensslErrors();
    return false;
  }
  Pkcs7sPtr safes(PKCS12_unpack_authsafes(p12.get()));
  if (!safes) {
    drainOpensslErrors();
    return false;
  }
  int certificates = 0;
  bool holds = false;
  for (int i = 0; i < sk_PKCS7_num(safes.get()); ++i) {
    PKCS7* safe = sk_PKCS7_value(safes.get(), i);
    if (OBJ_obj2nid(safe->type) != NID_pkcs7_data) {
      return false;  // an encrypted safe: not one sluice wrote
    }
    Pkcs12SafebagsPtr bags(PKCS12_unpack_p7data(safe));
    for (int j = 0; bags && j < sk_PKCS12_SAFEBAG_num(bags.get()); ++j) {
      const PKCS12_SAFEBAG* bag = sk_PKCS12_SAFEBAG_value(bags.get(), j);
      if (PKCS12_SAFEBAG_get_nid(bag) != NID_certBag) {
        return false;  // a key, or anything else, has no place in a trust store
      }
      X509Ptr held(PKCS12_SAFEBAG_get1_cert(bag));
      ++certificates;
      holds = held && X509_cmp(held.get(), cert) == 0 && trustedForAnyUsage(bag);
    }
  }
  drainOpensslErrors();
  return certificates == 1 && holds;
}

Result<bool, std::string> writeJavaTrustStore(const std::string& dir, X509* cert) {
  const std::string path = dir + "/" + std::string(kTrustStoreFile);
  if (auto existing = readSmallFile(path, kMaxTrustStoreBytes);
      existing && trustStoreHolds(existing.value(), cert)) {
    return false;
  }
  auto der = javaTrustStore(cert);
  if (!der) {
    return Err{path + ": " + der.error()};
  }
  // A reader (a sandbox's orchestrator copying it) sees the old file or the new one, whole.
  if (auto written = replaceFile(dir, kTrustStoreFile, der.value()); !written) {
    return Err{std::move(written).error()};
  }
  return true;
}

}  // namespace sluice::certs
