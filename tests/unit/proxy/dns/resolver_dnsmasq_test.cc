// The resolver with no servers configured (resolv.conf), and against a real dnsmasq when one
// is installed.
#include "proxy/dns/resolver.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/proxy/dns/resolver_test_support.h"

namespace sluice::proxy::dns {
namespace {

using namespace resolver_test;
using namespace std::chrono_literals;

TEST_F(ResolverTest, EmptyServersMeanResolvConf) {
  policy::DnsSettings s;  // no servers; nothing is sent: this test makes no lookup
  auto& resolver = makeResolver(s);
  EXPECT_EQ(resolver.servers(), readResolvConf("/etc/resolv.conf"));
}

// Real dnsmasq, started here on a free loopback port, answering pkg.test and NXDOMAIN for the
// rest (without --address=/#/ Debian 12's dnsmasq would answer REFUSED).
class DnsmasqTest : public ResolverTest {
 protected:
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (!dir_.empty()) {
      std::filesystem::remove_all(dir_);
    }
    ResolverTest::TearDown();
  }

  static std::uint16_t freeUdpPort() {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
  }

  // Whether something answers DNS on 127.0.0.1:port (a blocking probe, 100 ms per try).
  static bool answers(std::uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    timeval tv{0, 100000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // clang-format off
    const unsigned char query[] = {
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // id, RD, 1 query
        5, 'p', 'r', 'o', 'b', 'e', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1};        // probe.test A IN
    // clang-format on
    ::sendto(fd, query, sizeof(query), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    unsigned char reply[512];
    ssize_t n = ::recv(fd, reply, sizeof(reply), 0);
    ::close(fd);
    return n >= 12 && reply[0] == 0x12 && reply[1] == 0x34;
  }

  pid_t pid_ = -1;
  std::string dir_;
};

TEST_F(DnsmasqTest, ResolvesThroughRealDnsmasq) {
  const char* dnsmasq = "/usr/sbin/dnsmasq";
  if (::access(dnsmasq, X_OK) != 0) {
    GTEST_SKIP() << dnsmasq << " not installed (Debian package dnsmasq-base)";
  }
  char tmpl[] = "/tmp/sluice-dnsmasq-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
  const std::uint16_t port = freeUdpPort();
  const std::string log = dir_ + "/queries.log";
  std::vector<std::string> args = {dnsmasq,
                                   "--keep-in-foreground",
                                   "--no-resolv",
                                   "--no-hosts",
                                   "--port=" + std::to_string(port),
                                   "--listen-address=127.0.0.1",
                                   "--bind-interfaces",
                                   "--address=/pkg.test/127.0.0.2",
                                   "--address=/#/",
                                   "--log-queries",
                                   "--log-facility=" + log,
                                   "--pid-file=" + dir_ + "/dnsmasq.pid",
                                   "--user=root"};
  pid_ = ::fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    ::execv(dnsmasq, argv.data());
    std::_Exit(127);
  }
  // (Up to 20 s: a loaded machine, as the test command's parallel trees make it, may take
  // seconds to start a process.)
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = answers(port);
  }
  ASSERT_TRUE(up) << "dnsmasq did not come up on port " << port;

  auto s = settings();
  s.servers = {endpointOf("127.0.0.1:" + std::to_string(port))};
  makeResolver(s);
  EXPECT_EQ(addressesOf(resolveNow("pkg.test")), std::vector{ip("127.0.0.2")});
  EXPECT_EQ(addressesOf(resolveNow("a.b.pkg.test")), std::vector{ip("127.0.0.2")});
  auto nx = resolveNow("other.test");
  ASSERT_FALSE(nx.ok());
  EXPECT_EQ(nx.error(), DnsError::NotFound);
  auto localhost = resolveNow("localhost");
  EXPECT_FALSE(localhost.ok()) << "dnsmasq --address=/#/ says NXDOMAIN; /etc/hosts is not read";

  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("pkg.test"), std::string::npos) << text;
}

}  // namespace
}  // namespace sluice::proxy::dns
