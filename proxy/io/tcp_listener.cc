#include "proxy/io/tcp_listener.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

namespace sluice::proxy::io {

namespace {

// Connections accepted per wake-up before the loop serves others: a burst of connects must
// not starve the connections already open.
constexpr int kAcceptsPerWakeup = 64;
// When accept() fails for want of descriptors or memory (or on a socket that stopped
// listening), accepting pauses this long: the pending connection stays queued and the socket
// readable, so polling on would spin.
constexpr std::uint64_t kResumeAfterMs = 100;

}  // namespace

TcpListener::TcpListener(uv_loop_t* loop, OnConnection on_connection)
    : loop_(loop), on_connection_(std::move(on_connection)) {
  uv_timer_init(loop, &resume_);
  resume_.data = this;
  open_handles_ = 1;
}

TcpListener::~TcpListener() { assert(closed_); }

Result<Ok, std::string> TcpListener::start(const net::BoundSocket& socket) {
  fd_ = ::fcntl(socket.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0) {
    return Err{socket.endpoint().toString() + ": dup: " + std::strerror(errno)};
  }
  int rc = uv_poll_init_socket(loop_, &poll_, fd_);
  if (rc != 0) {
    ::close(fd_);
    fd_ = -1;
    return Err{socket.endpoint().toString() + ": " + uv_strerror(rc)};
  }
  poll_.data = this;
  ++open_handles_;
  started_ = true;
  rc = uv_poll_start(&poll_, UV_READABLE, &TcpListener::onPollCb);
  if (rc != 0) {
    return Err{socket.endpoint().toString() + ": poll: " + uv_strerror(rc)};
  }
  return Ok{};
}

void TcpListener::onPollCb(uv_poll_t* poll, int status, int /*events*/) noexcept {
  auto* self = static_cast<TcpListener*>(poll->data);
  if (status != 0 || self->closing_) {
    return;
  }
  self->acceptPending();
}

void TcpListener::acceptPending() {
  for (int i = 0; i < kAcceptsPerWakeup && !closing_; ++i) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      on_connection_(fd);
      continue;
    }
    switch (errno) {
      case EAGAIN:
        return;  // another worker took it, or the queue is empty
      case EINTR:
      case ECONNABORTED:
      case EPROTO:
      // Linux hands a pending connection's network error to accept() (accept(2)): that one
      // connection is gone, and the next may be fine.
      case ENETDOWN:
      case ENOPROTOOPT:
      case EHOSTDOWN:
      case ENONET:
      case EHOSTUNREACH:
      case ENETUNREACH:
      case EPERM:
        continue;
      default:
        // Out of descriptors (EMFILE, ENFILE), kernel memory (ENOBUFS, ENOMEM), or a socket
        // that no longer listens (EINVAL): nothing was taken off the queue and the socket
        // stays readable, so polling on would run the loop flat out. Pause instead; the
        // connection waits in the kernel's queue.
        uv_poll_stop(&poll_);
        uv_timer_start(&resume_, &TcpListener::onResumeCb, kResumeAfterMs, 0);
        return;
    }
  }
}

void TcpListener::onResumeCb(uv_timer_t* timer) noexcept {
  auto* self = static_cast<TcpListener*>(timer->data);
  if (!self->closing_) {
    uv_poll_start(&self->poll_, UV_READABLE, &TcpListener::onPollCb);
  }
}

void TcpListener::close(std::function<void()> on_closed) {
  if (closing_) {
    return;
  }
  closing_ = true;
  on_closed_ = std::move(on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&resume_), &TcpListener::onCloseCb);
  if (started_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), &TcpListener::onCloseCb);
  }
}

void TcpListener::onCloseCb(uv_handle_t* handle) noexcept {
  auto* self = static_cast<TcpListener*>(handle->data);
  if (--self->open_handles_ > 0) {
    return;
  }
  if (self->fd_ >= 0) {
    ::close(self->fd_);  // a poll handle does not own its fd
    self->fd_ = -1;
  }
  self->closed_ = true;
  if (self->on_closed_) {
    auto done = std::move(self->on_closed_);
    done();
  }
}

}  // namespace sluice::proxy::io
