#pragma once
// The gateway's own DNS: c-ares 1.18 driven by one libuv loop, with a TTL cache.
//
// It resolves only names the policy already allowed (points 5 and 7 of docs/wire.md#the-invariant:
// the caller decides first), only through the configured servers, never through /etc/hosts, a
// search list, HOSTALIASES or c-ares' built-in "localhost" answers
// (docs/threat-model.md#what-the-resolver-reads): every lookup is two plain ares_query() calls, A
// and AAAA, for exactly the name given.
//
// Threading: one Resolver per loop, used only on that loop's thread. Nothing is shared.
//
// Lifetime:
//   Resolver r(loop, settings);
//   ... r.resolve(...) ...
//   r.close([&] { /* now r may be destroyed */ });   // then let the loop run
// close() cancels every lookup (no callback runs after it), destroys the c-ares channel and
// uv_close()s every handle; `done` runs from the last close callback, after which
// uv_loop_close() can succeed. Destroying the Resolver earlier (even without close()) is safe
// as long as the loop runs again: the destructor closes what is open and leaves the handles to
// the loop, which frees them; `done` then never runs.
//
// Budget: one lookup takes about settings.timeout at most. c-ares sends each question `tries`
// times to every server, doubling its per-try timeout after each round through the servers, so
// the worst case is per_try * servers * (2^tries - 1). With tries = 2 the resolver sets
// per_try = timeout / (3 * servers): one server and 2 s give 667 ms, then 1333 ms.
//
// Joining: concurrent lookups of one name share one A and one AAAA query (a flood of one name costs
// one query); each caller holds its own Lookup, and dropping it only forgets that caller.
//
// Results: the addresses of both families, A first; a lookup succeeds if either family has an
// address (an AAAA timeout does not spoil an A answer). With none, a Timeout/Refused/Failed of
// either family wins over NotFound, which wins over NoAddresses.
//
// Cache: positive answers for min(smallest TTL, max_ttl), a TTL of 0 not at all; NotFound and
// NoAddresses for min(max_ttl, 5 s); Timeout/Refused/Failed never. At most max_cached_names.

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "base/string_map.h"
#include "policy/config.h"
#include "proxy/dns/answer.h"
#include "proxy/dns/answer_cache.h"
#include "proxy/dns/answer_reader.h"

struct ares_channeldata;  // c-ares' channel; ares.h stays out of this header

namespace sluice::proxy::dns {

class Resolver {
  struct Query;

 public:
  static constexpr std::size_t kDefaultMaxCachedNames = 4096;
  static constexpr std::chrono::milliseconds kMaxNegativeTtl = kMaxNegativeAnswerTtl;
  static constexpr int kTries = 2;

  // settings.servers empty: the nameservers of /etc/resolv.conf, read once here; with none
  // there either, every lookup fails with Failed. No I/O happens until the first lookup.
  Resolver(uv_loop_t* loop, const policy::DnsSettings& settings,
           std::size_t max_cached_names = kDefaultMaxCachedNames);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Starts closing; see the header comment. Only the first call counts. `done` may destroy the
  // Resolver; it may be empty.
  void close(std::function<void()> done);

  // A pending lookup. Destroying it guarantees its callback never runs; that may happen inside
  // any callback, including its own or another Lookup's. Once the Resolver started closing, a
  // Lookup is inert and may be destroyed at any time, even after the Resolver.
  class Lookup {
   public:
    ~Lookup();
    Lookup(const Lookup&) = delete;
    Lookup& operator=(const Lookup&) = delete;

   private:
    friend class Resolver;
    Lookup() = default;

    Query* query_ = nullptr;  // null once delivered or cancelled
    Lookup* prev_ = nullptr;  // the query's waiters, in arrival order
    Lookup* next_ = nullptr;
    std::function<void(LookupResult)> callback_;
  };

  // Runs on the loop, never inside resolve(), at most once, only while the Lookup lives. It
  // must not throw (it runs under a C callback) and must not destroy the Resolver (close it).
  using Callback = std::function<void(LookupResult)>;

  // What resolve() gives back: a result available now (from the cache, or a name refused
  // without a query), or a pending Lookup whose callback brings the result later.
  using Resolution = std::variant<LookupResult, std::unique_ptr<Lookup>>;

  // `name` is a canonical host name (policy::canonicalizeHost: lower case, no trailing dot),
  // already allowed by policy. Anything else (an IP literal, a non-canonical spelling) fails
  // with Failed and sends nothing. After close(): Cancelled. `cb` is only kept when a Lookup is
  // returned.
  Resolution resolve(std::string_view name, Callback cb);

  struct Stats {
    std::uint64_t queries = 0;     // names sent to DNS (each is one A and one AAAA question)
    std::uint64_t cache_hits = 0;  // answered from the cache, positive or negative
    std::uint64_t joined = 0;      // lookups that joined a query already in flight
    std::uint64_t failures = 0;    // queries (and refused names) that ended in an error
  };
  const Stats& stats() const { return stats_; }

  // Names being looked up now (queries sent, answers not yet in); for metrics and tests.
  std::size_t inFlight() const { return in_flight_.size(); }

  // The servers in use, after the /etc/resolv.conf fallback.
  const std::vector<policy::Endpoint>& servers() const { return servers_; }

 private:
  void initChannel(const policy::DnsSettings& settings);
  void startQuery(Query& query);
  void finishQuery(Query& query);
  void deliverCompleted();
  void scheduleDelivery();
  void rearmTimer();
  void closeHandle(uv_handle_t* handle);

  static void onSocketState(void* data, int fd, int readable, int writable) noexcept;
  static void onPoll(uv_poll_t* poll, int status, int events) noexcept;
  static void onTimer(uv_timer_t* timer) noexcept;
  static void onDeliveryTimer(uv_timer_t* timer) noexcept;
  static void onHandleClosed(uv_handle_t* handle) noexcept;
  static void onAnswerA(void* arg, int status, int timeouts, unsigned char* abuf,
                        int alen) noexcept;
  static void onAnswerAaaa(void* arg, int status, int timeouts, unsigned char* abuf,
                           int alen) noexcept;

  uv_loop_t* loop_;
  ares_channeldata* channel_ = nullptr;  // null: init failed, or closed
  std::vector<policy::Endpoint> servers_;
  std::chrono::milliseconds max_ttl_;
  uv_timer_t* timer_ = nullptr;                // c-ares timeouts and retries
  uv_timer_t* delivery_timer_ = nullptr;       // delivers answers that arrived inside an ares call
  std::unordered_map<int, uv_poll_t*> polls_;  // by fd: erased the moment c-ares closes the fd
  std::unordered_set<uv_handle_t*> handles_;   // every handle not yet through its close_cb
  StringMap<std::unique_ptr<Query>> in_flight_;
  std::vector<std::unique_ptr<Query>> completed_;  // answered, waiting for delivery
  Query* starting_ = nullptr;  // the query resolve() is sending: answers for it stay in resolve()
  AnswerCache cache_;
  Stats stats_;
  bool closing_ = false;
  std::function<void()> done_;
};

}  // namespace sluice::proxy::dns
