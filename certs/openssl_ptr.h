#pragma once
// Every OpenSSL object sluice owns, as a std::unique_ptr that frees it with its own free
// function: one alias per type, here and nowhere else, for certs/, proxy/, the tests and
// bench/. A type missing here is added here, not given a deleter where it is used.

#include <memory>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pkcs12.h>
#include <openssl/pkcs7.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

namespace sluice::certs {

// Calls `Free` (an OpenSSL *_free function) on the pointer.
template <auto Free>
struct OpensslFree {
  template <class T>
  void operator()(T* p) const noexcept {
    Free(p);
  }
};

// OPENSSL_free is a macro; this is its function.
inline void freeOpensslBytes(unsigned char* p) noexcept { OPENSSL_free(p); }
// A stack and what it holds (sk_*_pop_free are macros over the type).
inline void freeSafebags(STACK_OF(PKCS12_SAFEBAG) * s) noexcept {
  sk_PKCS12_SAFEBAG_pop_free(s, PKCS12_SAFEBAG_free);
}
inline void freePkcs7s(STACK_OF(PKCS7) * s) noexcept { sk_PKCS7_pop_free(s, PKCS7_free); }

using Asn1BitStringPtr = std::unique_ptr<ASN1_BIT_STRING, OpensslFree<ASN1_BIT_STRING_free>>;
using Asn1OctetStringPtr =
    std::unique_ptr<ASN1_OCTET_STRING, OpensslFree<ASN1_OCTET_STRING_free>>;
using AuthorityKeyIdPtr = std::unique_ptr<AUTHORITY_KEYID, OpensslFree<AUTHORITY_KEYID_free>>;
using BasicConstraintsPtr =
    std::unique_ptr<BASIC_CONSTRAINTS, OpensslFree<BASIC_CONSTRAINTS_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpensslFree<BN_free>>;
using BioPtr = std::unique_ptr<BIO, OpensslFree<BIO_free_all>>;
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, OpensslFree<EVP_MD_CTX_free>>;
using EvpMdPtr = std::unique_ptr<EVP_MD, OpensslFree<EVP_MD_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpensslFree<EVP_PKEY_free>>;
using ExtendedKeyUsagePtr =
    std::unique_ptr<EXTENDED_KEY_USAGE, OpensslFree<EXTENDED_KEY_USAGE_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpensslFree<GENERAL_NAME_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpensslFree<GENERAL_NAMES_free>>;
using OpensslBytesPtr = std::unique_ptr<unsigned char, OpensslFree<freeOpensslBytes>>;
using Pkcs12Ptr = std::unique_ptr<PKCS12, OpensslFree<PKCS12_free>>;
using Pkcs12SafebagsPtr = std::unique_ptr<STACK_OF(PKCS12_SAFEBAG), OpensslFree<freeSafebags>>;
using Pkcs7sPtr = std::unique_ptr<STACK_OF(PKCS7), OpensslFree<freePkcs7s>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, OpensslFree<SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OpensslFree<SSL_free>>;
using SslSessionPtr = std::unique_ptr<SSL_SESSION, OpensslFree<SSL_SESSION_free>>;
using X509ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpensslFree<X509_EXTENSION_free>>;
using X509NamePtr = std::unique_ptr<X509_NAME, OpensslFree<X509_NAME_free>>;
using X509Ptr = std::unique_ptr<X509, OpensslFree<X509_free>>;
using X509StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, OpensslFree<X509_STORE_CTX_free>>;
using X509StorePtr = std::unique_ptr<X509_STORE, OpensslFree<X509_STORE_free>>;

}  // namespace sluice::certs
