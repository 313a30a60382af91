// RequestRate: a sandbox's token bucket grants exactly the burst, then the rate, whatever the
// clock does and however many threads ask.
#include "proxy/limits/request_rate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

namespace sluice::proxy::limits {
namespace {

constexpr std::uint64_t kSecond = 1000000000;
constexpr std::uint64_t kEndOfTime = std::numeric_limits<std::uint64_t>::max();

// At `at_ns`, take() is called `takes` times and `granted` of them succeed.
struct Step {
  std::uint64_t at_ns;
  int takes;
  int granted;
};

struct Row {
  const char* name;
  std::uint64_t per_second;
  std::uint64_t burst;
  std::vector<Step> steps;
};

TEST(RequestRate, Scripts) {
  const std::vector<Row> rows = {
      {"burst then refusal", 10, 5, {{0, 6, 5}, {0, 3, 0}}},
      {"refill after 1/rate seconds",
       10,
       5,
       {{0, 5, 5}, {kSecond / 10 - 1, 1, 0}, {kSecond / 10, 2, 1}, {2 * kSecond / 10, 2, 1}}},
      {"refill counts from the last take, not from whole seconds",
       1,
       1,
       {{0, 2, 1},
        {kSecond - 1, 1, 0},
        {kSecond, 2, 1},
        {5 * kSecond / 2, 1, 1},
        {3 * kSecond, 1, 0},
        {7 * kSecond / 2, 2, 1}}},
      {"partial refill", 10, 5, {{0, 5, 5}, {kSecond / 4, 5, 2}}},
      {"burst cap after a long idle", 10, 5, {{0, 5, 5}, {3600 * kSecond, 10, 5}}},
      {"burst smaller than the rate", 100, 1, {{0, 2, 1}, {kSecond, 5, 1}}},
      {"time going backwards grants nothing",
       10,
       5,
       {{10 * kSecond, 5, 5},
        {0, 3, 0},
        {10 * kSecond - 1, 1, 0},
        {10 * kSecond, 1, 0},
        {10 * kSecond + kSecond / 10, 2, 1}}},
      {"an earlier time after a full bucket sees the later takes",
       10,
       5,
       {{100 * kSecond, 1, 1}, {50 * kSecond, 10, 0}, {100 * kSecond, 5, 4}}},
      // 10^9 / 3 is not a whole number of nanoseconds: the tokens still come three a second.
      {"a rate that does not divide a second",
       3,
       1,
       {{0, 1, 1},
        {333333333, 1, 0},
        {333333334, 1, 1},
        {666666666, 1, 0},
        {666666667, 1, 1},
        {kSecond - 1, 1, 0},
        {kSecond, 1, 1},
        {100 * kSecond, 1, 1}}},
      {"rate 1", 1, 3, {{0, 4, 3}, {kSecond, 2, 1}, {10 * kSecond, 4, 3}}},
      {"rate 10^9: one token a nanosecond",
       1000000000,
       1000,
       {{0, 1001, 1000}, {1, 2, 1}, {1001, 1001, 1000}, {5 * kSecond, 1001, 1000}}},
      // 7 * 10^8 a second: 7 tokens every 10 ns, though no token takes a whole number of ns.
      {"rate 7 * 10^8", 700000000, 7, {{0, 8, 7}, {10, 8, 7}, {20, 8, 7}, {kSecond, 8, 7}}},
      {"huge gaps do not overflow",
       1,
       5,
       {{0, 5, 5}, {kEndOfTime - 10 * kSecond, 6, 5}, {kEndOfTime - 9 * kSecond, 2, 1}}},
      {"huge gaps at 10^9", 1000000000, 3, {{0, 4, 3}, {kEndOfTime / 2, 4, 3}}},
      {"a huge burst saturates instead of wrapping",
       1,
       kEndOfTime,
       {{0, 1000, 1000}, {kSecond, 1000, 1000}}},
      // The next TAT would not fit in 64 bits: refusing is the only answer that cannot wrap.
      {"the end of 64-bit time refuses", 1, 5, {{kEndOfTime - 1, 1, 0}, {kEndOfTime, 1, 0}}},
      {"zero rate and burst are clamped to one", 0, 0, {{0, 2, 1}, {kSecond, 2, 1}}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    RequestRate rate(row.per_second, row.burst);
    for (std::size_t i = 0; i < row.steps.size(); ++i) {
      const Step& step = row.steps[i];
      int granted = 0;
      for (int n = 0; n < step.takes; ++n) {
        granted += rate.take(step.at_ns) ? 1 : 0;
      }
      EXPECT_EQ(granted, step.granted) << "step " << i << " at " << step.at_ns << " ns";
    }
  }
}

// Two workers take at every step of a shared simulated clock, each with its own reading of it
// (so one often passes an earlier time than the other just did). Demand always exceeds the
// refill, so exactly the burst plus the refill up to the last instant is granted: no token is
// lost or granted twice under contention.
TEST(RequestRate, TwoThreadsGrantExactlyTheRate) {
  struct Load {
    const char* name;
    std::uint64_t per_second;
    std::uint64_t burst;
    std::uint64_t duration_ns;
    std::uint64_t step_ns;
    std::uint64_t expected;
  };
  const std::vector<Load> loads = {
      // 0.1 token a step, two takes a step per thread.
      {"10^6 a second for 0.1 s", 1000000, 100, kSecond / 10, 100, 100000 + 100},
      {"10^9 a second for 1 ms", 1000000000, 1000, kSecond / 1000, 1, 1000000 + 1000},
      {"3 a second for 100 s", 3, 2, 100 * kSecond, 1000000, 300 + 2},
  };
  for (const Load& load : loads) {
    SCOPED_TRACE(load.name);
    RequestRate rate(load.per_second, load.burst);
    std::latch start(2);
    std::vector<std::uint64_t> granted(2, 0);
    auto worker = [&](std::size_t id) {
      start.arrive_and_wait();
      std::uint64_t mine = 0;
      for (std::uint64_t t = 0; t <= load.duration_ns; t += load.step_ns) {
        mine += rate.take(t) ? 1 : 0;
        mine += rate.take(t) ? 1 : 0;
      }
      granted[id] = mine;
    };
    std::thread a(worker, 0);
    std::thread b(worker, 1);
    a.join();
    b.join();
    // Whatever is left at the last instant (one thread may have finished before the other's
    // last refill) is taken here, so the count is exact.
    std::uint64_t total = granted[0] + granted[1];
    while (rate.take(load.duration_ns)) {
      ++total;
    }
    EXPECT_EQ(total, load.expected);
  }
}

}  // namespace
}  // namespace sluice::proxy::limits
