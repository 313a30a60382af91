#include "certs/ca.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certs/openssl_error.h"
#include "certs/x509_util.h"

namespace sluice::certs {

namespace {

using CaResult = Result<CertificateAuthority, std::string>;

constexpr long kBackdateSeconds = 60 * 60;  // tolerates a sandbox clock a little behind ours
constexpr int kValidityDays = 3652;         // ten years, leap days included
// The directories sluice makes for a CA may be searched by anyone: the sandbox's clients, which
// may run as another user (apt's https method runs as _apt), must open ca.pem and ca.p12. The
// key is the one secret there, and its own mode (0600, checked at every load) keeps it
// (docs/configuration.md#sandboxes).
constexpr mode_t kDirMode = 0755;
constexpr mode_t kKeyMode = 0600;
constexpr mode_t kCertMode = 0644;

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileClose>;

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};


Err<std::string> errnoFailure(const std::string& path, const std::string& what, int err) {
  return Err{path + ": " + what + ": " + std::strerror(err)};
}

std::string joinPath(const std::string& dir, std::string_view file) {
  if (!dir.empty() && dir.back() == '/') {
    return dir + std::string(file);
  }
  return dir + "/" + std::string(file);
}

// Whether a directory entry of that name exists, symlinks included (a dangling symlink counts:
// O_EXCL would refuse it too). ENOTDIR means absent too; creating the directory then says what
// is in the way. Other errors are errors, not "absent".
Result<bool, std::string> entryExists(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    return true;
  }
  if (errno == ENOENT || errno == ENOTDIR) {
    return false;
  }
  return errnoFailure(path, "cannot stat", errno);
}

// mkdir -p, except that every directory it creates gets exactly kDirMode: a restrictive umask
// must neither hide the certificate from the sandbox's users nor leave the directory
// unwritable to us.
Result<Ok, std::string> makeDirectories(const std::string& dir) {
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    std::string prefix = dir.substr(0, pos);
    if (prefix.empty() || prefix.back() == '/') {
      continue;  // the root, or a doubled slash
    }
    if (::mkdir(prefix.c_str(), kDirMode) == 0) {
      if (::chmod(prefix.c_str(), kDirMode) != 0) {
        return errnoFailure(prefix, "cannot chmod the new directory", errno);
      }
      continue;
    }
    if (errno != EEXIST) {
      return errnoFailure(prefix, "cannot create directory", errno);
    }
    struct stat st {};
    if (::stat(prefix.c_str(), &st) != 0) {
      return errnoFailure(prefix, "cannot stat", errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      return Err{prefix + ": exists and is not a directory"};
    }
  }
  return Ok{};
}

Result<Ok, std::string> syncDirectory(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    return errnoFailure(dir, "cannot sync directory", errno);
  }
  return Ok{};
}

// Creates `path` exclusively with exactly `mode` (fchmod: the umask may only have removed bits,
// but the contract is the exact mode) and writes all of `data` durably. On any failure after
// the file was created, removes it: a half-written CA is worse than none.
Result<Ok, std::string> writeNewFile(const std::string& path, std::string_view data, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd.get() < 0) {
    if (errno == EEXIST) {
      return Err{path + " already exists: refusing to overwrite it"};
    }
    return errnoFailure(path, "cannot create", errno);
  }
  auto fail = [&](const char* what) -> Err<std::string> {
    int err = errno;
    ::close(fd.release());
    ::unlink(path.c_str());
    return errnoFailure(path, what, err);
  };
  if (::fchmod(fd.get(), mode) != 0) {
    return fail("cannot chmod");
  }
  while (!data.empty()) {
    ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return fail("cannot write");
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd.get()) != 0) {
    return fail("cannot sync");
  }
  if (::close(fd.release()) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return errnoFailure(path, "cannot close", err);
  }
  return Ok{};
}

std::string_view bioContents(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string_view(data, static_cast<std::size_t>(len)) : std::string_view();
}

// Never ask for a passphrase: without this callback OpenSSL would prompt on the controlling
// terminal of a daemon. An encrypted key is refused instead.
int refusePassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return -1; }

