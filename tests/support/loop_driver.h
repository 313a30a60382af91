#pragma once
// Driving a libuv loop from a unit test, on the test's own thread: until a condition holds
// (with a time limit as a safety net, never as a sleep), or while a blocking client runs on a
// helper thread against the server on the loop.

#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

namespace sluice::test_support {

// Runs `loop` until `done` holds or `limit` passes; returns done().
inline bool runLoopUntil(uv_loop_t* loop, const std::function<bool()>& done,
                         std::chrono::milliseconds limit) {
  bool expired = false;
  auto* guard = new uv_timer_t;
  uv_timer_init(loop, guard);
  guard->data = &expired;
  uv_timer_start(
      guard, [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; },
      static_cast<std::uint64_t>(limit.count()), 0);
  while (!done() && !expired) {
    uv_run(loop, UV_RUN_ONCE);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(guard),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  return done();
}

// Runs `client` on a helper thread while this thread runs `loop`; returns when it is done.
// `wake`: an async handle on `loop` (with a no-op callback) that ends the last uv_run.
inline void runLoopWithClient(uv_loop_t* loop, uv_async_t* wake,
                              const std::function<void()>& client) {
  std::atomic<bool> finished{false};
  std::thread t([&] {
    client();
    finished = true;
    uv_async_send(wake);
  });
  while (!finished) {
    uv_run(loop, UV_RUN_ONCE);
  }
  t.join();
}

}  // namespace sluice::test_support
