#include "proxy/session/log_budget.h"

namespace sluice::proxy::session {

bool LogBudget::take(std::string_view key, std::uint64_t now_ms, std::uint64_t& suppressed) {
  auto it = entries_.find(std::string(key));
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxKeys) {
      entries_.clear();
    }
    entries_.emplace(std::string(key), Entry{now_ms, 0});
    suppressed = 0;
    return true;
  }
  Entry& entry = it->second;
  if (now_ms - entry.last_ms < kIntervalMs) {
    ++entry.suppressed;
    return false;
  }
  suppressed = entry.suppressed;
  entry = Entry{now_ms, 0};
  return true;
}

}  // namespace sluice::proxy::session
