#pragma once
// The loop's other handles, for the modules above io/ that need them: waking a loop from
// another thread (Async), a process signal (Signal), work after each round of I/O callbacks
// (Check), work on a later turn of the loop (NextTurn), and readiness of a file descriptor that
// is not a stream (Poll: inotify). With TcpStream, TcpListener and Timer, these are every
// handle sluice makes outside proxy/dns/.
//
// Each one is made on the loop's thread and starts working at once. Same ownership contract as
// TcpStream: close() (only the first call counts; `on_closed` may be empty), then keep the
// object until `on_closed` has run; a callback never runs after close(). unref(): the handle
// no longer keeps uv_run() going by itself.

#include <uv.h>

#include <cassert>
#include <functional>

namespace sluice::proxy::io {

namespace detail {

// What every handle here shares: the embedded uv handle, and closing it.
template <class UvHandle>
class LoopHandle {
 public:
  LoopHandle(const LoopHandle&) = delete;
  LoopHandle& operator=(const LoopHandle&) = delete;

  void close(std::function<void()> on_closed) {
    if (closing_) {
      return;
    }
    closing_ = true;
    on_closed_ = std::move(on_closed);
    uv_close(raw(), &LoopHandle::onCloseCb);
  }
  bool closed() const { return closed_; }
  void unref() { uv_unref(raw()); }

 protected:
  LoopHandle() { handle_.data = this; }
  ~LoopHandle() { assert(closed_); }
  uv_handle_t* raw() { return reinterpret_cast<uv_handle_t*>(&handle_); }
  template <class Self>
  static Self* owner(UvHandle* handle) {
    return static_cast<Self*>(static_cast<LoopHandle*>(handle->data));
  }

  UvHandle handle_{};
  bool closing_ = false;

 private:
  static void onCloseCb(uv_handle_t* handle) noexcept {
    auto* self = static_cast<LoopHandle*>(handle->data);
    self->closed_ = true;
    if (self->on_closed_) {
      auto done = std::move(self->on_closed_);  // moved out: `done` may destroy the owner
      done();
    }
  }

  bool closed_ = false;
  std::function<void()> on_closed_;
};

}  // namespace detail

// `fn` runs on the loop after send(), from any thread; sends that come before the loop gets to
// it run `fn` once. An empty `fn` makes a handle that only keeps the loop alive until closed.
class Async : public detail::LoopHandle<uv_async_t> {
 public:
  Async(uv_loop_t* loop, std::function<void()> fn);
  // The one call that is safe from another thread, until close() (on the loop's thread) has
  // been called: the caller keeps the two apart.
  void send();

 private:
  static void onAsyncCb(uv_async_t* handle) noexcept;
  std::function<void()> fn_;
};

// `fn` runs on the loop each time `signum` arrives (libuv's process-wide handler). Closing the
// last Signal of a signal number restores its default action.
class Signal : public detail::LoopHandle<uv_signal_t> {
 public:
  Signal(uv_loop_t* loop, int signum, std::function<void(int signum)> fn);

 private:
  static void onSignalCb(uv_signal_t* handle, int signum) noexcept;
  std::function<void(int)> fn_;
};

// `fn` runs after each round of I/O callbacks of the loop.
class Check : public detail::LoopHandle<uv_check_t> {
 public:
  Check(uv_loop_t* loop, std::function<void()> fn);

 private:
  static void onCheckCb(uv_check_t* handle) noexcept;
  std::function<void()> fn_;
};

// `fn` runs once on the loop's next turn after schedule(), never inside the call that asked
// for it; while scheduled, the loop does not block waiting for I/O. Scheduling again before it
// ran changes nothing.
class NextTurn : public detail::LoopHandle<uv_idle_t> {
 public:
  NextTurn(uv_loop_t* loop, std::function<void()> fn);
  void schedule();
  bool scheduled() const { return scheduled_; }

 private:
  static void onIdleCb(uv_idle_t* handle) noexcept;
  std::function<void()> fn_;
  bool scheduled_ = false;
};

// `fn(status, events)` runs when `fd` (not owned, and not a stream libuv reads itself) is ready
// for the UV_READABLE / UV_WRITABLE `events` asked for by start(). `fd` must be pollable (an
// inotify descriptor is).
class Poll : public detail::LoopHandle<uv_poll_t> {
 public:
  using OnReady = std::function<void(int status, int events)>;
  Poll(uv_loop_t* loop, int fd);
  void start(int events, OnReady fn);
  void stop();

 private:
  static void onPollCb(uv_poll_t* handle, int status, int events) noexcept;
  OnReady fn_;
};

}  // namespace sluice::proxy::io
