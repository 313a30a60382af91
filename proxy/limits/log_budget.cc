#include "proxy/limits/log_budget.h"

namespace sluice::proxy::limits {

bool LogBudget::take(std::string_view key, std::uint64_t now_ms, std::uint64_t& suppressed) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= kMaxKeys && !entries_.contains(std::string(key))) {
    entries_.clear();
  }
  const auto [it, added] = entries_.try_emplace(std::string(key), Entry{now_ms, 0});
  if (added) {
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

}  // namespace sluice::proxy::limits
