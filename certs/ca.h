#pragma once
// A sandbox's certificate authority: the key sluice signs minted leaves with, and the
// certificate the sandbox trusts. One CA per sandbox, never shared
// (docs/threat-model.md#identity-and-the-sandbox-ca), kept in a directory as ca.pem (0644: every
// user of the sandbox opens it) and ca.key (EC P-256, 0600: sluice's alone).
//
// Owns its OpenSSL objects; move-only. Knows nothing of connections.

#include <memory>
#include <string>
#include <string_view>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/result.h"
#include "certs/openssl_ptr.h"

namespace sluice::certs {

class CertificateAuthority {
 public:
  static constexpr std::string_view kCertFile = "ca.pem";
  static constexpr std::string_view kKeyFile = "ca.key";

  // Creates DIR (mode 0755 if missing, and so any parent it makes) and writes DIR/ca.pem
  // (0644) and DIR/ca.key: an EC P-256 key (file mode 0600, created exclusively) and a
  // self-signed certificate with
  // basicConstraints critical CA:TRUE, pathlen:0; keyUsage critical keyCertSign, cRLSign; a
  // random 159-bit serial; valid from an hour ago for ten years; subject CN = `common_name`.
  // Never overwrites: if either file exists, fails and touches nothing.
  static Result<CertificateAuthority, std::string> create(const std::string& dir,
                                                          std::string_view common_name);

  // Loads DIR/ca.pem and DIR/ca.key and checks that they belong together, that the certificate
  // is a CA that may sign certificates, and that the key file is not readable by group or
  // others.
  static Result<CertificateAuthority, std::string> load(const std::string& dir);

  // load() if both files exist, create() if neither does; an error if only one does.
  static Result<CertificateAuthority, std::string> loadOrCreate(const std::string& dir,
                                                                std::string_view common_name);

  X509* certificate() const { return cert_.get(); }
  EVP_PKEY* key() const { return key_.get(); }
  const std::string& certificatePath() const { return cert_path_; }

 private:
  CertificateAuthority(X509Ptr cert, EvpPkeyPtr key, std::string cert_path)
      : cert_(std::move(cert)), key_(std::move(key)), cert_path_(std::move(cert_path)) {}

  X509Ptr cert_;
  EvpPkeyPtr key_;
  std::string cert_path_;
};

}  // namespace sluice::certs