Result<X509Ptr, std::string> makeCaCertificate(EVP_PKEY* key, std::string_view common_name) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return opensslFailure("cannot allocate the certificate");
  }

  if (!setRandomSerial(cert.get())) {
    return opensslFailure("cannot set a random serial");
  }

  // One clock reading for both ends, so the lifetime is exactly what the constants say.
  std::time_t now = std::time(nullptr);
  if (X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -kBackdateSeconds, &now) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), kValidityDays, 0, &now) == nullptr) {
    return opensslFailure("cannot set the validity");
  }

  // RDNs in DER order (O, then CN), which prints as "CN=..., O=sluice" in RFC 4514 form.
  X509_NAME* name = X509_get_subject_name(cert.get());
  const auto* org = reinterpret_cast<const unsigned char*>("sluice");
  const auto* cn = reinterpret_cast<const unsigned char*>(common_name.data());
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, org, -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, cn,
                                 static_cast<int>(common_name.size()), -1, 0) != 1) {
    return opensslFailure("invalid CA common name '" + std::string(common_name) + "'");
  }
  if (X509_set_issuer_name(cert.get(), name) != 1 || X509_set_pubkey(cert.get(), key) != 1) {
    return opensslFailure("cannot set the issuer or public key");
  }

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  const std::pair<int, const char*> extensions[] = {
      {NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
      {NID_key_usage, "critical,keyCertSign,cRLSign"},
      {NID_subject_key_identifier, "hash"},
  };
  for (const auto& [nid, value] : extensions) {
    X509ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    if (!ext || X509_add_ext(cert.get(), ext.get(), -1) != 1) {
      return opensslFailure(std::string("cannot add extension ") + OBJ_nid2sn(nid));
    }
  }

  if (X509_sign(cert.get(), key, EVP_sha256()) <= 0) {
    return opensslFailure("cannot sign the certificate");
  }
  return cert;
}

// The key types a CA may have: what `ca init` writes (EC P-256), and the other types every TLS
// client accepts in a chain and that sign with SHA-256 the way leaves are minted (EC P-384,
// RSA of 2048 bits or more). EdDSA and the rest are refused: clients support them unevenly.
Result<Ok, std::string> checkKeyType(const std::string& path, EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "EC")) {
    char group[64] = {};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                       &len) != 1) {
      return opensslFailure(path + ": EC key without a named curve");
    }
    std::string_view curve(group, len);
    if (curve == "prime256v1" || curve == "secp384r1") {
      return Ok{};
    }
    return Err{path + ": EC key on curve " + std::string(curve) +
               "; a CA key must be EC P-256 or P-384, or RSA of 2048 bits or more"};
  }
  if (EVP_PKEY_is_a(key, "RSA")) {
    int bits = EVP_PKEY_get_bits(key);
    if (bits >= 2048) {
      return Ok{};
    }
    return Err{path + ": RSA key of " + std::to_string(bits) +
               " bits; a CA key must be RSA of 2048 bits or more, or EC P-256 or P-384"};
  }
  const char* type = EVP_PKEY_get0_type_name(key);
  return Err{path + ": unsupported key type " + std::string(type ? type : "(unknown)") +
             "; a CA key must be EC P-256 or P-384, or RSA of 2048 bits or more"};
}

// Opens the key, refuses it if group or others have any access (whoever can read
// it can mint certificates every sandbox of this CA trusts), then parses it. The mode is checked
// on the open descriptor, so a file swapped after the check is not the one read.
Result<EvpPkeyPtr, std::string> readKey(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return errnoFailure(path, "cannot open", errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errnoFailure(path, "cannot stat", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return Err{path + ": not a regular file"};
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    const char* what = (st.st_mode & 044) != 0 ? " is readable by others" : " is open to others";
    return Err{path + what + " (mode " + mode + "): chmod 600 it"};
  }
  FilePtr file(::fdopen(fd.get(), "r"));
  if (!file) {
    return errnoFailure(path, "cannot read", errno);
  }
  fd.release();  // the FILE owns it now
  EvpPkeyPtr key(PEM_read_PrivateKey(file.get(), nullptr, refusePassphrase, nullptr));
  if (!key) {
    return opensslFailure(path + ": not a PEM private key, or an encrypted one");
  }
  return key;
}

Result<X509Ptr, std::string> readCertificate(const std::string& path) {
  FilePtr file(std::fopen(path.c_str(), "re"));
  if (!file) {
    return errnoFailure(path, "cannot open", errno);
  }
  X509Ptr cert(PEM_read_X509(file.get(), nullptr, refusePassphrase, nullptr));
  if (!cert) {
    return opensslFailure(path + ": not a PEM certificate");
  }
  return cert;
}

Result<Ok, std::string> checkCertificate(const std::string& cert_path, X509* cert,
                                         const std::string& key_path, EVP_PKEY* key) {
  if (X509_check_private_key(cert, key) != 1) {
    return opensslFailure(key_path + " is not the key of " + cert_path);
  }
  uint32_t flags = X509_get_extension_flags(cert);
  if ((flags & EXFLAG_INVALID) != 0) {
    return opensslFailure(cert_path + ": malformed certificate extensions");
  }
  // X509_check_ca() == 1 exactly when basicConstraints says CA:TRUE and keyUsage, if present,
  // includes keyCertSign: what a verifier requires of the issuer of our leaves. Its other
  // non-zero answers (v1 roots, Netscape types) are not enough for that.
  if (X509_check_ca(cert) != 1) {
    if ((flags & EXFLAG_CA) == 0) {
      return Err{cert_path + ": not a CA certificate (basicConstraints CA:TRUE missing)"};
    }
    return Err{cert_path + ": keyUsage lacks keyCertSign, so it may not sign certificates"};
  }
  // A CA outside its validity would only make every minted leaf fail in the sandbox, far from
  // the cause; say it here instead.
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
    return Err{cert_path + ": the CA certificate has expired"};
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
    return Err{cert_path + ": the CA certificate is not valid yet"};
  }
  ERR_clear_error();  // the checks above may have queued errors they then handled
  return Ok{};
}

}  // namespace

