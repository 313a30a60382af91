#pragma once
// Objects freed on a later turn of the loop, never inside the callback that hands them over
// (Envoy's deferredDelete): when a session's last handle has closed it is still on the stack
// below that close callback, in the middle of its own code, and freeing it there would leave
// that code running on freed memory the moment it touches a member after the callback.
//
// add() takes ownership; the objects go, oldest first, on the loop's next turn (NextTurn),
// before it waits for I/O again. close() frees what is pending first, then closes the handle;
// after it, add() frees at once (the loop is going away).

#include <uv.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "proxy/io/loop_handles.h"

namespace sluice::proxy::io {

template <class T>
class DeferredDelete {
 public:
  // `freed(n)` (may be empty) runs after each turn that freed n objects.
  explicit DeferredDelete(uv_loop_t* loop, std::function<void(std::size_t)> freed = {})
      : turn_(loop, [this] { freePending(); }), freed_(std::move(freed)) {}
  DeferredDelete(const DeferredDelete&) = delete;
  DeferredDelete& operator=(const DeferredDelete&) = delete;

  void add(std::unique_ptr<T> object) {
    pending_.push_back(std::move(object));
    if (closing_) {
      freePending();
      return;
    }
    turn_.schedule();
  }
  std::size_t pending() const { return pending_.size(); }

  void close(std::function<void()> on_closed) {
    if (closing_) {
      return;
    }
    closing_ = true;
    freePending();
    turn_.close(std::move(on_closed));
  }
  bool closed() const { return turn_.closed(); }

 private:
  void freePending() {
    // Swapped out first: a destructor may hand over another object.
    std::vector<std::unique_ptr<T>> going;
    going.swap(pending_);
    const std::size_t n = going.size();
    going.clear();
    if (n > 0 && freed_) {
      freed_(n);
    }
  }

  NextTurn turn_;
  std::function<void(std::size_t)> freed_;
  std::vector<std::unique_ptr<T>> pending_;
  bool closing_ = false;
};

}  // namespace sluice::proxy::io
