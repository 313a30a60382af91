#include "tests/support/loop_peer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sluice::test_support {

namespace {

struct WriteRequest {
  uv_write_t req;
  std::string bytes;
};

char t_read_buffer[65536];

}  // namespace

// --- LoopPeer ---------------------------------------------------------------------------------

LoopPeer::LoopPeer(uv_loop_t* loop) : tcp_(new uv_tcp_t) {
  uv_tcp_init(loop, tcp_);
  tcp_->data = this;
}

LoopPeer::~LoopPeer() {
  if (tcp_ == nullptr) {
    return;  // closed and freed
  }
  tcp_->data = nullptr;  // its close callback may run after this object is gone
  if (!closed_) {
    uv_close(reinterpret_cast<uv_handle_t*>(tcp_), &LoopPeer::onClose);
  }
}

int LoopPeer::open(int fd) {
  int rc = uv_tcp_open(tcp_, fd);
  if (rc == 0) {
    uv_tcp_nodelay(tcp_, 1);
    rc = uv_read_start(reinterpret_cast<uv_stream_t*>(tcp_), &LoopPeer::onAlloc,
                       &LoopPeer::onRead);
  }
  return rc;
}

int LoopPeer::accept(uv_stream_t* listener) {
  int rc = uv_accept(listener, reinterpret_cast<uv_stream_t*>(tcp_));
  if (rc == 0) {
    uv_tcp_nodelay(tcp_, 1);
    rc = uv_read_start(reinterpret_cast<uv_stream_t*>(tcp_), &LoopPeer::onAlloc,
                       &LoopPeer::onRead);
  }
  return rc;
}

void LoopPeer::onAlloc(uv_handle_t*, std::size_t, uv_buf_t* buf) {
  buf->base = t_read_buffer;
  buf->len = sizeof t_read_buffer;
}

void LoopPeer::onRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<LoopPeer*>(stream->data);
  if (self == nullptr || nread == 0) {
    return;
  }
  if (nread > 0) {
    std::string_view bytes(buf->base, static_cast<std::size_t>(nread));
    self->raw_bytes_ += bytes.size();
    if (self->tls_) {
      self->tls_->feed(bytes, self->received_);
      self->flushTls();  // handshake messages, alerts
    } else {
      self->received_.append(bytes);
    }
  } else {
    self->end_ = nread == UV_EOF ? End::Eof : End::Reset;
    self->error_ = static_cast<int>(nread);
    uv_read_stop(stream);
  }
  if (self->on_read) {
    self->on_read(*self);
  }
}

void LoopPeer::onClose(uv_handle_t* handle) {
  if (auto* self = static_cast<LoopPeer*>(handle->data)) {
    self->tcp_ = nullptr;
  }
  delete reinterpret_cast<uv_tcp_t*>(handle);
}

void LoopPeer::writeRaw(std::string_view bytes) {
  if (closed_ || bytes.empty()) {
    return;
  }
  auto* request = new WriteRequest{{}, std::string(bytes)};
  uv_buf_t buf = uv_buf_init(request->bytes.data(), static_cast<unsigned>(request->bytes.size()));
  int rc = uv_write(&request->req, reinterpret_cast<uv_stream_t*>(tcp_), &buf, 1,
                    [](uv_write_t* req, int) { delete reinterpret_cast<WriteRequest*>(req); });
  if (rc != 0) {
    delete request;
  }
}

void LoopPeer::write(std::string_view bytes) {
  if (!tls_) {
    writeRaw(bytes);
    return;
  }
  tls_->write(bytes);
  flushTls();
}

void LoopPeer::flushTls() { writeRaw(tls_->takeOutput()); }

void LoopPeer::shutdownWrite() {
  if (closed_ || shutdown_) {
    return;
  }
  shutdown_ = true;
  auto* request = new uv_shutdown_t;
  if (uv_shutdown(request, reinterpret_cast<uv_stream_t*>(tcp_),
                  [](uv_shutdown_t* req, int) { delete req; }) != 0) {
    delete request;
  }
}

void LoopPeer::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(tcp_), &LoopPeer::onClose);
}

void LoopPeer::reset() {
  if (closed_) {
    return;
  }
  closed_ = true;
  if (uv_tcp_close_reset(tcp_, &LoopPeer::onClose) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(tcp_), &LoopPeer::onClose);
  }
}

void LoopPeer::startTlsClient(const std::string& ca_file, const std::string& host,
                              MemoryTls::Alpn alpn) {
  tls_ = MemoryTls::client(ca_file, host, alpn);
  tls_->start();
  flushTls();
}

