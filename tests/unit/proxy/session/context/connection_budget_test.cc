// ConnectionBudget: the bounds every codec's requests draw from (docs/wire.md#http2). Pure
// arithmetic: windows halved from what is left and never under the floor, answers held toward
// the client, and upstream connections handed to waiters in order.
#include "proxy/session/context/connection_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace sluice::proxy::session {
namespace {

constexpr std::size_t KiB = 1024;

TEST(ConnectionBudget, WindowsAreHalvesOfWhatIsLeftAndNeverUnderTheFloor) {
  ConnectionBudget b;
  std::vector<std::size_t> windows;
  for (int i = 0; i < 10; ++i) {
    windows.push_back(b.grantWindow());
  }
  EXPECT_EQ(windows, (std::vector<std::size_t>{256 * KiB, 128 * KiB, 64 * KiB, 32 * KiB,
                                               16 * KiB, 8 * KiB, 4 * KiB, 4 * KiB, 4 * KiB,
                                               4 * KiB}));
  // A hundred streams promise at most the budget plus the floor each.
  for (int i = 10; i < 100; ++i) {
    b.grantWindow();
  }
  EXPECT_LE(b.granted(), ConnectionBudget::kWindowBytes + 100 * ConnectionBudget::kMinWindow);
}

TEST(ConnectionBudget, AWindowGivenBackIsGrantedAgain) {
  ConnectionBudget b;
  const std::size_t first = b.grantWindow();
  EXPECT_EQ(first, ConnectionBudget::kMaxWindow);
  b.returnWindow(first);
  EXPECT_EQ(b.granted(), 0u);
  EXPECT_EQ(b.grantWindow(), ConnectionBudget::kMaxWindow) << "one request at a time: the most";
  b.returnWindow(10 * ConnectionBudget::kMaxWindow);  // (never below zero)
  EXPECT_EQ(b.granted(), 0u);
}

TEST(ConnectionBudget, HeldAnswersFillItAndReleasingEmptiesIt) {
  ConnectionBudget b;
  b.hold(ConnectionBudget::kHeldBytes - 1);
  EXPECT_FALSE(b.full());
  b.hold(1);
  EXPECT_TRUE(b.full());
  b.release(2 * ConnectionBudget::kHeldBytes);  // (never below zero)
  EXPECT_EQ(b.held(), 0u);
  EXPECT_FALSE(b.full());
}

struct Waiter final : UpstreamWaiter {
  void onUpstreamFree() override { ++freed; }
  int freed = 0;
};

TEST(ConnectionBudget, UpstreamsPastTheBoundWaitInOrderAndPassOn) {
  ConnectionBudget b;
  Waiter holders[ConnectionBudget::kUpstreams];
  for (Waiter& w : holders) {
    EXPECT_TRUE(b.takeUpstream(w));
  }
  Waiter first, second, gone;
  EXPECT_FALSE(b.takeUpstream(first));
  EXPECT_FALSE(b.takeUpstream(gone));
  EXPECT_FALSE(b.takeUpstream(second));
  b.stopWaiting(gone);  // its request ended while it waited
  b.giveUpstream();
  EXPECT_EQ((std::vector{first.freed, second.freed, gone.freed}), (std::vector{1, 0, 0}));
  b.giveUpstream();
  EXPECT_EQ((std::vector{first.freed, second.freed, gone.freed}), (std::vector{1, 1, 0}));
  EXPECT_EQ(b.upstreams(), ConnectionBudget::kUpstreams) << "handed on, not given back";
  b.giveUpstream();
  EXPECT_EQ(b.upstreams(), ConnectionBudget::kUpstreams - 1);
}

}  // namespace
}  // namespace sluice::proxy::session
