#pragma once
// Accepting on a listening socket (net::BoundSocket, proxy/net/bound_socket.h: bound once by
// the main thread) from a worker's loop.

#include <uv.h>

#include <functional>
#include <string>

#include "base/result.h"
#include "proxy/net/bound_socket.h"

namespace sluice::proxy::io {

// One worker's view of a net::BoundSocket: a poll handle on its own dup() of the socket,
// accepting with accept4() itself so that an accepted connection is a plain fd, which the
// worker may serve or hand to a less busy worker (libuv's uv_accept would tie it to this loop).
// Same ownership contract as TcpStream: close(), then keep the object until the closed callback
// has run.
class TcpListener {
 public:
  // Called on the loop with each accepted connection (non-blocking, close-on-exec); the
  // callee owns the fd.
  using OnConnection = std::function<void(int fd)>;

  TcpListener(uv_loop_t* loop, OnConnection on_connection);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Starts accepting on a dup() of `socket`.
  Result<Ok, std::string> start(const net::BoundSocket& socket);
  void close(std::function<void()> on_closed);
  bool closed() const { return closed_; }

 private:
  static void onPollCb(uv_poll_t* poll, int status, int events) noexcept;
  static void onResumeCb(uv_timer_t* timer) noexcept;
  static void onCloseCb(uv_handle_t* handle) noexcept;
  void acceptPending();

  uv_loop_t* loop_;
  uv_poll_t poll_{};
  uv_timer_t resume_{};  // accepting again after running out of descriptors
  int fd_ = -1;
  OnConnection on_connection_;
  std::function<void()> on_closed_;
  int open_handles_ = 0;
  bool started_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace sluice::proxy::io
