#include "proxy/session/connection_timer.h"

#include <algorithm>
#include <chrono>

namespace sluice::proxy::session {

ConnectionTimer::ConnectionTimer(uv_loop_t* loop, std::function<void()> fire)
    : loop_(loop), timer_(loop), fire_(std::move(fire)), last_progress_ms_(uv_now(loop)) {}

void ConnectionTimer::arm(std::uint64_t idle_timeout_ms, std::uint64_t other) {
  std::uint64_t deadline = kNever;
  for (std::uint64_t at : {idle_timeout_ms != 0 ? last_progress_ms_ + idle_timeout_ms : 0,
                           phase_ms_, other, release_ms_}) {
    if (at != 0) {
      deadline = std::min(deadline, at);
    }
  }
  if (deadline == kNever || (armed_for_ms_ != 0 && armed_for_ms_ <= deadline)) {
    return;  // (none: the requests' own deadlines come through `other` once they have any)
  }
  armed_for_ms_ = deadline;
  const std::uint64_t at = now();
  timer_.start(std::chrono::milliseconds(deadline > at ? deadline - at : 0), fire_);
}

ConnectionTimer::Due ConnectionTimer::fired(std::uint64_t idle_timeout_ms, std::uint64_t other) {
  armed_for_ms_ = 0;
  const std::uint64_t at = now();
  Due due;
  if (release_ms_ != 0 && at >= release_ms_) {
    release_ms_ = 0;
    due.release = true;
  }
  due.phase = phase_ms_ != 0 && at >= phase_ms_;
  due.other = other != 0 && at >= other;
  due.idle = idle_timeout_ms != 0 && at >= last_progress_ms_ + idle_timeout_ms;
  return due;
}

}  // namespace sluice::proxy::session
