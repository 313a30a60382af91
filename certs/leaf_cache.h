#pragma once
// The certificates sluice shows a sandbox: one leaf per host, minted by the sandbox's CA on
// first use and kept in a bounded LRU cache.
//
// Cost model (docs/threat-model.md#resource-exhaustion): the sandbox has ONE leaf key (EC P-256),
// generated when the cache is built and shared by every leaf, so a new host costs one signature,
// never a key generation. Minting happens only for a host the caller has already decided on:
// allowed, or refused in band (docs/wire.md#refusals-in-band), which is paid for from the
// sandbox's own limits. The decision comes first; this class makes none and knows no connection.
//
// Leaves are short-lived (docs/wire.md#tls-toward-the-sandbox): valid from an hour ago (tolerating
// a sandbox clock a little behind) for 24 hours, clamped to the CA's own validity, and re-minted
// when less than an hour remains.
//
// Thread-safety: every member function may be called from any thread at once. A leaf, once
// returned, is immutable and may be used by any number of threads (SSL_use_certificate only
// takes a reference).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/result.h"
#include "certs/ca.h"
#include "certs/openssl_ptr.h"
#include "certs/x509_util.h"

namespace sluice::certs {

struct Leaf {
  X509Ptr certificate;
  std::chrono::system_clock::time_point not_after;
};

class LeafCache {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  static constexpr std::chrono::hours kLifetime{24};
  static constexpr std::chrono::hours kBackdate{1};
  static constexpr std::chrono::hours kRenewBefore{1};

  // One per sandbox. Takes its own references to the CA's certificate and key (the CA object
  // need not outlive the cache) and generates the sandbox's leaf key. `capacity` (at least 1)
  // bounds the number of cached leaves. `clock` is the time source for minting and expiry
  // (tests inject one); it must be callable from any thread. Empty: the system clock.
  //
  // If the key cannot be generated (OpenSSL out of memory), the cache is built anyway and
  // every get() fails with that reason: the constructor cannot report it.
  explicit LeafCache(const CertificateAuthority& ca, std::size_t capacity = 1024, Clock clock = {});
  LeafCache(const LeafCache&) = delete;
  LeafCache& operator=(const LeafCache&) = delete;
  ~LeafCache();

  // The certificate for `host`: a canonical DNS name, or an IP literal's canonical text
  // (certificateHostKind() in certs/x509_util.h; then the SAN is an iPAddress). Anything else
  // is refused, as is minting with a CA outside its validity.
  //
  // A hit returns the cached object itself (pointer-equal across calls). A miss mints outside
  // the lock. Single flight: while one thread mints a host, other threads asking for the same
  // host wait for its result instead of minting a second certificate, so without evictions
  // each host is minted once per renewal. If that mint fails, the waiters try themselves.
  Result<std::shared_ptr<const Leaf>, std::string> get(std::string_view host);

  // The shared leaf key (EC P-256); null only if it could not be generated. Owned by the
  // cache; SSL_use_PrivateKey takes its own reference.
  EVP_PKEY* key() const { return leaf_key_.get(); }
  // The CA certificate leaves chain to. sluice sends the leaf alone: the sandbox trusts the
  // CA directly, and a chain would only add bytes to every handshake.
  X509* caCertificate() const { return ca_cert_.get(); }

  // hits: gets answered from the cache, including those that waited for another thread's
  // mint. misses: gets that minted (or tried to). minted: certificates signed.
  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t minted = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string host;
    std::shared_ptr<const Leaf> leaf;
  };
  using Lru = std::list<Entry>;  // most recently used first

  // Builds what every leaf shares: the key, issuer name, fixed extensions. Empty on success.
  std::string prepare(const CertificateAuthority& ca);
  Result<std::shared_ptr<const Leaf>, std::string> mint(
      std::string_view host, HostKind kind, std::chrono::system_clock::time_point now) const;
  // Whether a cached leaf is still worth handing out at `now`.
  bool fresh(const Leaf& leaf, std::chrono::system_clock::time_point now) const;
  // Inserts or replaces under the lock, then evicts beyond capacity.
  void storeLocked(std::string_view host, std::shared_ptr<const Leaf> leaf);

  // Set in the constructor, read-only afterwards: shared by minting threads without the lock.
  const std::size_t capacity_;
  const Clock clock_;
  X509Ptr ca_cert_;
  EvpPkeyPtr ca_key_;
  EvpPkeyPtr leaf_key_;
  const EVP_MD* digest_ = nullptr;
  X509NamePtr issuer_;
  std::vector<X509ExtensionPtr> fixed_extensions_;
  std::chrono::system_clock::time_point ca_not_before_;
  std::chrono::system_clock::time_point ca_not_after_;
  std::string setup_error_;  // non-empty: the cache cannot mint

  mutable std::mutex mutex_;
  std::condition_variable minted_;  // signalled whenever a mint ends, successfully or not
  Lru lru_;
  // Keys view the host strings inside lru_ nodes, which never move.
  std::unordered_map<std::string_view, Lru::iterator> index_;
  std::vector<std::string> minting_;  // hosts being minted now; at most one per thread
  Stats stats_;
};

}  // namespace sluice::certs
