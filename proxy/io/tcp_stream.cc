#include "proxy/io/tcp_stream.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <cassert>

#include "proxy/io/read_buffer.h"
#include "proxy/net/socket_address.h"

namespace sluice::proxy::io {

namespace {

TcpStream* owner(uv_handle_t* handle) { return static_cast<TcpStream*>(handle->data); }

}  // namespace

TcpStream::TcpStream(uv_loop_t* loop, Handler* handler) : handler_(handler) {
  uv_tcp_init(loop, &tcp_);
  tcp_.data = this;
  write_req_.data = this;
  connect_req_.data = this;
  shutdown_req_.data = this;
}

TcpStream::~TcpStream() {
  // The handle must have been closed (close_cb run) before its memory goes away.
  assert(state_ == State::Closed);
}

void TcpStream::configureSocket() {
  uv_tcp_nodelay(&tcp_, 1);  // request heads and TLS records are latency-bound
}

int TcpStream::adopt(int fd) {
  int rc = uv_tcp_open(&tcp_, fd);
  if (rc == 0) {
    state_ = State::Open;
    configureSocket();
  }
  return rc;
}

int TcpStream::connect(const policy::Endpoint& to) {
  sockaddr_storage address;
  net::toSockaddr(to, &address);
  int rc = uv_tcp_connect(&connect_req_, &tcp_, reinterpret_cast<const sockaddr*>(&address),
                          &TcpStream::onConnectCb);
  if (rc == 0) {
    state_ = State::Connecting;
  }
  return rc;
}

void TcpStream::onConnectCb(uv_connect_t* req, int status) noexcept {
  auto* self = static_cast<TcpStream*>(req->data);
  if (self->closing()) {
    return;  // UV_ECANCELED after close(): the owner no longer cares
  }
  if (status == 0) {
    self->state_ = State::Open;
    self->configureSocket();
  }
  self->handler_->onConnected(*self, status);
}

void TcpStream::startReading() {
  if (reading_ || state_ != State::Open) {
    return;
  }
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &allocReadBuffer,
                    &TcpStream::onReadCb) == 0) {
    reading_ = true;
  }
}

void TcpStream::stopReading() {
  if (!reading_) {
    return;
  }
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
  reading_ = false;
}

void TcpStream::onReadCb(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) noexcept {
  TcpStream* self = owner(reinterpret_cast<uv_handle_t*>(stream));
  if (self->closing()) {
    return;
  }
  if (nread > 0) {
    self->handler_->onRead(*self,
                           std::span<const char>(buf->base, static_cast<std::size_t>(nread)));
    return;
  }
  if (nread == 0) {
    return;  // EAGAIN
  }
  self->stopReading();
  if (nread == UV_EOF) {
    self->handler_->onEof(*self);
  } else {
    self->handler_->onError(*self, static_cast<int>(nread));
  }
}

void TcpStream::write(std::span<const char> data) {
  if (data.empty() || closing() || state_ != State::Open) {
    return;
  }
  if (!write_in_flight_ && pending_.empty()) {
    uv_buf_t buf = uv_buf_init(const_cast<char*>(data.data()), static_cast<unsigned>(data.size()));
    int n = uv_try_write(reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1);
    // On an error other than EAGAIN, fall through to uv_write, which reports it from the loop
    // through onWriteCb: never from inside write(), where the caller is mid-change.
    if (n > 0) {
      data = data.subspan(static_cast<std::size_t>(n));
    }
    if (data.empty()) {
      maybeShutdown();
      return;
    }
  }
  pending_.append(data.data(), data.size());
  if (backlog() > kHighWatermark) {
    above_high_ = true;
  }
  flush();
}

void TcpStream::flush() {
  if (write_in_flight_ || pending_.empty() || closing()) {
    return;
  }
  inflight_.swap(pending_);
  uv_buf_t buf = uv_buf_init(inflight_.data(), static_cast<unsigned>(inflight_.size()));
  int rc =
      uv_write(&write_req_, reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1, &TcpStream::onWriteCb);
  if (rc != 0) {
    // Only for a handle libuv already considers dead; the owner's deadline timer closes the
    // connection, so drop the bytes rather than report from inside write().
    inflight_.clear();
    return;
  }
  write_in_flight_ = true;
}

void TcpStream::onWriteCb(uv_write_t* req, int status) noexcept {
  auto* self = static_cast<TcpStream*>(req->data);
  self->write_in_flight_ = false;
  self->inflight_.clear();
  if (self->closing()) {
    return;
  }
  if (status != 0) {
    self->handler_->onError(*self, status);
    return;
  }
  self->flush();
  if (self->above_high_ && self->backlog() <= kLowWatermark) {
    self->above_high_ = false;
    self->handler_->onDrained(*self);
  }
  self->maybeShutdown();
}

void TcpStream::shutdownWrite() {
  shutdown_wanted_ = true;
  maybeShutdown();
}

void TcpStream::maybeShutdown() {
  if (!shutdown_wanted_ || shutdown_sent_ || backlog() != 0 || state_ != State::Open) {
    return;
  }
  if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_),
                  &TcpStream::onShutdownCb) == 0) {
    shutdown_sent_ = true;
  }
}

void TcpStream::onShutdownCb(uv_shutdown_t*, int) noexcept {}

void TcpStream::close() {
  if (closing()) {
    return;
  }
  stopReading();
  state_ = State::Closing;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &TcpStream::onCloseCb);
}

void TcpStream::reset() {
  if (closing()) {
    return;
  }
  stopReading();
  State before = state_;
  state_ = State::Closing;
  if (before == State::Open && uv_tcp_close_reset(&tcp_, &TcpStream::onCloseCb) == 0) {
    return;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &TcpStream::onCloseCb);
}

void TcpStream::onCloseCb(uv_handle_t* handle) noexcept {
  TcpStream* self = owner(handle);
  self->state_ = State::Closed;
  self->pending_ = std::string();
  self->inflight_ = std::string();
  self->handler_->onClosed(*self);
}

void TcpStream::releaseBuffers() {
  if (pending_.empty()) {
    pending_.shrink_to_fit();
  }
  if (!write_in_flight_) {
    inflight_.shrink_to_fit();
  }
}

int TcpStream::socketFd() const {
  uv_os_fd_t fd = -1;
  return uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd) == 0 ? fd : -1;
}

policy::Endpoint TcpStream::peer() const {
  const int socket = socketFd();
  return socket < 0 ? policy::Endpoint{} : net::peerEndpoint(socket).value_or(policy::Endpoint{});
}

std::optional<policy::Endpoint> TcpStream::originalDestination() const {
  const int socket = socketFd();
  return socket < 0 ? std::nullopt : net::originalDestination(socket);
}

policy::Endpoint TcpStream::local() const {
  const int socket = socketFd();
  return socket < 0 ? policy::Endpoint{} : net::localEndpoint(socket).value_or(policy::Endpoint{});
}

}  // namespace sluice::proxy::io
