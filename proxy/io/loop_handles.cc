#include "proxy/io/loop_handles.h"

namespace sluice::proxy::io {

Async::Async(uv_loop_t* loop, std::function<void()> fn) : fn_(std::move(fn)) {
  uv_async_init(loop, &handle_, &Async::onAsyncCb);
}

void Async::send() { uv_async_send(&handle_); }

void Async::onAsyncCb(uv_async_t* handle) noexcept {
  auto* self = owner<Async>(handle);
  if (!self->closing_ && self->fn_) {
    self->fn_();
  }
}

Signal::Signal(uv_loop_t* loop, int signum, std::function<void(int)> fn) : fn_(std::move(fn)) {
  uv_signal_init(loop, &handle_);
  uv_signal_start(&handle_, &Signal::onSignalCb, signum);
}

void Signal::onSignalCb(uv_signal_t* handle, int signum) noexcept {
  auto* self = owner<Signal>(handle);
  if (!self->closing_) {
    self->fn_(signum);
  }
}

Check::Check(uv_loop_t* loop, std::function<void()> fn) : fn_(std::move(fn)) {
  uv_check_init(loop, &handle_);
  uv_check_start(&handle_, &Check::onCheckCb);
}

void Check::onCheckCb(uv_check_t* handle) noexcept {
  auto* self = owner<Check>(handle);
  if (!self->closing_) {
    self->fn_();
  }
}

NextTurn::NextTurn(uv_loop_t* loop, std::function<void()> fn) : fn_(std::move(fn)) {
  uv_idle_init(loop, &handle_);
}

void NextTurn::schedule() {
  if (closing_ || scheduled_) {
    return;
  }
  scheduled_ = true;
  uv_idle_start(&handle_, &NextTurn::onIdleCb);
}

void NextTurn::onIdleCb(uv_idle_t* handle) noexcept {
  auto* self = owner<NextTurn>(handle);
  uv_idle_stop(handle);
  self->scheduled_ = false;
  if (!self->closing_) {
    self->fn_();
  }
}

Poll::Poll(uv_loop_t* loop, int fd) { uv_poll_init(loop, &handle_, fd); }

void Poll::start(int events, OnReady fn) {
  if (closing_) {
    return;
  }
  fn_ = std::move(fn);
  uv_poll_start(&handle_, events, &Poll::onPollCb);
}

void Poll::stop() {
  if (!closing_) {
    uv_poll_stop(&handle_);
  }
}

void Poll::onPollCb(uv_poll_t* handle, int status, int events) noexcept {
  auto* self = owner<Poll>(handle);
  if (!self->closing_ && self->fn_) {
    self->fn_(status, events);
  }
}

}  // namespace sluice::proxy::io