void LoopPeer::startTlsServer(X509* certificate, EVP_PKEY* key) {
  tls_ = MemoryTls::server(certificate, key);
}

void LoopPeer::closeNotify() {
  if (tls_) {
    tls_->shutdown();
    flushTls();
  }
}

std::optional<HttpMessage> LoopPeer::takeResponse(bool bodiless) {
  HttpMessage message;
  std::size_t used = parseHttpMessage(received_, true, bodiless, message);
  if (used == 0 || used == kMalformed) {
    EXPECT_NE(used, kMalformed) << "not an HTTP response: " << received_.substr(0, 200);
    return std::nullopt;
  }
  received_.erase(0, used);
  return message;
}

// --- OriginServer -----------------------------------------------------------------------------

OriginServer::OriginServer(uv_loop_t* loop, X509* certificate, EVP_PKEY* key)
    : loop_(loop), listener_(new uv_tcp_t), certificate_(certificate), key_(key) {
  uv_tcp_init(loop, listener_);
  listener_->data = this;
  sockaddr_in address{};
  uv_ip4_addr("127.0.0.1", 0, &address);
  EXPECT_EQ(uv_tcp_bind(listener_, reinterpret_cast<const sockaddr*>(&address), 0), 0);
  EXPECT_EQ(uv_listen(reinterpret_cast<uv_stream_t*>(listener_), 64, &OriginServer::onConnection),
            0);
  sockaddr_storage bound{};
  int length = sizeof bound;
  uv_tcp_getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

OriginServer::~OriginServer() { close(); }

void OriginServer::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  listener_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(listener_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_tcp_t*>(h); });
  for (Connection& c : connections_) {
    if (c.peer) {
      c.peer->on_read = nullptr;
      c.peer->close();
    }
  }
}

void OriginServer::onConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<OriginServer*>(listener->data);
  if (self == nullptr || status != 0) {
    return;
  }
  auto peer = std::make_unique<LoopPeer>(self->loop_);
  if (peer->accept(listener) != 0) {
    return;
  }
  if (self->certificate_ != nullptr) {
    peer->startTlsServer(self->certificate_, self->key_);
  }
  std::size_t index = self->connections_.size();
  peer->on_read = [self, index](LoopPeer&) { self->cutRequests(index); };
  self->connections_.push_back(Connection{std::move(peer), 0, 0});
}

void OriginServer::cutRequests(std::size_t index) {
  for (;;) {
    Connection& c = connections_[index];
    std::string_view unread = std::string_view(c.peer->received()).substr(c.parsed);
    Request request;
    std::size_t used = parseHttpMessage(unread, false, false, request.message);
    if (used == 0 || used == kMalformed) {
      return;
    }
    c.parsed += used;
    request.connection = index;
    request.on_connection = ++c.count;
    requests_.push_back(request);
    if (on_request) {
      on_request(*c.peer, request);  // may close the connection, or open others
    }
  }
}

void OriginServer::forget() {
  requests_ = {};
  for (Connection& c : connections_) {
    if (c.peer && (c.peer->closed() || c.peer->end() != LoopPeer::End::Open)) {
      c.peer.reset();  // its handle is closed, and freed by the close callback; it reads no more
    }
  }
}

std::vector<OriginServer::Request> OriginServer::requestsFor(std::string_view target) const {
  std::vector<Request> out;
  for (const Request& r : requests_) {
    if (r.message.target == target) {
      out.push_back(r);
    }
  }
  return out;
}

// --- Blackhole --------------------------------------------------------------------------------

Blackhole::Blackhole() {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(::listen(listener_, 0), 0);  // the kernel queues one connection at most
  socklen_t length = sizeof address;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  // Connections of its own until the queue is full (the kernel says so: for a listening
  // socket, tcpi_unacked is the accept queue's length and tcpi_sacked its bound).
  for (int attempt = 0; attempt < 8; ++attempt) {
    tcp_info info{};
    socklen_t size = sizeof info;
    ::getsockopt(listener_, IPPROTO_TCP, TCP_INFO, &info, &size);
    if (info.tcpi_unacked > info.tcpi_sacked) {
      return;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    fillers_.push_back(fd);
    pollfd connected{fd, POLLOUT, 0};
    ::poll(&connected, 1, 1000);  // the handshake completes (or is dropped) at once on loopback
  }
  ADD_FAILURE() << "the blackhole's accept queue never filled";
}

Blackhole::~Blackhole() {
  for (int fd : fillers_) {
    ::close(fd);
  }
  ::close(listener_);
}

}  // namespace sluice::test_support
