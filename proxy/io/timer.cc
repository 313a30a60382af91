#include "proxy/io/timer.h"

#include <cassert>

namespace sluice::proxy::io {

Timer::Timer(uv_loop_t* loop) {
  uv_timer_init(loop, &timer_);
  timer_.data = this;
}

Timer::~Timer() { assert(closed_); }

void Timer::start(std::chrono::milliseconds delay, std::function<void()> fn) {
  if (closing_) {
    return;
  }
  fn_ = std::move(fn);
  repeating_ = false;
  uv_timer_start(&timer_, &Timer::onTimerCb, static_cast<std::uint64_t>(delay.count()), 0);
}

void Timer::startRepeating(std::chrono::milliseconds period, std::function<void()> fn) {
  if (closing_) {
    return;
  }
  fn_ = std::move(fn);
  repeating_ = true;
  const auto ms = static_cast<std::uint64_t>(period.count());
  uv_timer_start(&timer_, &Timer::onTimerCb, ms, ms);
}

void Timer::stop() {
  if (!closing_) {
    uv_timer_stop(&timer_);
  }
}

void Timer::onTimerCb(uv_timer_t* timer) noexcept {
  auto* self = static_cast<Timer*>(timer->data);
  if (self->closing_ || !self->fn_) {
    return;
  }
  if (self->repeating_) {
    auto fn = self->fn_;  // a copy: the callback may re-arm the timer with a new function
    fn();
    return;
  }
  // Move out first: the callback may re-arm the timer with a new function.
  auto fn = std::move(self->fn_);
  fn();
}

void Timer::close(std::function<void()> on_closed) {
  if (closing_) {
    return;
  }
  closing_ = true;
  fn_ = nullptr;
  on_closed_ = std::move(on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &Timer::onCloseCb);
}

void Timer::onCloseCb(uv_handle_t* handle) noexcept {
  auto* self = static_cast<Timer*>(handle->data);
  self->closed_ = true;
  if (self->on_closed_) {
    auto done = std::move(self->on_closed_);
    done();
  }
}

}  // namespace sluice::proxy::io
