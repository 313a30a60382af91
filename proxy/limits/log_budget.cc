#include "proxy/limits/log_budget.h"

namespace sluice::proxy::limits {

bool LogBudget::take(std::string_view key, std::uint64_t now_ms, std::uint64_t& suppressed) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxKeys) {
      entries_.clear();
    }
    entries_.emplace(std::string(key), Entry{now_ms, 0});
    suppressed = 0;
    return true;
  }
  Entry& entry = it->second;
  // (Each worker's loop has its own clock reading: one may be a little behind another's.)
  const std::uint64_t elapsed = now_ms > entry.last_ms ? now_ms - entry.last_ms : 0;
  if (elapsed < kIntervalMs) {
    ++entry.suppressed;
    return false;
  }
  suppressed = entry.suppressed;
  entry = Entry{now_ms, 0};
  return true;
}

std::size_t LogBudget::keys() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace sluice::proxy::limits
