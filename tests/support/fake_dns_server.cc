#include "tests/support/fake_dns_server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace sluice::testing {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!out.empty() && out.back() == '.') {
    out.pop_back();
  }
  return out;
}

struct Question {
  std::string name;
  std::uint16_t type = 0;
  std::size_t end = 0;  // offset just past the question
};

// RFC 1035 §4.1: a 12-byte header, then QNAME as labels (no compression in a query), QTYPE,
// QCLASS. Anything else is dropped, like a real server would.
std::optional<Question> parseQuestion(const std::vector<std::uint8_t>& q) {
  if (q.size() < 12 || (q[2] & 0x80) != 0 || q[4] != 0 || q[5] != 1) {
    return std::nullopt;
  }
  Question out;
  std::size_t i = 12;
  while (true) {
    if (i >= q.size()) {
      return std::nullopt;
    }
    std::size_t len = q[i++];
    if (len == 0) {
      break;
    }
    if (len > 63 || i + len > q.size()) {
      return std::nullopt;
    }
    if (!out.name.empty()) {
      out.name += '.';
    }
    out.name.append(reinterpret_cast<const char*>(&q[i]), len);
    i += len;
  }
  if (i + 4 > q.size()) {
    return std::nullopt;
  }
  out.type = static_cast<std::uint16_t>(q[i] << 8 | q[i + 1]);
  out.end = i + 4;
  out.name = lower(out.name);
  return out;
}

void put16(std::vector<std::uint8_t>& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  put16(out, v >> 16);
  put16(out, v & 0xffff);
}

struct SendRequest {
  uv_udp_send_t req;
  std::vector<std::uint8_t> bytes;
};

}  // namespace

FakeDnsServer::FakeDnsServer(uv_loop_t* loop) : udp_(new uv_udp_t) {
  uv_udp_init(loop, udp_);
  udp_->data = this;
  sockaddr_in addr{};
  uv_ip4_addr("127.0.0.1", 0, &addr);
  if (uv_udp_bind(udp_, reinterpret_cast<const sockaddr*>(&addr), 0) != 0) {
    throw std::runtime_error("FakeDnsServer: bind failed");
  }
  sockaddr_storage bound{};
  int len = sizeof(bound);
  uv_udp_getsockname(udp_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  uv_udp_recv_start(udp_, &FakeDnsServer::onAlloc, &FakeDnsServer::onRecv);
}

FakeDnsServer::~FakeDnsServer() { close(); }

void FakeDnsServer::close() {
  if (udp_) {
    udp_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(udp_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_udp_t*>(h); });
    udp_ = nullptr;
  }
}

void FakeDnsServer::set(std::string_view name, Zone zone) { zones_[lower(name)] = std::move(zone); }

int FakeDnsServer::queries(std::string_view name) const {
  return queries(name, kTypeA) + queries(name, kTypeAaaa);
}

int FakeDnsServer::queries(std::string_view name, std::uint16_t type) const {
  auto it = counts_.find({lower(name), type});
  return it == counts_.end() ? 0 : it->second;
}

void FakeDnsServer::onAlloc(uv_handle_t* handle, std::size_t, uv_buf_t* buf) {
  auto* self = static_cast<FakeDnsServer*>(handle->data);
  if (!self) {
    buf->base = nullptr;
    buf->len = 0;
    return;
  }
  buf->base = self->buffer_;
  buf->len = sizeof(self->buffer_);
}

void FakeDnsServer::onRecv(uv_udp_t* udp, ssize_t nread, const uv_buf_t* buf, const sockaddr* peer,
                           unsigned) {
  auto* self = static_cast<FakeDnsServer*>(udp->data);
  if (!self || nread <= 0 || !peer) {
    return;
  }
  std::vector<std::uint8_t> query(buf->base, buf->base + nread);
  self->handle(query, peer, false);
}

void FakeDnsServer::handle(const std::vector<std::uint8_t>& query, const sockaddr* peer,
                           bool releasing) {
  auto q = parseQuestion(query);
  if (!q) {
    return;
  }
  if (!releasing) {
    ++total_;
    ++counts_[{q->name, q->type}];
  }
  auto zone_it = zones_.find(q->name);
  Zone zone = zone_it != zones_.end() ? zone_it->second : Zone{Mode::NxDomain, {}, {}, 0, false};
  if (zone.hold && !releasing) {
    Held held{};
    std::memcpy(&held.peer, peer, sizeof(sockaddr_in));
    held.query = query;
    held_.push_back(std::move(held));
    return;
  }
  std::uint8_t rcode = 0;
  switch (zone.mode) {
    case Mode::Silent:
      return;
    case Mode::NxDomain:
      rcode = 3;
      break;
    case Mode::Refused:
      rcode = 5;
      break;
    case Mode::ServFail:
      rcode = 2;
      break;
    case Mode::Answer:
      break;
  }
  std::vector<std::vector<std::uint8_t>> rdatas;
  if (zone.mode == Mode::Answer) {
    for (const std::string& text : q->type == kTypeA ? zone.a : std::vector<std::string>{}) {
      std::uint8_t bytes[4];
      if (inet_pton(AF_INET, text.c_str(), bytes) == 1) {
        rdatas.emplace_back(bytes, bytes + 4);
      }
    }
    for (const std::string& text : q->type == kTypeAaaa ? zone.aaaa : std::vector<std::string>{}) {
      std::uint8_t bytes[16];
      if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
        rdatas.emplace_back(bytes, bytes + 16);
      }
    }
  }
  std::vector<std::uint8_t> reply;
  reply.push_back(query[0]);  // id
  reply.push_back(query[1]);
  // QR, the query's opcode and RD; AA; RA; rcode.
  reply.push_back(static_cast<std::uint8_t>(0x80 | (query[2] & 0x79) | 0x04));
  reply.push_back(static_cast<std::uint8_t>(0x80 | rcode));
  put16(reply, 1);
  put16(reply, static_cast<std::uint32_t>(rdatas.size()));
  put16(reply, 0);
  put16(reply, 0);
  reply.insert(reply.end(), query.begin() + 12, query.begin() + static_cast<long>(q->end));
  for (const auto& rdata : rdatas) {
    put16(reply, 0xc00c);  // pointer to the question's name
    put16(reply, q->type);
    put16(reply, 1);  // IN
    put32(reply, zone.ttl);
    put16(reply, static_cast<std::uint32_t>(rdata.size()));
    reply.insert(reply.end(), rdata.begin(), rdata.end());
  }
  send(peer, std::move(reply));
}

void FakeDnsServer::send(const sockaddr* peer, std::vector<std::uint8_t> reply) {
  if (!udp_) {
    return;
  }
  auto* request = new SendRequest;
  request->bytes = std::move(reply);
  uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(request->bytes.data()),
                             static_cast<unsigned>(request->bytes.size()));
  int rc = uv_udp_send(&request->req, udp_, &buf, 1, peer, [](uv_udp_send_t* req, int) {
    delete reinterpret_cast<SendRequest*>(req);  // req is the first member
  });
  if (rc != 0) {
    delete request;
  }
}

void FakeDnsServer::releaseHeld() {
  std::vector<Held> held;
  held.swap(held_);
  for (const Held& h : held) {
    handle(h.query, reinterpret_cast<const sockaddr*>(&h.peer), true);
  }
}

}  // namespace sluice::testing
