#pragma once
// A budget for log lines a sandbox can cause at will (a client that refuses sluice's
// certificate and retries, docs/audit.md#errors): one line per key per interval,
// and the next one says how many were left out meanwhile. Shared by the workers (a lock: it is
// taken only when such a line is due). Its memory is bounded: past kMaxKeys keys it starts
// again (an old key may then log once early).

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/string_map.h"

namespace sluice::proxy::limits {

class LogBudget {
 public:
  static constexpr std::uint64_t kIntervalMs = 60'000;
  static constexpr std::size_t kMaxKeys = 4096;

  // Whether a line for `key` may go out at `now_ms`; if so, `suppressed` is how many lines for
  // it were left out since the last that went.
  bool take(std::string_view key, std::uint64_t now_ms, std::uint64_t& suppressed);
  // How many keys it holds now (at most kMaxKeys).
  std::size_t keys();

 private:
  struct Entry {
    std::uint64_t last_ms = 0;
    std::uint64_t suppressed = 0;
  };
  std::mutex mutex_;
  StringMap<Entry> entries_;  // a key is allocated only when it is new
};

}  // namespace sluice::proxy::limits
