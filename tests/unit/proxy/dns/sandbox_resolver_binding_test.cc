// The sandbox's resolver binding its address (nobody beside it, errors that name it, IPv6,
// dual-stack) and closing (before start, mid-query, destroyed early).
#include "proxy/dns/sandbox_resolver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/proxy/dns/sandbox_resolver_test_support.h"

namespace sluice::proxy::dns {
namespace {

using namespace sandbox_resolver_test;
using namespace std::chrono_literals;

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
    SandboxResolver r(&loop_, policy::Endpoint{ip("127.0.0.1"), port}, bedAnswerer);
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
    SandboxResolver r(&loop_, policy::Endpoint{ip("127.0.0.1"), ntohs(a.sin_port)}, bedAnswerer);
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
  resolver_ =
      std::make_unique<SandboxResolver>(&loop_, policy::Endpoint{ip("::1"), 0}, bedAnswerer);
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
  resolver_ = std::make_unique<SandboxResolver>(&loop_, policy::Endpoint{ip("::"), 0}, bedAnswerer);
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
      std::make_unique<SandboxResolver>(&loop_, policy::Endpoint{ip("127.0.0.1"), 0}, bedAnswerer);
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
