#pragma once
// The sandbox CA as a Java trust store (docs/cli.md#sluice-env): Java reads its trust anchors
// from a KeyStore, not from a PEM file, so `sluice ca init` and `sluice run` write ca.p12 beside
// ca.pem, and `sluice env` points JAVA_TOOL_OPTIONS at it.
//
// The file is a PKCS#12 with one certificate bag and no key. Java's PKCS12 KeyStore reads a
// certificate bag as a trusted certificate entry only when the bag carries Oracle's "trusted key
// usage" attribute (OID 2.16.840.1.113894.746875.1.1); keytool writes it with the value
// anyExtendedKeyUsage, as OpenSSL 3.2's `pkcs12 -export -jdktrust anyExtendedKeyUsage` does. Its
// password is "changeit", the JDK's own cacerts password: the file holds nothing secret, but a
// PKCS#12 is MAC-protected with some password, and every Java tool's documentation and default
// assume this one.
//
// Knows nothing of connections; reads and writes files in the CA's directory only.

#include <string>
#include <string_view>

#include <openssl/x509.h>

#include "base/result.h"

namespace sluice::certs {

inline constexpr std::string_view kTrustStoreFile = "ca.p12";
inline constexpr std::string_view kTrustStorePassword = "changeit";
inline constexpr std::string_view kTrustStoreAlias = "sluice sandbox ca";

// The DER bytes of a PKCS#12 trust store holding `cert` alone (certificate bag unencrypted, as
// the certificate is public; MAC HMAC-SHA-256 under kTrustStorePassword).
Result<std::string, std::string> javaTrustStore(X509* cert);

// Whether `der` is a PKCS#12 whose MAC verifies with kTrustStorePassword and which holds `cert`
// as its one certificate, with the trusted-usage attribute, and no key.
bool trustStoreHolds(std::string_view der, X509* cert);

// Writes DIR/ca.p12 for `cert` unless the file there already holds it (trustStoreHolds): a
// temporary file in DIR renamed over it, mode 0644. True if it wrote.
Result<bool, std::string> writeJavaTrustStore(const std::string& dir, X509* cert);

}  // namespace sluice::certs