CaResult CertificateAuthority::create(const std::string& dir, std::string_view common_name) {
  ERR_clear_error();  // so that the errors reported below are ours
  if (dir.empty()) {
    return Err{std::string("CA directory is empty")};
  }
  std::string cert_path = joinPath(dir, kCertFile);
  std::string key_path = joinPath(dir, kKeyFile);
  // Checked before anything is generated or created, so that refusing changes nothing. The
  // O_EXCL opens below still hold the line against a file appearing in between.
  for (const std::string* path : {&cert_path, &key_path}) {
    auto exists = entryExists(*path);
    if (!exists) {
      return Err{std::move(exists).error()};
    }
    if (exists.value()) {
      return Err{*path + " already exists: refusing to overwrite it"};
    }
  }

  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) {
    return opensslFailure("cannot generate an EC P-256 key");
  }
  auto cert = makeCaCertificate(key.get(), common_name);
  if (!cert) {
    return Err{std::move(cert).error()};
  }

  // The key's PEM goes through secure memory, which is wiped when freed.
  BioPtr key_pem(BIO_new(BIO_s_secmem()));
  BioPtr cert_pem(BIO_new(BIO_s_mem()));
  if (!key_pem || !cert_pem) {
    return opensslFailure("cannot allocate PEM buffers");
  }
  // Unencrypted PKCS#8: the file mode protects it, and a passphrase would need a prompt.
  int key_encoded =
      PEM_write_bio_PrivateKey(key_pem.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  if (key_encoded != 1 || PEM_write_bio_X509(cert_pem.get(), cert->get()) != 1) {
    return opensslFailure("cannot encode the CA as PEM");
  }

  if (auto made = makeDirectories(dir); !made) {
    return Err{std::move(made).error()};
  }
  if (auto written = writeNewFile(key_path, bioContents(key_pem.get()), kKeyMode); !written) {
    return Err{std::move(written).error()};
  }
  if (auto written = writeNewFile(cert_path, bioContents(cert_pem.get()), kCertMode); !written) {
    ::unlink(key_path.c_str());
    return Err{std::move(written).error()};
  }
  if (auto synced = syncDirectory(dir); !synced) {
    ::unlink(cert_path.c_str());
    ::unlink(key_path.c_str());
    return Err{std::move(synced).error()};
  }
  return CertificateAuthority(std::move(cert).value(), std::move(key), std::move(cert_path));
}

CaResult CertificateAuthority::load(const std::string& dir) {
  ERR_clear_error();
  std::string cert_path = joinPath(dir, kCertFile);
  std::string key_path = joinPath(dir, kKeyFile);
  auto key = readKey(key_path);
  if (!key) {
    return Err{std::move(key).error()};
  }
  if (auto typed = checkKeyType(key_path, key->get()); !typed) {
    return Err{std::move(typed).error()};
  }
  auto cert = readCertificate(cert_path);
  if (!cert) {
    return Err{std::move(cert).error()};
  }
  if (auto checked = checkCertificate(cert_path, cert->get(), key_path, key->get()); !checked) {
    return Err{std::move(checked).error()};
  }
  return CertificateAuthority(std::move(cert).value(), std::move(key).value(),
                              std::move(cert_path));
}

CaResult CertificateAuthority::loadOrCreate(const std::string& dir, std::string_view common_name) {
  std::string cert_path = joinPath(dir, kCertFile);
  std::string key_path = joinPath(dir, kKeyFile);
  auto cert_exists = entryExists(cert_path);
  if (!cert_exists) {
    return Err{std::move(cert_exists).error()};
  }
  auto key_exists = entryExists(key_path);
  if (!key_exists) {
    return Err{std::move(key_exists).error()};
  }
  if (cert_exists.value() && key_exists.value()) {
    return load(dir);
  }
  if (!cert_exists.value() && !key_exists.value()) {
    return create(dir, common_name);
  }
  // Half a CA: most likely an interrupted copy or a deleted file. Making a new pair here would
  // destroy the half that exists, and the sandboxes may already trust its certificate.
  const std::string& present = cert_exists.value() ? cert_path : key_path;
  const std::string& missing = cert_exists.value() ? key_path : cert_path;
  return Err{missing + " is missing but " + present +
             " exists: restore the missing file, or remove both to create a new CA"};
}

}  // namespace sluice::certs
