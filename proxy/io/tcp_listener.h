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
  BoundSocket(BoundSocket&& other) noexcept;
  BoundSocket& operator=(BoundSocket&& other) noexcept;
  ~BoundSocket();

  int fd() const { return fd_; }
  const policy::Endpoint& endpoint() const { return endpoint_; }

 private:
  BoundSocket(int fd, policy::Endpoint endpoint) : fd_(fd), endpoint_(endpoint) {}
  int fd_ = -1;
  policy::Endpoint endpoint_;
};

// One worker's view of a BoundSocket. Same ownership contract as TcpStream: close(), then keep
// the object until the closed callback has run.
class TcpListener {
 public:
  // Called on the loop for each pending connection; accept it with TcpStream::accept(server).
  using OnConnection = std::function<void(uv_stream_t* server)>;

  TcpListener(uv_loop_t* loop, OnConnection on_connection);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Starts accepting on a dup() of `socket`.
  Result<Ok, std::string> start(const BoundSocket& socket);
  void close(std::function<void()> on_closed);
  bool closed() const { return closed_; }

 private:
  static void onConnectionCb(uv_stream_t* server, int status) noexcept;
  static void onCloseCb(uv_handle_t* handle) noexcept;

  uv_tcp_t tcp_{};
  OnConnection on_connection_;
  std::function<void()> on_closed_;
  bool started_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace sluice::proxy::io
