#include "certs/leaf_cache.h"

#include <algorithm>
#include <ctime>
#include <optional>
#include <utility>

#include <openssl/asn1.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "certs/openssl_error.h"

namespace sluice::certs {

namespace {

using std::chrono::system_clock;
using TimePoint = system_clock::time_point;
using LeafResult = Result<std::shared_ptr<const Leaf>, std::string>;

constexpr std::size_t kMaxCommonNameLength = 64;  // ub-common-name, RFC 5280 appendix A.1

// `host` came from the caller and may hold anything; it ends up in logs.
std::string printable(std::string_view text) {
  constexpr std::size_t kMaxShown = 80;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text.substr(0, kMaxShown)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte > 0x20 && byte < 0x7f && byte != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  if (text.size() > kMaxShown) {
    out += "...";
  }
  return out;
}

std::optional<TimePoint> toTimePoint(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) {
    return std::nullopt;
  }
  return system_clock::from_time_t(::timegm(&tm));
}

std::string formatUtc(TimePoint t) {
  std::time_t seconds = system_clock::to_time_t(t);
  std::tm tm{};
  char buf[32];
  if (::gmtime_r(&seconds, &tm) == nullptr ||
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return "(unrepresentable time)";
  }
  return buf;
}

// The digest leaves are signed with: SHA-384 for a P-384 CA (the CA/B Forum pairs P-384 with
// SHA-384), SHA-256 for P-256 and RSA keys (the default digest OpenSSL would pick for them).
const EVP_MD* digestFor(EVP_PKEY* ca_key) {
  if (EVP_PKEY_is_a(ca_key, "EC")) {
    char group[64] = {};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(ca_key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                       &len) == 1 &&
        std::string_view(group, len) == "secp384r1") {
      return EVP_sha384();
    }
  }
  return EVP_sha256();
}

// authorityKeyIdentifier keyid: the CA's subjectKeyIdentifier, so verifiers pick the right
// issuer when several share a name. An operator's CA may lack the extension; then the SHA-1
// of its public key (RFC 5280 4.2.1.2 method 1, what "subjectKeyIdentifier=hash" would have
// said). Verifiers compare the two only when the issuer has one, so this never mismatches.
X509_EXTENSION* makeAuthorityKeyId(X509* ca_cert) {
  AuthorityKeyIdPtr akid(AUTHORITY_KEYID_new());
  if (!akid) {
    return nullptr;
  }
  if (const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(ca_cert); ski != nullptr) {
    akid->keyid = ASN1_OCTET_STRING_dup(ski);
  } else {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (X509_pubkey_digest(ca_cert, EVP_sha1(), md, &md_len) != 1) {
      return nullptr;
    }
    akid->keyid = ASN1_OCTET_STRING_new();
    if (akid->keyid != nullptr &&
        ASN1_OCTET_STRING_set(akid->keyid, md, static_cast<int>(md_len)) != 1) {
      return nullptr;
    }
  }
  if (akid->keyid == nullptr) {
    return nullptr;
  }
  return X509V3_EXT_i2d(NID_authority_key_identifier, 0, akid.get());
}

// subjectAltName built as a structure, not through the config-string parser, so that no
// character of `host` is ever interpreted. `host` was checked by certificateHostKind().
bool addSubjectAltName(X509* cert, std::string_view host, HostKind kind, bool critical) {
  GeneralNamePtr name(GENERAL_NAME_new());
  if (!name) {
    return false;
  }
  if (kind == HostKind::DnsName) {
    ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
    if (dns == nullptr) {
      return false;
    }
    GENERAL_NAME_set0_value(name.get(), GEN_DNS, dns);
    if (ASN1_STRING_set(dns, host.data(), static_cast<int>(host.size())) != 1) {
      return false;
    }
  } else {
    std::string text(host);  // a2i_IPADDRESS wants a C string; `host` holds no NUL
    ASN1_OCTET_STRING* ip = a2i_IPADDRESS(text.c_str());
    if (ip == nullptr) {
      return false;
    }
    GENERAL_NAME_set0_value(name.get(), GEN_IPADD, ip);
  }
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names || sk_GENERAL_NAME_push(names.get(), name.get()) <= 0) {
    return false;
  }
  name.release();  // the stack owns it now
  return X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), critical ? 1 : 0,
                           X509V3_ADD_DEFAULT) == 1;
}

