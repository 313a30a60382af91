#pragma once
// What each origin of one sandbox chose (ALPN) the last time sluice dialled it offering h2,
// known to every worker.
//
// While a connection offering h2 is being dialled for an origin, the other requests for it wait
// and share the session it becomes (docs/wire.md#http2-toward-origins, "One dial for a burst").
// They wait for an origin known to choose h2, and for one not dialled yet (a burst of streams
// to an h2 origin then costs one connection from the first); not for one known to answer
// HTTP/1.1, whose requests would have waited for nothing. Known per worker only, as it once
// was, a burst on a worker that had not dialled the origin itself (the client's connection was
// another's) dialled one connection per stream, up to the connection's upstream budget.
//
// Shared by the workers (a mutex: asked only on the way to a dial, never by a request that
// finds a session or a pooled connection), one per sandbox (SandboxRuntime): nothing learnt for
// one sandbox changes what another's requests do. Bounded: past kCapacity origins it forgets
// them all, which costs the next burst to each a wait or its old dials, never correctness.

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

namespace sluice::proxy {

enum class OriginProtocol : std::uint8_t { Unknown, H2, Http1 };

class OriginProtocols {
 public:
  static constexpr std::size_t kCapacity = 4096;

  // `trust`: Generation::upstream_trust_id (an origin verified against another upstream.ca_file
  // is another origin); `host`: canonical H.
  void learn(std::uint64_t trust, std::string_view host, std::uint16_t port,
             OriginProtocol chose) {
    std::lock_guard lock(mutex_);
    auto it = chose_.find(OriginView{trust, host, port});
    if (it != chose_.end()) {
      it->second = chose;
      return;
    }
    if (chose_.size() >= kCapacity) {
      chose_.clear();
    }
    chose_.emplace(Origin{trust, std::string(host), port}, chose);
  }

  OriginProtocol chose(std::uint64_t trust, std::string_view host, std::uint16_t port) const {
    std::lock_guard lock(mutex_);
    auto it = chose_.find(OriginView{trust, host, port});
    return it == chose_.end() ? OriginProtocol::Unknown : it->second;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return chose_.size();
  }

 private:
  struct Origin {
    std::uint64_t trust;
    std::string host;
    std::uint16_t port;
  };
  struct OriginView {
    std::uint64_t trust;
    std::string_view host;
    std::uint16_t port;
  };
  // Ordered by view, so that asking allocates nothing.
  struct ByOrigin {
    using is_transparent = void;
    static OriginView view(const Origin& o) { return {o.trust, o.host, o.port}; }
    static OriginView view(const OriginView& v) { return v; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const OriginView x = view(a);
      const OriginView y = view(b);
      return std::tie(x.trust, x.port, x.host) < std::tie(y.trust, y.port, y.host);
    }
  };

  mutable std::mutex mutex_;
  std::map<Origin, OriginProtocol, ByOrigin> chose_;
};

}  // namespace sluice::proxy
