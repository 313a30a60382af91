#include "proxy/limits/request_rate.h"

#include <algorithm>
#include <limits>

namespace sluice::proxy::limits {
namespace {

constexpr std::uint64_t kNsPerSecond = 1000000000;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// take() runs on every request of every worker: it must never wait on a lock.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

}  // namespace

RequestRate::RequestRate(std::uint64_t per_second, std::uint64_t burst) {
  per_second = std::clamp<std::uint64_t>(per_second, 1, kNsPerSecond);
  burst = std::max<std::uint64_t>(burst, 1);
  // The largest whole number of ticks per token with ticks no shorter than a nanosecond: the
  // time conversion in take() then fits 64 bits, and a tick lasts from 1 ns to under 2 ns at
  // every rate, so rounding the time down to a tick costs no visible precision.
  cost_ = kNsPerSecond / per_second;
  ticks_per_second_ = per_second * cost_;
  // A burst so large that the product overflows is no limit on bursts: saturate, never wrap.
  allowance_ = burst - 1 > kMax / cost_ ? kMax : (burst - 1) * cost_;
}

bool RequestRate::take(std::uint64_t now_ns) {
  // now_ns * ticks_per_second_ / 10^9, rounded down, without a 128-bit product: whole seconds
  // times at most 10^9 fit 64 bits for any now_ns, and so does the sum, which is <= now_ns.
  const std::uint64_t now = (now_ns / kNsPerSecond) * ticks_per_second_ +
                            (now_ns % kNsPerSecond) * ticks_per_second_ / kNsPerSecond;
  std::uint64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    // A TAT in the past is a full bucket: idle time beyond that earns nothing. A `now` earlier
    // than one another thread passed only makes the lead of TAT look longer: it can refuse a
    // request a moment early, never grant an extra one.
    const std::uint64_t start = std::max(tat, now);
    // The second test is the end of 64-bit time (or of a burst too big to count): a TAT that
    // cannot be written without wrapping refuses, where wrapping would grant without end.
    if (start - now > allowance_ || start > kMax - cost_) {
      return false;
    }
    // Relaxed: the word guards no other data; the CAS alone orders the takes.
    if (tat_.compare_exchange_weak(tat, start + cost_, std::memory_order_relaxed)) {
      return true;
    }
  }
}

}  // namespace sluice::proxy::limits
