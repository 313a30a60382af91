#pragma once
// The request rate of one sandbox (limits.per_sandbox.requests_per_second and request_burst,
// or the sandbox's own `limits`): a token bucket shared by every worker thread that serves the
// sandbox. A request that finds the bucket empty is refused with 429 `rate_limited`
// (docs/wire.md#limits-and-timeouts), so one sandbox flooding the gateway cannot starve the others.
//
// The bucket holds at most `burst` tokens and gains `per_second` a second; take() removes one.
// It is the GCRA formulation: one atomic word holds the theoretical arrival time of the next
// request, so take() is a short lock-free CAS loop with no allocation, no lock and no clock
// read. The caller passes the time (monotonic nanoseconds; tests pass their own), so threads
// may pass slightly different times in any order: an earlier time than one already seen never
// grants more than the later one did, and the bucket never holds more than `burst`.

#include <atomic>
#include <cstdint>

namespace sluice::proxy::limits {

class RequestRate {
 public:
  // 1 <= per_second <= 10^9 and burst >= 1, as the config loader guarantees; values outside
  // are clamped into range rather than trusted.
  RequestRate(std::uint64_t per_second, std::uint64_t burst);
  RequestRate(const RequestRate&) = delete;
  RequestRate& operator=(const RequestRate&) = delete;

  // Whether a request at `now_ns` may go ahead; if so, its token is taken. Thread-safe.
  [[nodiscard]] bool take(std::uint64_t now_ns);

 private:
  // Time in ticks of 1 / (per_second * cost_) seconds, one token every cost_ ticks: a whole
  // number of ticks per token keeps the long-run rate exact even where 10^9 / per_second is
  // not a whole number of nanoseconds.
  std::uint64_t ticks_per_second_;  // per_second * cost_: at most 10^9, more than half of it
  std::uint64_t cost_;              // ticks per token: 10^9 / per_second, rounded down
  std::uint64_t allowance_;         // (burst - 1) * cost_ (saturated): how far TAT may lead now
  // The theoretical arrival time in ticks: when the bucket would be full again. 0 (the
  // distant past) is a full bucket.
  std::atomic<std::uint64_t> tat_{0};
};

}  // namespace sluice::proxy::limits
