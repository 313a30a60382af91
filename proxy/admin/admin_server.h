#pragma once
// The admin endpoint (`admin.listen`, docs/metrics.md): plain HTTP/1.1 on the main thread's loop.
//
//   GET|HEAD /metrics   200, Prometheus text (handlers.metrics()); a query string is ignored
//   GET|HEAD /healthz   200 "ok\n" while handlers.problems() is empty, else 503 with its lines
//                       ("draining", an audit log that cannot be written: path and error)
//   another method      405, Allow: GET, HEAD
//   another path        404
//   unparsable head     400; a head over kMaxHeadBytes: 431
//
// Whoever can reach the address can send anything, so the bytes are parsed by the project's
// strict request parser, and every connection is bounded: one request, a head of at most
// kMaxHeadBytes, kDeadline to send it and kDeadline more to take the answer, at most
// kMaxConnections at once (the surplus is closed as soon as accepted). Every answer carries
// Content-Length and Connection: close; after it the server sends FIN and reads (discarding)
// until the client closes, so an early close does not turn the answer into an RST.
//
// Ownership: the owner keeps the AdminServer until close()'s callback has run (or, when
// start() was never called, may destroy it at once). Handlers run on the loop thread, from
// the loop, never from inside an AdminServer method.

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/result.h"
#include "policy/ip_address.h"
#include "proxy/io/tcp_listener.h"
#include "proxy/net/bound_socket.h"

namespace sluice::proxy::admin {

class AdminServer {
 public:
  struct Handlers {
    std::function<std::string()> metrics;  // the body of /metrics (renderPrometheus)
    // Why the gateway is not healthy, one line each ending in '\n'; empty: healthy.
    std::function<std::string()> problems;
  };

  static constexpr std::size_t kMaxHeadBytes = 8 * 1024;
  static constexpr std::size_t kMaxConnections = 64;
  static constexpr std::chrono::milliseconds kDeadline{5000};

  // Binds and listens now, so a busy address fails `sluice run` at start. Errors name the
  // setting and the address ("admin.listen 127.0.0.1:9901: Address already in use").
  static Result<std::unique_ptr<AdminServer>, std::string> bind(const policy::Endpoint& endpoint);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Accepts on `loop` from now on. Call once. On failure the server still needs close().
  Result<Ok, std::string> start(uv_loop_t* loop, Handlers handlers);
  // Stops accepting and closes every connection, answered or not; `on_closed` runs (from the
  // loop) once every handle is closed and the port is free. Idempotent; without start(), it
  // runs at once.
  void close(std::function<void()> on_closed);

  // The address as bound: with port 0 asked, the port the kernel chose.
  const policy::Endpoint& endpoint() const { return endpoint_; }
  // Connections open now (answered ones included until closed).
  std::size_t connections() const { return connections_.size(); }

 private:
  class Connection;

  AdminServer(net::BoundSocket socket, policy::Endpoint endpoint);
  void onAccepted(int fd);
  // A connection's last handle closed: it is deleted here.
  void connectionClosed(Connection* connection);
  void maybeFinishClose();

  std::optional<net::BoundSocket> socket_;  // until close(): the listener accepts on a dup()
  policy::Endpoint endpoint_;
  uv_loop_t* loop_ = nullptr;
  Handlers handlers_;
  std::unique_ptr<io::TcpListener> listener_;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::function<void()> on_closed_;
  bool listener_closed_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace sluice::proxy::admin
