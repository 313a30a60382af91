#pragma once
// Binding sockets: the one bind() of sluice, for the gateway's listeners (proxy/io/
// tcp_listener.h), the admin endpoint and the sandboxes' resolvers (proxy/dns/
// sandbox_resolver.h). No event loop.
//
// Every socket is non-blocking and close-on-exec. A TCP socket gets SO_REUSEADDR, which only
// lets a restarted sluice bind while old connections sit in TIME_WAIT; unlike SO_REUSEPORT it
// does not let a second live listener share the port. A UDP socket never gets it: on Linux,
// UDP SO_REUSEADDR lets any later socket that also sets it bind the same address and port.
// No socket sets IPV6_V6ONLY, so "[::]" takes the port on the IPv4 addresses too (Linux's
// default, net.ipv6.bindv6only=0), as policy::Endpoint::overlaps assumes.
//
// The main thread binds each listening endpoint once (so a busy port fails `sluice run` at
// start, exit 1), and every worker loop accepts from its own dup() of that socket: one kernel
// queue, no SO_REUSEPORT (which would let another process of the same user bind the port
// beside sluice and take a share of a sandbox's connections).

#include <string>

#include "base/result.h"
#include "policy/ip_address.h"

namespace sluice::proxy::net {

// Which call failed, and its errno.
struct BindError {
  const char* call;  // "socket", "bind" or "listen"
  int error;
};

// A bound socket of `type` (SOCK_STREAM or SOCK_DGRAM); a stream socket is also listening,
// with `backlog`. The caller owns the fd.
Result<int, BindError> bindSocket(int type, const policy::Endpoint& endpoint, int backlog);

// A bound, listening TCP socket not yet attached to any loop. Closes its fd when destroyed.
class BoundSocket {
 public:
  // Errors read "10.0.0.1:8080: Address already in use" ("...: socket: ..." when no socket
  // could be made at all).
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

}  // namespace sluice::proxy::net
