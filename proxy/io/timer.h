#pragma once
// A timer on a libuv loop, one-shot or repeating. Same ownership contract as TcpStream:
// close(), then keep the object until the close callback has run.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace sluice::proxy::io {

class Timer {
 public:
  explicit Timer(uv_loop_t* loop);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // (Re)arms the timer: `fn` runs once after `delay`, unless stopped or re-armed first.
  void start(std::chrono::milliseconds delay, std::function<void()> fn);
  // (Re)arms the timer: `fn` runs every `period`, until stopped or re-armed.
  void startRepeating(std::chrono::milliseconds period, std::function<void()> fn);
  void stop();
  // The timer no longer keeps uv_run() going by itself.
  void unref() { uv_unref(reinterpret_cast<uv_handle_t*>(&timer_)); }
  void close(std::function<void()> on_closed);
  bool closed() const { return closed_; }

 private:
  static void onTimerCb(uv_timer_t* timer) noexcept;
  static void onCloseCb(uv_handle_t* handle) noexcept;

  uv_timer_t timer_{};
  std::function<void()> fn_;
  std::function<void()> on_closed_;
  bool repeating_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace sluice::proxy::io
