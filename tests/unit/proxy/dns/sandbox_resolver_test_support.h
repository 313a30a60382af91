#pragma once
// What the tests of the sandbox's resolver share: queries built and responses read by hand
// (RFC 1035), blocking UDP and TCP clients for the helper thread, the test bed's policy as an
// Answerer, and the fixture: the resolver on a real loop on 127.0.0.1, every question it asks
// the Answerer recorded, and uv_loop_close() == 0 at the end of every test.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "policy/host_name.h"
#include "proxy/dns/sandbox_resolver.h"
#include "tests/support/loop_driver.h"
#include "tests/support/loopback_tcp_client.h"

namespace sluice::proxy::dns::sandbox_resolver_test {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using Asked = std::vector<std::pair<std::string, std::uint16_t>>;

constexpr std::uint16_t kTxt = 16;
constexpr std::uint16_t kHttps = 65;

inline policy::IpAddress ip(std::string_view text) {
  auto parsed = policy::IpAddress::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(policy::IpAddress());
}

// ---- Building queries and reading responses (RFC 1035, written here) ----------------------

inline void put16(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

inline Bytes makeQuery(std::uint16_t id, std::string_view name, std::uint16_t qtype,
                       bool edns = false, std::uint16_t qclass = 1, std::uint8_t flags1 = 0x01) {
  Bytes b;
  put16(b, id);
  b.push_back(flags1);
  b.push_back(0);
  put16(b, 1);
  put16(b, 0);
  put16(b, 0);
  put16(b, edns ? 1 : 0);
  while (!name.empty()) {
    const std::size_t dot = name.find('.');
    const std::string_view label = name.substr(0, dot);
    b.push_back(static_cast<std::uint8_t>(label.size()));
    b.insert(b.end(), label.begin(), label.end());
    name = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
  }
  b.push_back(0);
  put16(b, qtype);
  put16(b, qclass);
  if (edns) {
    b.insert(b.end(), {0, 0, 41, 0x10, 0x00, 0, 0, 0, 0, 0, 0});  // 4096 bytes
  }
  return b;
}

inline Bytes framed(const Bytes& message) {
  Bytes b;
  put16(b, static_cast<std::uint16_t>(message.size()));
  b.insert(b.end(), message.begin(), message.end());
  return b;
}

struct Reply {
  std::uint16_t id = 0;
  bool qr = false, aa = false, rd = false, ra = false, tc = false;
  int rcode = -1;
  int qd = 0, an = 0, ns = 0, ar = 0;
  std::vector<std::uint16_t> types;  // of the answer records
  std::vector<policy::IpAddress> addresses;
  std::size_t size = 0;
};

inline std::uint16_t read16(const Bytes& m, std::size_t at) {
  return static_cast<std::uint16_t>(m[at] << 8 | m[at + 1]);
}

// Enough of a decoder for what the resolver sends: the header, one uncompressed question, and
// answer records whose owner is a pointer.
inline std::optional<Reply> decode(const Bytes& m) {
  if (m.size() < 12) {
    return std::nullopt;
  }
  Reply r;
  r.size = m.size();
  r.id = read16(m, 0);
  r.qr = m[2] & 0x80;
  r.aa = m[2] & 0x04;
  r.tc = m[2] & 0x02;
  r.rd = m[2] & 0x01;
  r.ra = m[3] & 0x80;
  r.rcode = m[3] & 0xf;
  r.qd = read16(m, 4);
  r.an = read16(m, 6);
  r.ns = read16(m, 8);
  r.ar = read16(m, 10);
  std::size_t at = 12;
  if (r.qd == 1) {
    while (at < m.size() && m[at] != 0) {
      at += 1 + m[at];
    }
    at += 5;
  }
  for (int i = 0; i < r.an; ++i) {
    if (at + 12 > m.size() || m[at] != 0xc0 || m[at + 1] != 12) {
      return std::nullopt;
    }
    const std::uint16_t type = read16(m, at + 2);
    const std::size_t length = read16(m, at + 10);
    at += 12;
    if (at + length > m.size()) {
      return std::nullopt;
    }
    r.types.push_back(type);
    if (type == 1 && length == 4) {
      r.addresses.push_back(policy::IpAddress::fromV4(
          static_cast<std::uint32_t>(m[at] << 24 | m[at + 1] << 16 | m[at + 2] << 8 | m[at + 3])));
    } else if (type == 28 && length == 16) {
      std::array<std::uint8_t, 16> bytes;
      std::copy(m.begin() + static_cast<std::ptrdiff_t>(at),
                m.begin() + static_cast<std::ptrdiff_t>(at + 16), bytes.begin());
      r.addresses.push_back(policy::IpAddress::fromV6(bytes));
    }
    at += length;
  }
  return r;
}

// ---- Blocking clients (run on the helper thread) -------------------------------------------

inline void setTimeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(t.count() % 1000 * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

class UdpClient {
 public:
  explicit UdpClient(std::uint16_t port) : to_(loopback(port)) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    setTimeout(fd_, 3000ms);
  }
  ~UdpClient() { ::close(fd_); }
  void send(const Bytes& message) {
    ::sendto(fd_, message.data(), message.size(), 0, reinterpret_cast<const sockaddr*>(&to_),
             sizeof(to_));
  }
  std::optional<Bytes> receive() {
    Bytes buf(65536);
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0) {
      return std::nullopt;
    }
    buf.resize(static_cast<std::size_t>(n));
    return buf;
  }
  std::optional<Reply> ask(const Bytes& message) {
    send(message);
    auto bytes = receive();
    return bytes ? decode(*bytes) : std::nullopt;
  }

 private:
  int fd_;
  sockaddr_in to_;
};

class TcpClient : public test_support::LoopbackTcpClient {
 public:
  // buffer_size > 0: small socket buffers, set before connecting so the window is small too.
  explicit TcpClient(std::uint16_t port, int buffer_size = 0)
      : LoopbackTcpClient(port, 3000ms, buffer_size) {}