// Round-trips a freshly signed certificate through DER. The parsed copy caches its encoding,
// so every handshake that sends it copies bytes instead of re-encoding the structure, and
// nothing in it is computed lazily later by whichever thread happens to touch it first.
X509Ptr reparse(X509* cert) {
  unsigned char* der = nullptr;
  int len = i2d_X509(cert, &der);
  if (len <= 0) {
    return nullptr;
  }
  OpensslBytesPtr owned(der);
  const unsigned char* p = der;
  X509Ptr parsed(d2i_X509(nullptr, &p, len));
  if (!parsed) {
    return nullptr;
  }
  // Computes and caches the decoded extensions now, in the minting thread.
  if ((X509_get_extension_flags(parsed.get()) & EXFLAG_INVALID) != 0) {
    return nullptr;
  }
  return parsed;
}

}  // namespace

LeafCache::LeafCache(const CertificateAuthority& ca, std::size_t capacity, Clock clock)
    : capacity_(std::max<std::size_t>(capacity, 1)),
      clock_(clock ? std::move(clock) : Clock([] { return system_clock::now(); })) {
  setup_error_ = prepare(ca);
  ERR_clear_error();  // prepare() reported what it needed; leave this thread's queue clean
}

LeafCache::~LeafCache() = default;

std::string LeafCache::prepare(const CertificateAuthority& ca) {
  ERR_clear_error();
  if (ca.certificate() == nullptr || ca.key() == nullptr) {
    return "leaf cache: the CA has no certificate or key";
  }
  // Own references: the cache may outlive the CertificateAuthority object it was built from.
  if (X509_up_ref(ca.certificate()) != 1) {
    return opensslFailure("leaf cache: cannot reference the CA certificate").error;
  }
  ca_cert_.reset(ca.certificate());
  if (EVP_PKEY_up_ref(ca.key()) != 1) {
    return opensslFailure("leaf cache: cannot reference the CA key").error;
  }
  ca_key_.reset(ca.key());

  auto not_before = toTimePoint(X509_get0_notBefore(ca_cert_.get()));
  auto not_after = toTimePoint(X509_get0_notAfter(ca_cert_.get()));
  if (!not_before || !not_after) {
    return opensslFailure("leaf cache: unreadable CA validity").error;
  }
  ca_not_before_ = *not_before;
  ca_not_after_ = *not_after;

  // A copy of the issuer name, encoded now: X509_set_issuer_name() copies it per leaf, and a
  // copy never re-encodes (a name flagged as modified would, which is a write).
  issuer_.reset(X509_NAME_dup(X509_get_subject_name(ca_cert_.get())));
  if (!issuer_) {
    return opensslFailure("leaf cache: cannot copy the CA subject").error;
  }
  digest_ = digestFor(ca_key_.get());

  leaf_key_.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!leaf_key_) {
    return opensslFailure("leaf cache: cannot generate the leaf key").error;
  }

  // The extensions every leaf carries, built once. subjectKeyIdentifier "hash" reads the
  // public key from a subject certificate: a scratch one that holds only the leaf key.
  X509Ptr scratch(X509_new());
  if (!scratch || X509_set_pubkey(scratch.get(), leaf_key_.get()) != 1) {
    return opensslFailure("leaf cache: cannot prepare the key identifier").error;
  }
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, ca_cert_.get(), scratch.get(), nullptr, nullptr, 0);
  const std::pair<int, const char*> extensions[] = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      // ECDSA signs; keyEncipherment is for RSA key transport, which this key cannot do.
      {NID_key_usage, "critical,digitalSignature"},
      {NID_ext_key_usage, "serverAuth"},
      {NID_subject_key_identifier, "hash"},
  };
  for (const auto& [nid, value] : extensions) {
    X509ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    if (!ext) {
      return opensslFailure(std::string("leaf cache: cannot build ") + OBJ_nid2sn(nid)).error;
    }
    fixed_extensions_.push_back(std::move(ext));
  }
  X509ExtensionPtr akid(makeAuthorityKeyId(ca_cert_.get()));
  if (!akid) {
    return opensslFailure("leaf cache: cannot build authorityKeyIdentifier").error;
  }
  fixed_extensions_.push_back(std::move(akid));
  return {};
}

