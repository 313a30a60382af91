#include "proxy/io/tcp_listener.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

#include "proxy/io/socket_address.h"

namespace sluice::proxy::io {

Result<BoundSocket, std::string> BoundSocket::bind(const policy::Endpoint& endpoint,
                                                   int backlog) {
  sockaddr_storage address;
  socklen_t length = toSockaddr(endpoint, &address);
  int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return Err{endpoint.toString() + ": socket: " + std::strerror(errno)};
  }
  int one = 1;
  // SO_REUSEADDR only lets a restarted sluice bind while old connections sit in TIME_WAIT;
  // unlike SO_REUSEPORT it does not let a second live listener share the port.
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(fd, backlog) != 0) {
    std::string error = endpoint.toString() + ": " + std::strerror(errno);
    ::close(fd);
    return Err{error};
  }
  return BoundSocket(fd, endpoint);
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

TcpListener::TcpListener(uv_loop_t* loop, OnConnection on_connection)
    : on_connection_(std::move(on_connection)) {
  uv_tcp_init(loop, &tcp_);
  tcp_.data = this;
}

TcpListener::~TcpListener() { assert(closed_); }

Result<Ok, std::string> TcpListener::start(const BoundSocket& socket) {
  int fd = ::fcntl(socket.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return Err{socket.endpoint().toString() + ": dup: " + std::strerror(errno)};
  }
  int rc = uv_tcp_open(&tcp_, fd);
  if (rc != 0) {
    ::close(fd);
    return Err{socket.endpoint().toString() + ": " + uv_strerror(rc)};
  }
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&tcp_), 1024, &TcpListener::onConnectionCb);
  if (rc != 0) {
    return Err{socket.endpoint().toString() + ": listen: " + uv_strerror(rc)};
  }
  started_ = true;
  return Ok{};
}

void TcpListener::onConnectionCb(uv_stream_t* server, int status) noexcept {
  auto* self = static_cast<TcpListener*>(server->data);
  if (status != 0 || self->closing_) {
    return;  // EMFILE and friends: libuv keeps listening; the next accept may succeed
  }
  self->on_connection_(server);
}

void TcpListener::close(std::function<void()> on_closed) {
  if (closing_) {
    return;
  }
  closing_ = true;
  on_closed_ = std::move(on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &TcpListener::onCloseCb);
}

void TcpListener::onCloseCb(uv_handle_t* handle) noexcept {
  auto* self = static_cast<TcpListener*>(handle->data);
  self->closed_ = true;
  if (self->on_closed_) {
    auto done = std::move(self->on_closed_);
    done();
  }
}

}  // namespace sluice::proxy::io
