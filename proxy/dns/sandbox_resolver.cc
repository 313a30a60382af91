#include "proxy/dns/sandbox_resolver.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <utility>

#include "proxy/io/read_buffer.h"
#include "proxy/net/bound_socket.h"
#include "proxy/net/socket_address.h"

namespace sluice::proxy::dns {

namespace {

constexpr int kListenBacklog = 128;
constexpr std::size_t kMaxTcpResponseBytes = 0xffff;  // what a 2-byte length prefix can say

std::string describe(const policy::Endpoint& endpoint, const char* proto, int error) {
  return endpoint.toString() + " (" + proto + "): " + std::strerror(error);
}

}  // namespace

// One TCP client. Owned by the resolver's list from accept until both of its handles have been
// through their close callbacks; freed there. `owner` is null once the resolver is destroyed,
// and then the close callbacks only free the memory.
struct SandboxResolver::Connection {
  SandboxResolver* owner = nullptr;
  uv_tcp_t tcp{};
  uv_timer_t idle{};
  uv_write_t write_req{};
  Connection* prev = nullptr;  // the owner's list, in accept order
  Connection* next = nullptr;
  std::vector<std::uint8_t> in;        // received, not yet answered: at most one partial
                                       // message, unless paused on the output cap
  std::vector<std::uint8_t> pending;   // responses not yet handed to the kernel
  std::vector<std::uint8_t> inflight;  // owned by the uv_write in flight
  policy::Endpoint peer;               // the client, as accepted
  int open_handles = 2;
  bool closing = false;
  bool reading = false;
  bool eof = false;
  bool write_in_flight = false;

  std::size_t backlog() const { return pending.size() + inflight.size(); }
};

SandboxResolver::SandboxResolver(uv_loop_t* loop, policy::Endpoint endpoint, Answerer answer)
    : SandboxResolver(loop, endpoint, std::move(answer), Limits{}) {}

SandboxResolver::SandboxResolver(uv_loop_t* loop, policy::Endpoint endpoint, Answerer answer,
                                 Limits limits)
    : loop_(loop),
      endpoint_(endpoint),
      answer_(std::move(answer)),
      limits_(limits),
      udp_(new uv_udp_t),
      listener_(new uv_tcp_t) {
  assert(answer_);
  // Initialised here, opened in start(): close() always has both handles to close, so `done`
  // always comes from a close callback, started or not.
  uv_udp_init(loop_, udp_);
  udp_->data = this;
  uv_tcp_init(loop_, listener_);
  listener_->data = this;
  live_handles_ = 2;
}

SandboxResolver::~SandboxResolver() {
  // The documented way is close() and then wait for `done`. Destroyed earlier, the handles
  // still closing are left to the loop, pointing nowhere: their callbacks only free memory.
  close(nullptr);
  done_ = nullptr;
  if (udp_) {
    udp_->data = nullptr;
  }
  if (listener_) {
    listener_->data = nullptr;
  }
  for (Connection* c = oldest_; c; c = c->next) {
    c->owner = nullptr;
  }
}

Result<Ok, std::string> SandboxResolver::probe(const policy::Endpoint& endpoint) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
    const auto fd = net::bindSocket(type, endpoint, kListenBacklog);
    if (!fd) {
      return Err{describe(endpoint, type == SOCK_STREAM ? "tcp" : "udp", fd.error().error)};
    }
    ::close(*fd);
  }
  return Ok{};
}

