// The loop handles modules above io/ use instead of libuv's: each calls back on the loop, never
// after close(), and closes so that the loop can close with no handle left.
#include "proxy/io/loop_handles.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <thread>
#include <vector>

#include "proxy/io/timer.h"
#include "tests/support/loop_driver.h"

namespace sluice::proxy::io {
namespace {

using namespace std::chrono_literals;

class LoopHandlesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  // Every test closes its handles and runs the loop dry before they go out of scope.
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open"; }
  bool runUntil(const std::function<bool()>& done) {
    return test_support::runLoopUntil(&loop_, done, 5000ms);
  }

  uv_loop_t loop_{};
};

TEST_F(LoopHandlesTest, AsyncSentFromAnotherThreadRunsOnTheLoop) {
  std::thread::id ran_on;
  int calls = 0;
  Async async(&loop_, [&] {
    ran_on = std::this_thread::get_id();
    ++calls;
  });
  std::thread sender([&] { async.send(); });
  sender.join();
  ASSERT_TRUE(runUntil([&] { return calls > 0; }));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  bool closed = false;
  async.close([&] { closed = true; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_TRUE(closed);
}

TEST_F(LoopHandlesTest, AsyncWithoutCallbackKeepsTheLoopAliveUntilClosed) {
  Async alive(&loop_, nullptr);
  Timer closer(&loop_);
  bool timer_ran = false;
  closer.start(10ms, [&] {
    timer_ran = true;
    alive.close(nullptr);
    closer.close(nullptr);
  });
  uv_run(&loop_, UV_RUN_DEFAULT);  // returns only once `alive` is closed
  EXPECT_TRUE(timer_ran);
  EXPECT_TRUE(alive.closed());
}

TEST_F(LoopHandlesTest, SignalArrivesOnTheLoopWithItsNumber) {
  int got = 0;
  Signal signal(&loop_, SIGUSR1, [&](int signum) { got = signum; });
  ASSERT_EQ(::raise(SIGUSR1), 0);
  ASSERT_TRUE(runUntil([&] { return got != 0; }));
  EXPECT_EQ(got, SIGUSR1);
  signal.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

TEST_F(LoopHandlesTest, UnrefdHandlesDoNotKeepTheLoopRunning) {
  Signal signal(&loop_, SIGUSR2, [](int) {});
  signal.unref();
  Check check(&loop_, [] {});
  check.unref();
  Timer timer(&loop_);
  timer.startRepeating(60s, [] {});
  timer.unref();
  const auto started = std::chrono::steady_clock::now();
  uv_run(&loop_, UV_RUN_DEFAULT);  // nothing referenced: returns at once
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  signal.close(nullptr);
  check.close(nullptr);
  timer.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

// An async wake-up is an I/O callback of the poll phase; the check runs right after that phase in
// the same turn, so each wake-up is seen by exactly one check before the next one is sent.
// (Timers are no clock for this: with UV_RUN_ONCE, libuv 1.44 runs due timers both before and
// after the poll, so two timer callbacks may share one check.)
TEST_F(LoopHandlesTest, CheckRunsAfterEachRoundOfCallbacks) {
  int wakeups = 0;
  int rounds = 0;
  bool woken_since_check = false;
  Async wake(&loop_, [&] {
    ++wakeups;
    woken_since_check = true;
  });
  Check check(&loop_, [&] {
    if (!woken_since_check) {
      return;
    }
    woken_since_check = false;
    if (++rounds < 3) {
      wake.send();
    }
  });
  wake.send();
  ASSERT_TRUE(runUntil([&] { return rounds == 3; }));
  EXPECT_EQ(wakeups, 3);
  EXPECT_FALSE(woken_since_check);
  wake.close(nullptr);
  check.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

TEST_F(LoopHandlesTest, RepeatingTimerRunsUntilStoppedAndOneShotOnce) {
  int repeats = 0;
  int once = 0;
  Timer repeating(&loop_);
  Timer one_shot(&loop_);
  repeating.startRepeating(1ms, [&] {
    if (++repeats == 5) {
      repeating.stop();
    }
  });
  one_shot.start(1ms, [&] { ++once; });
  ASSERT_TRUE(runUntil([&] { return repeats == 5 && once == 1; }));
  repeating.close(nullptr);
  one_shot.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(repeats, 5);
  EXPECT_EQ(once, 1);
}

TEST_F(LoopHandlesTest, NextTurnRunsAfterTheCallbackThatScheduledItOnce) {
  std::vector<const char*> log;
  NextTurn later(&loop_, [&] { log.push_back("later"); });
  Timer timer(&loop_);
  timer.start(1ms, [&] {
    later.schedule();
    later.schedule();  // again before it ran: still once
    log.push_back("timer returns");
  });
  ASSERT_TRUE(runUntil([&] { return log.size() >= 2; }));
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(log, (std::vector<const char*>{"timer returns", "later"}));
  EXPECT_FALSE(later.scheduled());
  later.close(nullptr);
  timer.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

TEST_F(LoopHandlesTest, NothingRunsAfterClose) {
  int calls = 0;
  NextTurn later(&loop_, [&] { ++calls; });
  later.schedule();
  later.close(nullptr);
  Async async(&loop_, [&] { ++calls; });
  async.send();
  async.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(calls, 0);
}

TEST_F(LoopHandlesTest, PollReportsAReadableDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  int events_seen = 0;
  Poll poll(&loop_, fds[0]);
  poll.start(UV_READABLE, [&](int status, int events) {
    EXPECT_EQ(status, 0);
    events_seen |= events;
    poll.stop();
  });
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  ASSERT_TRUE(runUntil([&] { return events_seen != 0; }));
  EXPECT_TRUE(events_seen & UV_READABLE);
  poll.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace sluice::proxy::io
