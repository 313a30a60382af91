// The worker's deferred-delete list: an object that hands itself over from a callback of its
// own (a session from the close callback of its last handle) is not freed until that callback
// has returned, and is freed on the loop's next turn without waiting for I/O.
#include "proxy/io/deferred_delete.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <memory>
#include <vector>

#include "proxy/io/timer.h"
#include "tests/support/loop_driver.h"

namespace sluice::proxy::io {
namespace {

using namespace std::chrono_literals;

// Shaped like a session: it owns a handle, and when that handle's close callback runs it hands
// itself to its owner for deletion, then goes on using its members, as code below such a
// callback may.
class SelfClosing {
 public:
  SelfClosing(uv_loop_t* loop, DeferredDelete<SelfClosing>& list,
              std::unique_ptr<SelfClosing>& slot, std::vector<int>& log, int id)
      : timer_(loop), list_(list), slot_(slot), log_(log), id_(id) {}
  ~SelfClosing() { log_.push_back(-id_); }

  void close() {
    timer_.close([this] {
      list_.add(std::move(slot_));
      // Still this object's code: freed inside add(), this would touch freed memory.
      log_.push_back(id_);
    });
  }

 private:
  Timer timer_;
  DeferredDelete<SelfClosing>& list_;
  std::unique_ptr<SelfClosing>& slot_;
  std::vector<int>& log_;
  int id_;
};

class DeferredDeleteTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override {
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  uv_loop_t loop_{};
};

TEST_F(DeferredDeleteTest, ObjectHandedOverInItsOwnCloseCallbackOutlivesTheCallback) {
  std::vector<int> log;
  std::size_t freed = 0;
  DeferredDelete<SelfClosing> list(&loop_, [&](std::size_t n) { freed += n; });
  std::unique_ptr<SelfClosing> a;
  std::unique_ptr<SelfClosing> b;
  a = std::make_unique<SelfClosing>(&loop_, list, a, log, 1);
  b = std::make_unique<SelfClosing>(&loop_, list, b, log, 2);
  a->close();
  b->close();
  // One turn runs both close callbacks: each object is handed over, and lives past it.
  uv_run(&loop_, UV_RUN_NOWAIT);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_GT(log[0], 0);
  EXPECT_GT(log[1], 0);
  EXPECT_EQ(list.pending(), 2u);
  EXPECT_EQ(freed, 0u);
  // The next turn frees them in the order they were handed over (libuv runs close callbacks
  // in its own order), and does not wait for I/O to do it.
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(log, (std::vector<int>{log[0], log[1], -log[0], -log[1]}));
  EXPECT_EQ(list.pending(), 0u);
  EXPECT_EQ(freed, 2u);
  bool closed = false;
  list.close([&] { closed = true; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_TRUE(closed);
}

TEST_F(DeferredDeleteTest, TheLoopDoesNotBlockWhileObjectsArePending) {
  std::vector<int> log;
  DeferredDelete<SelfClosing> list(&loop_);
  std::unique_ptr<SelfClosing> a;
  a = std::make_unique<SelfClosing>(&loop_, list, a, log, 1);
  Timer far(&loop_);  // keeps the loop alive for a minute: a blocking turn would wait for it
  far.start(60s, [] {});
  a->close();
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(test_support::runLoopUntil(&loop_, [&] { return log.size() == 2; }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  far.close(nullptr);
  list.close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);  // the handles close before they go out of scope
}

TEST_F(DeferredDeleteTest, CloseFreesWhatIsPendingFirst) {
  std::vector<int> log;
  DeferredDelete<SelfClosing> list(&loop_);
  std::unique_ptr<SelfClosing> a;
  a = std::make_unique<SelfClosing>(&loop_, list, a, log, 1);
  a->close();
  uv_run(&loop_, UV_RUN_NOWAIT);  // handed over, not yet freed
  ASSERT_EQ(log, (std::vector<int>{1}));
  list.close(nullptr);
  EXPECT_EQ(log, (std::vector<int>{1, -1}));
  EXPECT_EQ(list.pending(), 0u);
  uv_run(&loop_, UV_RUN_DEFAULT);
}

}  // namespace
}  // namespace sluice::proxy::io