Result<Ok, std::string> SandboxResolver::start() {
  if (closing_) {
    return Err{endpoint_.toString() + ": the resolver is closed"};
  }
  if (started_) {
    return Ok{};
  }
  // Port 0 (tests): TCP picks a free port and UDP must get the same number; if UDP has it in
  // use, try another. A configured port is tried once, and its error reported.
  const bool any_port = endpoint_.port == 0;
  policy::Endpoint bound = endpoint_;
  int tcp_fd = -1;
  int udp_fd = -1;
  for (int attempt = 0;; ++attempt) {
    bound.port = endpoint_.port;
    const auto tcp = net::bindSocket(SOCK_STREAM, bound, kListenBacklog);
    if (!tcp) {
      return Err{describe(bound, "tcp", tcp.error().error)};
    }
    tcp_fd = *tcp;
    const auto local = net::localEndpoint(tcp_fd);
    bound.port = local ? local->port : 0;
    const auto udp = net::bindSocket(SOCK_DGRAM, bound, kListenBacklog);
    if (udp) {
      udp_fd = *udp;
      break;
    }
    ::close(tcp_fd);
    if (!(any_port && udp.error().error == EADDRINUSE && attempt < 16)) {
      return Err{describe(bound, "udp", udp.error().error)};
    }
  }

  int rc = uv_tcp_open(listener_, tcp_fd);
  if (rc != 0) {
    ::close(tcp_fd);
    ::close(udp_fd);
    return Err{bound.toString() + " (tcp): " + uv_strerror(rc)};
  }
  rc = uv_udp_open(udp_, udp_fd);
  if (rc != 0) {
    ::close(udp_fd);
    return Err{bound.toString() + " (udp): " + uv_strerror(rc)};
  }
  // uv_udp_open sets SO_REUSEADDR (libuv 1.44 does, for multicast). On Linux that would let a
  // later socket with SO_REUSEADDR bind this address and port too and take the sandbox's
  // queries; the kernel checks the flag of both sockets at that later bind, so clear ours.
  const int zero = 0;
  if (::setsockopt(udp_fd, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof(zero)) != 0) {
    return Err{describe(bound, "udp", errno)};
  }
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener_), kListenBacklog,
                 &SandboxResolver::onTcpConnection);
  if (rc != 0) {
    return Err{bound.toString() + " (tcp): " + uv_strerror(rc)};
  }
  rc = uv_udp_recv_start(udp_, &io::allocReadBuffer, &SandboxResolver::onUdpRecv);
  if (rc != 0) {
    return Err{bound.toString() + " (udp): " + uv_strerror(rc)};
  }
  endpoint_ = bound;
  started_ = true;
  return Ok{};
}

// ---- Answering ----------------------------------------------------------------------------

bool SandboxResolver::respond(std::span<const std::uint8_t> message, bool udp,
                              const policy::Endpoint& client, std::vector<std::uint8_t>& out) {
  ++stats_.queries;
  Query query;
  switch (parseQuery(message, &query)) {
    case ParseOutcome::Drop:
      ++stats_.dropped;
      return false;
    case ParseOutcome::FormErr:
      ++stats_.formerr;
      buildError(out, message, Rcode::FormErr);
      return true;
    case ParseOutcome::NotImp:
      ++stats_.notimp;
      buildError(out, message, Rcode::NotImp);
      return true;
    case ParseOutcome::Query:
      break;
  }
  if (query.qclass != kDnsClassIn) {
    ++stats_.refused;
    buildResponse(out, message, query, Rcode::Refused, {}, 0);
    return true;
  }

  const SandboxAnswer answer = answer_(query.name(), query.qtype, client);
  if (answer.kind == SandboxAnswer::Kind::Refused) {
    ++stats_.refused;
    buildResponse(out, message, query, Rcode::Refused, {}, 0);
    return true;
  }
  if (answer.kind == SandboxAnswer::Kind::NxDomain) {
    ++stats_.nxdomain;
    buildResponse(out, message, query, Rcode::NxDomain, {}, 0);
    return true;
  }
  // Only A and AAAA questions get records, and only of their own family (the header comment):
  // whatever the Answerer returns, no other type carries anything out of, or into, the sandbox.
  std::array<policy::IpAddress, kMaxAddresses> picked;
  std::size_t count = 0;
  if (answer.kind == SandboxAnswer::Kind::Addresses &&
      (query.qtype == kDnsTypeA || query.qtype == kDnsTypeAaaa)) {
    const bool want_v4 = query.qtype == kDnsTypeA;
    for (const policy::IpAddress& address : answer.addresses) {
      if (address.isV4() == want_v4 && count < picked.size()) {
        picked[count++] = address;
      }
    }
  }
  const std::size_t limit = udp ? query.udpLimit() : kMaxTcpResponseBytes;
  while (count > 0 &&
         responseSize(query, std::span<const policy::IpAddress>(picked.data(), count)) > limit) {
    --count;
  }
  if (count == 0) {
    ++stats_.nodata;
  } else {
    ++stats_.answered;
  }
  buildResponse(out, message, query, Rcode::NoError,
                std::span<const policy::IpAddress>(picked.data(), count), answer.ttl);
  return true;
}

