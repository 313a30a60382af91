#pragma once
// Listening sockets. The main thread binds each endpoint once (so a busy port fails `sluice run`
// at start, exit 1), and every worker loop accepts from its own dup() of that socket: one
// kernel queue, no SO_REUSEPORT (which would let another process of the same user bind the
// port beside sluice and take a share of a sandbox's connections).

#include <uv.h>

#include <functional>
#include <string>

#include "base/result.h"
#include "policy/ip_address.h"

namespace sluice::proxy::io {

// A bound, listening socket not yet attached to any loop. Closes its fd when destroyed.
class BoundSocket {
 public:
  static Result<BoundSocket, std::string> bind(const policy::Endpoint& endpoint, int backlog);
  // The same listening socket under a second fd (a reload that gives the address to another
  // sandbox keeps the socket, and the connections queued on it).
  Result<BoundSocket, std::string> duplicate() const;
  BoundSocket(BoundSocket&& other) noexcept;
  BoundSocket& operator=(BoundSocket&& other) noexcept;
  ~BoundSocket();

  int fd() const { return fd_; }
  // As bound: the port the kernel chose when 0 was asked.
  const policy::Endpoint& endpoint() const { return endpoint_; }

 private:
  BoundSocket(int fd, policy::Endpoint endpoint) : fd_(fd), endpoint_(endpoint) {}
  int fd_ = -1;
  policy::Endpoint endpoint_;
};

// One worker's view of a BoundSocket: a poll handle on its own dup() of the socket, accepting
// with accept4() itself so that an accepted connection is a plain fd, which the worker may
// serve or hand to a less busy worker (libuv's uv_accept would tie it to this loop). Same
// ownership contract as TcpStream: close(), then keep the object until the closed callback has
// run.
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
  Result<Ok, std::string> start(const BoundSocket& socket);
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