  using LoopbackTcpClient::send;
  bool send(const Bytes& bytes) { return send(bytes.data(), bytes.size()); }

  // Exactly n bytes, or nullopt on EOF, reset or timeout.
  std::optional<Bytes> readExactly(std::size_t n) {
    Bytes out(n);
    std::size_t at = 0;
    while (at < n) {
      const ssize_t got = ::recv(fd_, out.data() + at, n - at, 0);
      if (got <= 0) {
        return std::nullopt;
      }
      at += static_cast<std::size_t>(got);
    }
    return out;
  }
  std::optional<Bytes> readMessage() {
    auto prefix = readExactly(2);
    if (!prefix) {
      return std::nullopt;
    }
    return readExactly(read16(*prefix, 0));
  }
  std::optional<Reply> readReply() {
    auto m = readMessage();
    return m ? decode(*m) : std::nullopt;
  }
};

// ---- The fixture ---------------------------------------------------------------------------

// The policy of the integration test bed, as an Answerer: canonicalise, then allowed.test gets the
// sandbox-facing gateway address for A, nothing for other types; every other name NXDOMAIN.
inline SandboxAnswer bedPolicy(std::string_view qname, std::uint16_t qtype) {
  auto host = policy::canonicalizeHost(qname);
  if (!host || host->text() != "allowed.test") {
    return {SandboxAnswer::Kind::NxDomain, {}, 0};
  }
  if (qtype == kDnsTypeA) {
    return {SandboxAnswer::Kind::Addresses, {ip("10.200.0.1")}, 60};
  }
  return {SandboxAnswer::Kind::NoData, {}, 0};
}

// The same, as the resolver calls it (who asked does not change the bed's answer).
inline SandboxAnswer bedAnswerer(std::string_view qname, std::uint16_t qtype,
                                 const policy::Endpoint&) {
  return bedPolicy(qname, qtype);
}

class SandboxResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    wake_ = new uv_async_t;
    uv_async_init(&loop_, wake_, [](uv_async_t*) {});
    answerer_ = [](std::string_view qname, std::uint16_t qtype) { return bedPolicy(qname, qtype); };
  }

  void TearDown() override {
    bool closed = resolver_ == nullptr;
    if (resolver_) {
      resolver_->close([&] { closed = true; });
    }
    uv_close(reinterpret_cast<uv_handle_t*>(wake_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed) << "close() never called done";
    resolver_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  SandboxResolver& start(SandboxResolver::Limits limits = {}) {
    resolver_ = std::make_unique<SandboxResolver>(
        &loop_, policy::Endpoint{ip("127.0.0.1"), 0},
        [this](std::string_view qname, std::uint16_t qtype, const policy::Endpoint& client) {
          asked_.emplace_back(std::string(qname), qtype);
          clients_.push_back(client);
          return answerer_(qname, qtype);
        },
        limits);
    auto started = resolver_->start();
    EXPECT_TRUE(started.ok()) << (started.ok() ? "" : started.error());
    port_ = resolver_->endpoint().port;
    EXPECT_NE(port_, 0);
    return *resolver_;
  }

  // Runs `client` on a helper thread while this thread runs the loop; returns when it is done.
  void withClient(const std::function<void()>& client) {
    test_support::runLoopWithClient(&loop_, wake_, client);
  }

  // Drives the loop until `done` holds or `limit` passes (a safety net, not a sleep).
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
    return test_support::runLoopUntil(&loop_, done, limit);
  }

  uv_loop_t loop_{};
  uv_async_t* wake_ = nullptr;
  std::unique_ptr<SandboxResolver> resolver_;
  std::function<SandboxAnswer(std::string_view, std::uint16_t)> answerer_;
  Asked asked_;
  std::vector<policy::Endpoint> clients_;  // who asked each of asked_
  std::uint16_t port_ = 0;
};

}  // namespace sluice::proxy::dns::sandbox_resolver_test