LeafResult LeafCache::mint(std::string_view host, HostKind kind, TimePoint now) const {
  ERR_clear_error();  // so that the errors reported below are ours
  const std::string what = "cannot mint a certificate for " + std::string(host);

  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1 || !setRandomSerial(cert.get())) {
    return opensslFailure(what + ": serial");
  }

  // Whole seconds: what the certificate can say, and what Leaf::not_after must equal.
  auto now_s = std::chrono::floor<std::chrono::seconds>(now);
  TimePoint not_before = std::max<TimePoint>(now_s - kBackdate, ca_not_before_);
  TimePoint not_after = std::min<TimePoint>(now_s + kLifetime, ca_not_after_);
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()), system_clock::to_time_t(not_before)) ==
          nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), system_clock::to_time_t(not_after)) ==
          nullptr) {
    return opensslFailure(what + ": validity");
  }

  // CN only when it fits; then the SAN alone names the host, and RFC 5280 4.2.1.6 wants it
  // critical when the subject is empty.
  bool with_cn = host.size() <= kMaxCommonNameLength;
  if (with_cn) {
    const auto* cn = reinterpret_cast<const unsigned char*>(host.data());
    if (X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC, cn,
                                   static_cast<int>(host.size()), -1, 0) != 1) {
      return opensslFailure(what + ": subject");
    }
  }
  if (X509_set_issuer_name(cert.get(), issuer_.get()) != 1 ||
      X509_set_pubkey(cert.get(), leaf_key_.get()) != 1) {
    return opensslFailure(what + ": issuer or key");
  }
  for (const X509ExtensionPtr& ext : fixed_extensions_) {
    if (X509_add_ext(cert.get(), ext.get(), -1) != 1) {  // adds a copy
      return opensslFailure(what + ": extensions");
    }
  }
  if (!addSubjectAltName(cert.get(), host, kind, !with_cn)) {
    return opensslFailure(what + ": subjectAltName");
  }
  if (X509_sign(cert.get(), ca_key_.get(), digest_) <= 0) {
    return opensslFailure(what + ": signature");
  }
  X509Ptr parsed = reparse(cert.get());
  if (!parsed) {
    return opensslFailure(what + ": re-encoding");
  }
  auto leaf = std::make_shared<Leaf>();
  leaf->certificate = std::move(parsed);
  leaf->not_after = not_after;
  return std::shared_ptr<const Leaf>(std::move(leaf));
}

bool LeafCache::fresh(const Leaf& leaf, TimePoint now) const {
  if (now >= leaf.not_after) {
    return false;
  }
  // Renew in the last hour, unless the CA's own expiry is what ends the leaf: a new one could
  // not last longer, and re-minting on every request would only burn CPU.
  return leaf.not_after - now >= kRenewBefore || leaf.not_after >= ca_not_after_;
}

void LeafCache::storeLocked(std::string_view host, std::shared_ptr<const Leaf> leaf) {
  if (auto it = index_.find(host); it != index_.end()) {
    it->second->leaf = std::move(leaf);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.push_front(Entry{std::string(host), std::move(leaf)});
  index_.emplace(lru_.front().host, lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().host);
    lru_.pop_back();
  }
}

LeafResult LeafCache::get(std::string_view host) {
  std::optional<HostKind> kind = certificateHostKind(host);
  if (!kind) {
    return Err{"refusing to mint a certificate for '" + printable(host) +
               "': not a canonical DNS name or IP literal"};
  }
  if (!setup_error_.empty()) {
    return Err{setup_error_};
  }
  const TimePoint now = clock_();
  if (now >= ca_not_after_) {
    return Err{"the sandbox CA expired at " + formatUtc(ca_not_after_) +
               ": refusing to mint certificates (replace the CA)"};
  }
  if (now < ca_not_before_) {
    return Err{"the sandbox CA is not valid before " + formatUtc(ca_not_before_) +
               ": refusing to mint certificates (check the clock)"};
  }

  std::unique_lock lock(mutex_);
  for (;;) {
    if (auto it = index_.find(host); it != index_.end() && fresh(*it->second->leaf, now)) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->leaf;
    }
    if (std::find(minting_.begin(), minting_.end(), host) == minting_.end()) {
      break;
    }
    minted_.wait(lock);  // another thread is minting this host: take its result
  }
  ++stats_.misses;
  minting_.emplace_back(host);
  lock.unlock();

  // Whatever happens below (an exception included), the host leaves minting_ and the
  // waiters wake up; otherwise they would wait forever.
  struct MintingDone {
    LeafCache& cache;
    std::string_view host;
    ~MintingDone() {
      {
        std::lock_guard relock(cache.mutex_);
        cache.minting_.erase(std::find(cache.minting_.begin(), cache.minting_.end(), host));
      }
      cache.minted_.notify_all();
    }
  } done{*this, host};

  LeafResult leaf = mint(host, *kind, now);
  if (leaf) {
    std::lock_guard relock(mutex_);
    ++stats_.minted;
    storeLocked(host, leaf.value());
  }
  return leaf;
}

LeafCache::Stats LeafCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace sluice::certs