// ---- UDP ----------------------------------------------------------------------------------

void SandboxResolver::onUdpRecv(uv_udp_t* udp, ssize_t nread, const uv_buf_t* buf,
                                const sockaddr* peer, unsigned flags) noexcept {
  auto* self = static_cast<SandboxResolver*>(udp->data);
  // nread < 0: a socket error (an ICMP error for an earlier reply, say), nothing to answer.
  // peer null: nothing more to read this round.
  if (!self || self->closing_ || nread < 0 || !peer) {
    return;
  }
  if (flags & UV_UDP_PARTIAL) {  // cannot happen with a 64 KiB buffer; never answer half
    ++self->stats_.queries;
    ++self->stats_.dropped;
    return;
  }
  auto message = std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(buf->base),
                                               static_cast<std::size_t>(nread));
  self->reply_.clear();
  const policy::Endpoint client = net::fromSockaddr(peer).value_or(policy::Endpoint{});
  if (!self->respond(message, /*udp=*/true, client, self->reply_) || self->closing_) {
    return;  // closing_: the Answerer broke its contract and closed us; send nothing more
  }
  uv_buf_t out = uv_buf_init(reinterpret_cast<char*>(self->reply_.data()),
                             static_cast<unsigned>(self->reply_.size()));
  // try_send or nothing: a reply the kernel cannot take now is dropped (the client retries),
  // so a flood can never queue replies in memory.
  if (uv_udp_try_send(udp, &out, 1, peer) < 0) {
    ++self->stats_.dropped;
  }
}

// ---- TCP ----------------------------------------------------------------------------------

void SandboxResolver::onTcpConnection(uv_stream_t* server, int status) noexcept {
  auto* self = static_cast<SandboxResolver*>(server->data);
  if (!self || self->closing_ || status != 0) {
    return;  // EMFILE and friends: libuv keeps listening
  }
  self->acceptConnection();
}

void SandboxResolver::acceptConnection() {
  auto* c = new Connection;
  c->owner = this;
  uv_tcp_init(loop_, &c->tcp);
  uv_timer_init(loop_, &c->idle);
  c->tcp.data = c;
  c->idle.data = c;
  c->write_req.data = c;
  live_handles_ += 2;
  c->prev = newest_;
  (newest_ ? newest_->next : oldest_) = c;
  newest_ = c;
  ++open_connections_;
  if (uv_accept(reinterpret_cast<uv_stream_t*>(listener_),
                reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
    closeConnection(*c);
    return;
  }
  ++stats_.tcp_connections;
  if (open_connections_ > limits_.max_tcp_connections) {
    evictOldest();
  }
  if (c->closing) {
    return;  // max_tcp_connections is 0
  }
  uv_tcp_nodelay(&c->tcp, 1);
  sockaddr_storage peer{};
  int length = sizeof(peer);
  if (uv_tcp_getpeername(&c->tcp, reinterpret_cast<sockaddr*>(&peer), &length) == 0) {
    c->peer =
        net::fromSockaddr(reinterpret_cast<const sockaddr*>(&peer)).value_or(policy::Endpoint{});
  }
  armIdle(*c);
  startReading(*c);
}

// The newest connections are the ones a client is waiting on now; the oldest has had its
// chance (and a well-behaved client reconnects). Only the sandbox itself can fill the table.
void SandboxResolver::evictOldest() {
  for (Connection* c = oldest_; c; c = c->next) {
    if (!c->closing) {
      ++stats_.tcp_evicted;
      closeConnection(*c);
      return;
    }
  }
}

void SandboxResolver::armIdle(Connection& c) {
  uv_timer_start(&c.idle, &SandboxResolver::onIdleTimer,
                 static_cast<std::uint64_t>(limits_.tcp_idle_timeout.count()), 0);
}

void SandboxResolver::onIdleTimer(uv_timer_t* timer) noexcept {
  auto* c = static_cast<Connection*>(timer->data);
  if (c->owner && !c->closing) {
    c->owner->closeConnection(*c);
  }
}

void SandboxResolver::startReading(Connection& c) {
  if (c.reading || c.closing || c.eof) {
    return;
  }
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&c.tcp), &io::allocReadBuffer,
                    &SandboxResolver::onTcpRead) == 0) {
    c.reading = true;
  }
}

