#pragma once
// A client connection's one timer (cheap: one per connection, whatever it does), armed for the
// earliest of its deadlines: idle_timeout counted from the last request progress
// (docs/wire.md#limits-and-timeouts), the phase deadline (the handshake, a request head, the
// linger), the exchange's (a dial's connect_timeout) and the moment an idle connection gives its
// buffers back. Same ownership as io::Timer: close(), then keep it until the callback ran.

#include <uv.h>

#include <cstdint>
#include <functional>

#include "proxy/io/timer.h"

namespace sluice::proxy::session {

class ConnectionTimer {
 public:
  // `fire` runs when a deadline may have come (fired() says which).
  ConnectionTimer(uv_loop_t* loop, std::function<void()> fire);

  std::uint64_t now() const { return uv_now(loop_); }
  // Request progress: bytes the request parser used, response bytes from the upstream, a peer
  // taking what it was sent, the handshake advancing, an exchange starting or ending. Not any
  // bytes: records that carry no request (TLS KeyUpdates, empty records) or bytes nobody reads
  // yet (pipelined) keep no connection alive.
  void noteProgress() { last_progress_ms_ = now(); }
  std::uint64_t lastProgress() const { return last_progress_ms_; }
  // The handshake, request head or linger deadline (0: none).
  void setPhase(std::uint64_t at_ms) { phase_ms_ = at_ms; }
  std::uint64_t phase() const { return phase_ms_; }
  // Idle between requests: give buffers back then (0: not).
  void setRelease(std::uint64_t at_ms) { release_ms_ = at_ms; }

  // Arms for the earliest deadline (`other`: the requests', 0 if none; `idle_timeout_ms` 0: no
  // idle deadline of the connection's own, while its requests keep theirs). Already armed for
  // that moment or an earlier one (which re-arms for the rest), it costs nothing: each request
  // moves the idle deadline later, and that is no timer-heap update.
  void arm(std::uint64_t idle_timeout_ms, std::uint64_t other);

  struct Due {
    bool release = false;  // give buffers back (the release deadline is then cleared)
    bool phase = false;
    bool other = false;
    bool idle = false;
  };
  // In the callback: which deadlines have come.
  Due fired(std::uint64_t idle_timeout_ms, std::uint64_t other);

  void close(std::function<void()> on_closed) { timer_.close(std::move(on_closed)); }

 private:
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};

  uv_loop_t* loop_;
  io::Timer timer_;
  std::function<void()> fire_;
  std::uint64_t last_progress_ms_ = 0;
  std::uint64_t phase_ms_ = 0;
  std::uint64_t release_ms_ = 0;
  std::uint64_t armed_for_ms_ = 0;  // when the timer fires (0: not armed)
};

}  // namespace sluice::proxy::session
