#include "proxy/dns/answer_cache.h"

#include <algorithm>

namespace sluice::proxy::dns {

std::optional<LookupResult> AnswerCache::find(std::string_view name, TimePoint now) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return std::nullopt;
  }
  if (it->second.expires <= now) {
    erase(it);
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.result;
}

void AnswerCache::store(std::string_view name, const LookupResult& result, TimePoint expires,
                        TimePoint now) {
  auto it = entries_.find(name);
  if (expires <= now || max_names_ == 0) {
    if (it != entries_.end()) {
      erase(it);
    }
    return;
  }
  if (it != entries_.end()) {
    it->second.result = result;
    it->second.expires = expires;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  } else {
    makeRoom(now);
    auto [inserted, ok] = entries_.emplace(std::string(name), Entry{result, expires, {}});
    (void)ok;
    lru_.push_front(&inserted->first);
    inserted->second.lru = lru_.begin();
  }
  next_expiry_ = std::min(next_expiry_, expires);
}

void AnswerCache::erase(Map::iterator it) {
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void AnswerCache::makeRoom(TimePoint now) {
  if (entries_.size() < max_names_) {
    return;
  }
  // Sweeping is O(n); when everything is fresh, skip it until the first entry can expire, so
  // a cache full of live names costs O(1) per insert (a flood of distinct names).
  if (now >= next_expiry_) {
    TimePoint earliest = TimePoint::max();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.expires <= now) {
        auto dead = it++;
        erase(dead);
      } else {
        earliest = std::min(earliest, it->second.expires);
        ++it;
      }
    }
    next_expiry_ = earliest;
  }
  if (entries_.size() >= max_names_ && !lru_.empty()) {
    erase(entries_.find(*lru_.back()));
  }
}

}  // namespace sluice::proxy::dns