void SandboxResolver::stopReading(Connection& c) {
  if (c.reading) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&c.tcp));
    c.reading = false;
  }
}

void SandboxResolver::onTcpRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) noexcept {
  auto* c = static_cast<Connection*>(stream->data);
  SandboxResolver* self = c->owner;
  if (!self || c->closing) {
    return;
  }
  if (nread > 0) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(buf->base);
    c->in.insert(c->in.end(), bytes, bytes + nread);
    self->pump(*c);
    return;
  }
  if (nread == 0) {
    return;  // EAGAIN
  }
  if (nread != UV_EOF) {
    self->closeConnection(*c);
    return;
  }
  // The client is done sending (RFC 7766 §6.2.4): answer what is complete, then close. While
  // reading, every complete query has been answered, so what is left is a cut-off one.
  c->eof = true;
  self->stopReading(*c);
  if (!c->in.empty()) {
    ++self->stats_.queries;
    ++self->stats_.dropped;
    c->in.clear();
  }
  self->pump(*c);
}

// Answers buffered queries and writes, as far as the output cap allows; then reads on, or
// waits for a write to finish (onTcpWrite calls back here), or closes after EOF.
void SandboxResolver::pump(Connection& c) {
  for (;;) {
    const std::size_t consumed = processBuffered(c);
    if (c.closing) {
      return;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(consumed));
    flush(c);
    if (c.closing) {
      return;
    }
    if (c.backlog() >= limits_.max_pending_bytes) {
      if (c.reading) {
        ++stats_.tcp_read_pauses;
        stopReading(c);
      }
      return;
    }
    if (consumed == 0) {
      break;  // no complete query left
    }
  }
  if (c.in.empty() && c.in.capacity() > kMaxTcpQueryBytes) {
    std::vector<std::uint8_t>().swap(c.in);  // a large read once: give it back
  }
  if (c.eof) {
    if (c.backlog() == 0) {
      closeConnection(c);
    }
    return;
  }
  startReading(c);
}

std::size_t SandboxResolver::processBuffered(Connection& c) {
  std::size_t at = 0;
  while (!closing_ && c.backlog() < limits_.max_pending_bytes && c.in.size() - at >= 2) {
    const std::size_t length = static_cast<std::size_t>(c.in[at] << 8 | c.in[at + 1]);
    if (length > kMaxTcpQueryBytes) {
      ++stats_.queries;
      ++stats_.dropped;
      closeConnection(c);
      return at;
    }
    if (c.in.size() - at - 2 < length) {
      break;
    }
    const std::size_t prefix_at = c.pending.size();
    c.pending.resize(prefix_at + 2);
    const auto message = std::span<const std::uint8_t>(c.in.data() + at + 2, length);
    if (respond(message, /*udp=*/false, c.peer, c.pending)) {
      const std::size_t size = c.pending.size() - prefix_at - 2;
      c.pending[prefix_at] = static_cast<std::uint8_t>(size >> 8);
      c.pending[prefix_at + 1] = static_cast<std::uint8_t>(size);
    } else {
      c.pending.resize(prefix_at);
    }
    at += 2 + length;
    armIdle(c);
  }
  return at;
}

