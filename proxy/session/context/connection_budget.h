#pragma once
// What one client connection may make sluice hold for it, whatever HTTP it speaks: one place
// for the bounds every codec draws from (docs/wire.md#limits-and-timeouts). Owned by the
// connection; its requests reach it through their ClientSide.
//
//   - Answers held toward the client: bytes an HTTP/2 stream keeps for its client (read from
//     the upstream, not yet in a DATA frame: the client's window may hold them). Past
//     kHeldBytes, no upstream of the connection is read until the client takes some.
//     (HTTP/1.1 writes an answer into the client's queue as it comes, bounded by its
//     watermarks: it holds nothing here.)
//   - Windows granted to origins: an HTTP/2 origin may send a stream's window without being
//     asked, so the windows granted for a connection's requests are memory it has promised.
//     Each stream of an origin session gets a share of kWindowBytes, halved for each stream
//     already holding one and never under kMinWindow, given back when the stream ends. A
//     window is reopened only as the client takes the bytes (end to end), so a stream's origin
//     sends at most its window more than its client has read.
//
//   - Upstream connections: the requests of one connection use at most kUpstreams upstream
//     connections of their own at once (a dial, or an HTTP/1.1 connection it forwards on; a
//     stream of a shared HTTP/2 session is none). An HTTP/2 client may have 100 streams in
//     flight, and each to an HTTP/1.1 origin would be a connection (its descriptor, its TLS
//     state): past the bound a request waits, in order, for one to be free, and its idle
//     time does not run meanwhile.
//
// So one connection holds at most kHeldBytes plus a read toward the client, its origin
// windows at most kWindowBytes plus kMinWindow a stream, and kUpstreams connections: with 100
// streams whose client never returns a window, under 2 MiB.

#include <algorithm>
#include <cstddef>
#include <deque>

namespace sluice::proxy::session {

// A request waiting for an upstream connection of its own (ConnectionBudget::takeUpstream).
class UpstreamWaiter {
 public:
  // One is free now, and it is this request's.
  virtual void onUpstreamFree() = 0;

 protected:
  ~UpstreamWaiter() = default;
};

class ConnectionBudget {
 public:
  static constexpr std::size_t kUpstreams = 16;
  static constexpr std::size_t kHeldBytes = 512 * 1024;
  static constexpr std::size_t kWindowBytes = 512 * 1024;
  static constexpr std::size_t kMinWindow = 4 * 1024;
  static constexpr std::size_t kMaxWindow = 256 * 1024;

  // --- answers held toward the client
  void hold(std::size_t bytes) { held_ += bytes; }
  void release(std::size_t bytes) { held_ -= std::min(bytes, held_); }
  std::size_t held() const { return held_; }
  bool full() const { return held_ >= kHeldBytes; }

  // --- windows granted to origins
  // A window for a new origin stream; give it back with returnWindow() when the stream ends.
  std::size_t grantWindow() {
    const std::size_t left = granted_ < kWindowBytes ? kWindowBytes - granted_ : 0;
    const std::size_t window = std::clamp(left / 2, kMinWindow, kMaxWindow);
    granted_ += window;
    return window;
  }
  void returnWindow(std::size_t window) { granted_ -= std::min(window, granted_); }
  std::size_t granted() const { return granted_; }

  // --- upstream connections of its own
  // One for `waiter` now (true), or later (onUpstreamFree) once one is given back.
  bool takeUpstream(UpstreamWaiter& waiter) {
    if (upstreams_ < kUpstreams) {
      ++upstreams_;
      return true;
    }
    waiting_.push_back(&waiter);
    return false;
  }
  // One is given back: the first waiter has it.
  void giveUpstream() {
    if (!waiting_.empty()) {
      UpstreamWaiter* next = waiting_.front();
      waiting_.pop_front();
      next->onUpstreamFree();  // (the count stays: it is that waiter's now)
      return;
    }
    upstreams_ -= std::min<std::size_t>(1, upstreams_);
  }
  // `waiter` waits no more (its request ended). Idempotent.
  void stopWaiting(UpstreamWaiter& waiter) { std::erase(waiting_, &waiter); }
  std::size_t upstreams() const { return upstreams_; }

 private:
  std::size_t upstreams_ = 0;
  std::deque<UpstreamWaiter*> waiting_;
  std::size_t held_ = 0;
  std::size_t granted_ = 0;
};

}  // namespace sluice::proxy::session
