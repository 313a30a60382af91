// sluice ca init --dir DIR (docs/cli.md#sluice-ca-init): writes a new sandbox CA, and never
// overwrites one.

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "certs/ca.h"
#include "certs/client_configs.h"
#include "certs/shown_path.h"
#include "certs/trust_store.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"

namespace sluice::cli {

namespace {

constexpr std::string_view kCommonName = "sluice sandbox CA";
constexpr const char* kUsage = "usage: sluice ca init --dir DIR\n";

int usageError(Streams streams, const std::string& message) {
  std::fprintf(streams.err, "sluice ca init: %s\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

// lstat semantics: a dangling symlink is "there" too, as create() would find.
bool entryExists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

}  // namespace

int caInitCommand(std::span<const std::string_view> args, Streams streams) {
  std::string error;
  auto flags = Flags::parse(args, commandFlags("ca init"), &error);
  if (!flags) {
    return usageError(streams, error);
  }
  auto dir_flag = flags->get("dir");
  if (!dir_flag) {
    return usageError(streams, "--dir is required");
  }
  if (dir_flag->empty()) {
    return usageError(streams, "--dir needs a directory");
  }

  const std::filesystem::path dir(*dir_flag);
  const std::string cert_path = (dir / certs::CertificateAuthority::kCertFile).string();
  const std::string key_path = (dir / certs::CertificateAuthority::kKeyFile).string();
  // Checked here only to say it in the command's words; create() refuses on its own, and its
  // exclusive opens are what actually protect an existing CA.
  bool cert_exists = entryExists(cert_path);
  bool key_exists = entryExists(key_path);
  if (cert_exists || key_exists) {
    std::string what = cert_exists && key_exists ? cert_path + " and " + key_path + " already exist"
                       : cert_exists             ? cert_path + " already exists"
                                                 : key_path + " already exists";
    std::fprintf(streams.err, "%s: sluice ca init never overwrites\n", what.c_str());
    return kExitFailure;
  }

  auto ca = certs::CertificateAuthority::create(dir.string(), kCommonName);
  if (!ca) {
    std::fprintf(streams.err, "sluice ca init: %s\n", ca.error().c_str());
    return kExitFailure;
  }

  // Java reads a trust store, not a PEM file (certs/trust_store.h).
  auto trust_store = certs::writeJavaTrustStore(dir.string(), ca.value().certificate());
  if (!trust_store) {
    std::fprintf(streams.err, "sluice ca init: %s\n", trust_store.error().c_str());
    return kExitFailure;
  }
  const std::string store_path = (dir / certs::kTrustStoreFile).string();
  if (auto configs = certs::writeClientConfigs(dir.string(), certs::shownPath(cert_path));
      !configs) {
    std::fprintf(streams.err, "sluice ca init: %s\n", configs.error().c_str());
    return kExitFailure;
  }

  // The trust hint gets an absolute path: a relative one in SSL_CERT_FILE would depend on the
  // working directory of every tool in the sandbox.
  const std::string trusted = certs::shownPath(cert_path);
  std::fprintf(streams.out,
               "wrote %s and %s (EC P-256, key mode 0600), %s (the certificate as a Java "
               "trust store, password changeit), and wgetrc and apt.conf naming the certificate\n"
               "trust it in the sandbox with SSL_CERT_FILE=%s (`sluice env` prints the other "
               "variables tools read)\n"
               "keep %s on this host: mount or copy only ca.pem (and ca.p12) into the sandbox\n",
               cert_path.c_str(), key_path.c_str(), store_path.c_str(), trusted.c_str(),
               key_path.c_str());
  return kExitOk;
}

}  // namespace sluice::cli
