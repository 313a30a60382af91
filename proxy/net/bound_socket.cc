#include "proxy/net/bound_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proxy/net/socket_address.h"

namespace sluice::proxy::net {

Result<int, BindError> bindSocket(int type, const policy::Endpoint& endpoint, int backlog) {
  sockaddr_storage address;
  const socklen_t length = toSockaddr(endpoint, &address);
  const int fd = ::socket(address.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return Err{BindError{"socket", errno}};
  }
  if (type == SOCK_STREAM) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  const char* failed = nullptr;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    failed = "bind";
  } else if (type == SOCK_STREAM && ::listen(fd, backlog) != 0) {
    failed = "listen";
  }
  if (failed != nullptr) {
    const int error = errno;
    ::close(fd);
    return Err{BindError{failed, error}};
  }
  return fd;
}

Result<BoundSocket, std::string> BoundSocket::bind(const policy::Endpoint& endpoint,
                                                   int backlog) {
  auto fd = bindSocket(SOCK_STREAM, endpoint, backlog);
  if (!fd) {
    const BindError& e = fd.error();
    return Err{endpoint.toString() + ": " + (std::strcmp(e.call, "socket") == 0 ? "socket: " : "") +
               std::strerror(e.error)};
  }
  // The address as bound: with port 0 (tests) the kernel's choice, which only getsockname knows.
  return BoundSocket(*fd, localEndpoint(*fd).value_or(endpoint));
}

Result<BoundSocket, std::string> BoundSocket::duplicate() const {
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return Err{endpoint_.toString() + ": dup: " + std::strerror(errno)};
  }
  return BoundSocket(fd, endpoint_);
}

BoundSocket::BoundSocket(BoundSocket&& other) noexcept
    : fd_(other.fd_), endpoint_(other.endpoint_) {
  other.fd_ = -1;
}

BoundSocket& BoundSocket::operator=(BoundSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = other.fd_;
    endpoint_ = other.endpoint_;
    other.fd_ = -1;
  }
  return *this;
}

BoundSocket::~BoundSocket() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

}  // namespace sluice::proxy::net