void SandboxResolver::flush(Connection& c) {
  if (c.write_in_flight || c.pending.empty() || c.closing) {
    return;
  }
  uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(c.pending.data()),
                             static_cast<unsigned>(c.pending.size()));
  const int written = uv_try_write(reinterpret_cast<uv_stream_t*>(&c.tcp), &buf, 1);
  if (written > 0) {
    c.pending.erase(c.pending.begin(), c.pending.begin() + written);
    if (c.pending.empty()) {
      return;
    }
  }
  // EAGAIN, a short write, or an error: uv_write takes the rest and reports any error from the
  // loop, through onTcpWrite.
  c.inflight.swap(c.pending);
  c.pending.clear();
  buf = uv_buf_init(reinterpret_cast<char*>(c.inflight.data()),
                    static_cast<unsigned>(c.inflight.size()));
  if (uv_write(&c.write_req, reinterpret_cast<uv_stream_t*>(&c.tcp), &buf, 1,
               &SandboxResolver::onTcpWrite) != 0) {
    c.inflight.clear();
    closeConnection(c);
    return;
  }
  c.write_in_flight = true;
}

void SandboxResolver::onTcpWrite(uv_write_t* req, int status) noexcept {
  auto* c = static_cast<Connection*>(req->data);
  c->write_in_flight = false;
  c->inflight.clear();
  // After close(): UV_ECANCELED, before the handle's close callback; nothing more to do.
  if (!c->owner || c->closing) {
    return;
  }
  if (status != 0) {
    c->owner->closeConnection(*c);
    return;
  }
  c->owner->pump(*c);
}

void SandboxResolver::closeConnection(Connection& c) {
  if (c.closing) {
    return;
  }
  c.closing = true;
  --open_connections_;
  stopReading(c);
  uv_close(reinterpret_cast<uv_handle_t*>(&c.tcp), &SandboxResolver::onConnectionHandleClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&c.idle), &SandboxResolver::onConnectionHandleClosed);
}

void SandboxResolver::onConnectionHandleClosed(uv_handle_t* handle) noexcept {
  auto* c = static_cast<Connection*>(handle->data);
  SandboxResolver* self = c->owner;
  if (self) {
    --self->live_handles_;
  }
  if (--c->open_handles > 0) {
    return;
  }
  if (self) {
    (c->prev ? c->prev->next : self->oldest_) = c->next;
    (c->next ? c->next->prev : self->newest_) = c->prev;
  }
  delete c;
  if (self) {
    self->maybeDone();  // last: `done` may destroy the resolver
  }
}

// ---- Closing ------------------------------------------------------------------------------

void SandboxResolver::close(std::function<void()> done) {
  if (closing_) {
    return;
  }
  closing_ = true;
  done_ = std::move(done);
  uv_close(reinterpret_cast<uv_handle_t*>(udp_), &SandboxResolver::onListenerClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(listener_), &SandboxResolver::onListenerClosed);
  for (Connection* c = oldest_; c; c = c->next) {
    closeConnection(*c);
  }
}

void SandboxResolver::onListenerClosed(uv_handle_t* handle) noexcept {
  auto* self = static_cast<SandboxResolver*>(handle->data);
  if (handle->type == UV_UDP) {
    if (self) {
      self->udp_ = nullptr;
    }
    delete reinterpret_cast<uv_udp_t*>(handle);
  } else {
    if (self) {
      self->listener_ = nullptr;
    }
    delete reinterpret_cast<uv_tcp_t*>(handle);
  }
  if (self) {
    --self->live_handles_;
    self->maybeDone();
  }
}

void SandboxResolver::maybeDone() {
  if (closing_ && live_handles_ == 0 && done_) {
    auto done = std::move(done_);  // moved out first: `done` may destroy the resolver
    done_ = nullptr;
    done();
  }
}

}  // namespace sluice::proxy::dns
