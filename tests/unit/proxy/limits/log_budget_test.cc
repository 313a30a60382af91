// The budget for log lines a sandbox can cause at will (refused certificates, refused requests):
// one line per key per interval, and the next one counts what was left out.
#include "proxy/limits/log_budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

namespace sluice::proxy::limits {
namespace {

constexpr std::uint64_t kMinute = LogBudget::kIntervalMs;

TEST(LogBudget, OneLinePerKeyPerIntervalThenTheCountOfWhatWasLeftOut) {
  LogBudget budget;
  std::uint64_t suppressed = 99;
  ASSERT_TRUE(budget.take("evil.test\nnot_allowed_host", 1000, suppressed));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(budget.take("evil.test\nnot_allowed_host", 1000 + kMinute - 1, suppressed));
  }
  // Another key has its own budget.
  EXPECT_TRUE(budget.take("evil.test\nip_denied", 2000, suppressed));
  EXPECT_TRUE(budget.take("other.test\nnot_allowed_host", 2000, suppressed));
  ASSERT_TRUE(budget.take("evil.test\nnot_allowed_host", 1000 + kMinute, suppressed));
  EXPECT_EQ(suppressed, 5u);
  // The count starts again with each line.
  EXPECT_FALSE(budget.take("evil.test\nnot_allowed_host", 1000 + kMinute + 1, suppressed));
  ASSERT_TRUE(budget.take("evil.test\nnot_allowed_host", 1000 + 2 * kMinute, suppressed));
  EXPECT_EQ(suppressed, 1u);
}

// Workers' loop clocks differ a little: an earlier reading is no time passed, not a wrap.
TEST(LogBudget, AnEarlierClockReadingIsNoTimePassed) {
  LogBudget budget;
  std::uint64_t suppressed = 0;
  ASSERT_TRUE(budget.take("k", 5000, suppressed));
  EXPECT_FALSE(budget.take("k", 4000, suppressed));
  EXPECT_FALSE(budget.take("k", 5000 + kMinute - 1, suppressed));
  EXPECT_TRUE(budget.take("k", 5000 + kMinute, suppressed));
  EXPECT_EQ(suppressed, 2u);
}

// Past kMaxKeys distinct keys (a sandbox inventing names) the memory does not grow: the budget
// starts again, so an old key may log once early, and never more often than that.
TEST(LogBudget, ManyKeysKeepMemoryBounded) {
  LogBudget budget;
  std::uint64_t suppressed = 0;
  for (std::size_t i = 0; i < 3 * LogBudget::kMaxKeys; ++i) {
    EXPECT_TRUE(budget.take("name-" + std::to_string(i), 1000, suppressed)) << i;
  }
  EXPECT_LE(budget.keys(), LogBudget::kMaxKeys);
}

TEST(LogBudget, WorkersShareOneBudget) {
  LogBudget budget;
  std::uint64_t taken[2] = {0, 0};
  auto work = [&](int w) {
    std::uint64_t suppressed = 0;
    for (int i = 0; i < 10000; ++i) {
      taken[w] += budget.take("shared", 1000, suppressed) ? 1 : 0;
    }
  };
  std::thread a(work, 0);
  std::thread b(work, 1);
  a.join();
  b.join();
  EXPECT_EQ(taken[0] + taken[1], 1u);
}

}  // namespace
}  // namespace sluice::proxy::limits
