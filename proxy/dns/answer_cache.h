#pragma once
// The resolver's memory: name -> the last result of looking it up, until it expires.
//
// Bounded: at most max_names entries. When full, expired entries go first (one sweep, repeated
// only once something can have expired since), then the least recently used one. A hit moves a
// name to the front. Not thread-safe: one per Resolver, one Resolver per loop.

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/string_map.h"
#include "proxy/dns/answer.h"

namespace sluice::proxy::dns {

class AnswerCache {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit AnswerCache(std::size_t max_names) : max_names_(max_names) {}
  AnswerCache(const AnswerCache&) = delete;
  AnswerCache& operator=(const AnswerCache&) = delete;

  // The entry for `name` if it is still fresh at `now`; an expired one is dropped.
  std::optional<LookupResult> find(std::string_view name, TimePoint now);
  // Keeps `result` for `name` until `expires`. An `expires` not after `now` stores nothing and
  // drops what was there: a TTL of 0 means "ask again next time".
  void store(std::string_view name, const LookupResult& result, TimePoint expires, TimePoint now);

  std::size_t size() const { return entries_.size(); }

 private:
  using Lru = std::list<const std::string*>;  // front: most recently used; points at map keys
  struct Entry {
    LookupResult result;
    TimePoint expires;
    Lru::iterator lru;
  };
  using Map = StringMap<Entry>;

  void erase(Map::iterator it);
  void makeRoom(TimePoint now);

  std::size_t max_names_;
  Map entries_;
  Lru lru_;
  // No entry expires before this: a sweep for expired entries before it would find none.
  TimePoint next_expiry_ = TimePoint::min();
};

}  // namespace sluice::proxy::dns
