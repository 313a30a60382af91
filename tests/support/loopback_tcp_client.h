#pragma once
// A blocking TCP client of 127.0.0.1, for a test's helper thread talking to a server that runs
// on the test's own loop (loop_driver.h): every call returns within the timeout.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::test_support {

class LoopbackTcpClient {
 public:
  // buffer_size > 0: small socket buffers, set before connecting so the window is small too.
  explicit LoopbackTcpClient(std::uint16_t port,
                             std::chrono::milliseconds timeout = std::chrono::seconds(3),
                             int buffer_size = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (buffer_size > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer_size, sizeof(buffer_size));
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buffer_size, sizeof(buffer_size));
    }
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0;
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~LoopbackTcpClient() { ::close(fd_); }
  LoopbackTcpClient(const LoopbackTcpClient&) = delete;
  LoopbackTcpClient& operator=(const LoopbackTcpClient&) = delete;

  int fd() const { return fd_; }
  bool connected() const { return connected_; }

  // All of it, or false (the server closed, reset, or the timeout passed).
  bool send(const void* data, std::size_t size) {
    const auto* at = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::send(fd_, at, size, MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      at += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }
  bool send(std::string_view bytes) { return send(bytes.data(), bytes.size()); }
  void shutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // True when the server closed (FIN or RST) before the timeout, having sent nothing.
  bool closedByPeer() {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 protected:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace sluice::test_support
