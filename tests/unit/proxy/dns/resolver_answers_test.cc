// The resolver against an in-process DNS server on a real loop: which records it takes, how it
// caches them (TTLs, negative answers, max_ttl), and what each kind of failure answers.
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

TEST_F(ResolverTest, ResolvesARecordsOnly) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1", "192.0.2.2"}, {}, 60, false});
  makeResolver();
  auto r = resolveNow("pkg.test");
  EXPECT_EQ(addressesOf(r), (std::vector{ip("192.0.2.1"), ip("192.0.2.2")}));
  EXPECT_EQ(server_->queries("pkg.test", FakeDnsServer::kTypeA), 1);
  EXPECT_EQ(server_->queries("pkg.test", FakeDnsServer::kTypeAaaa), 1);
}

TEST_F(ResolverTest, ResolvesAaaaOnly) {
  server_->set("pkg.test", Zone{Mode::Answer, {}, {"2001:db8::2", "2001:db8::1"}, 60, false});
  makeResolver();
  EXPECT_EQ(addressesOf(resolveNow("pkg.test")),
            (std::vector{ip("2001:db8::2"), ip("2001:db8::1")}));
}

TEST_F(ResolverTest, ResolvesBothFamiliesAFirstInServerOrder) {
  server_->set("pkg.test",
               Zone{Mode::Answer, {"192.0.2.9", "192.0.2.1"}, {"2001:db8::1"}, 60, false});
  makeResolver();
  EXPECT_EQ(addressesOf(resolveNow("pkg.test")),
            (std::vector{ip("192.0.2.9"), ip("192.0.2.1"), ip("2001:db8::1")}));
}

TEST_F(ResolverTest, DeduplicatesAndCapsAddresses) {
  Zone zone{Mode::Answer, {"192.0.2.1", "192.0.2.1", "192.0.2.2"}, {}, 60, false};
  server_->set("dup.test", zone);
  zone.a.clear();
  for (int i = 0; i < 40; ++i) {
    zone.a.push_back("198.51.100." + std::to_string(i));
    zone.aaaa.push_back("2001:db8::" + std::to_string(i + 1));
  }
  server_->set("many.test", zone);
  makeResolver();
  EXPECT_EQ(addressesOf(resolveNow("dup.test")), (std::vector{ip("192.0.2.1"), ip("192.0.2.2")}));
  auto many = addressesOf(resolveNow("many.test"));
  ASSERT_EQ(many.size(), Answer::kMaxAddresses);
  EXPECT_EQ(many.front(), ip("198.51.100.0"));
  EXPECT_EQ(many[39], ip("198.51.100.39"));
  EXPECT_EQ(many[40], ip("2001:db8::1"));
  EXPECT_EQ(many.back(), ip("2001:db8::24"));  // the 24th AAAA: hex text, decimal count
}

TEST_F(ResolverTest, ServesRepeatLookupsFromCacheUntilTtl) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, false});
  auto& resolver = makeResolver();
  const auto before = std::chrono::steady_clock::now();
  auto first = resolveNow("pkg.test");
  ASSERT_TRUE(first.ok());
  EXPECT_GE(first.value()->expires, before + 59s);
  EXPECT_LE(first.value()->expires, std::chrono::steady_clock::now() + 60s);

  bool immediate = false;
  auto second = resolveNow("pkg.test", &immediate);
  EXPECT_TRUE(immediate);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value(), first.value()) << "the same shared Answer";
  EXPECT_EQ(server_->queries("pkg.test"), 2) << "one A and one AAAA, once";
  EXPECT_EQ(resolver.stats().queries, 1u);
  EXPECT_EQ(resolver.stats().cache_hits, 1u);
}

TEST_F(ResolverTest, TtlZeroIsNotCached) {
  server_->set("rebind.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 0, false});
  auto& resolver = makeResolver();
  ASSERT_TRUE(resolveNow("rebind.test").ok());
  bool immediate = true;
  ASSERT_TRUE(resolveNow("rebind.test", &immediate).ok());
  EXPECT_FALSE(immediate);
  EXPECT_EQ(server_->queries("rebind.test", FakeDnsServer::kTypeA), 2);
  EXPECT_EQ(resolver.stats().queries, 2u);
  EXPECT_EQ(resolver.stats().cache_hits, 0u);
}

TEST_F(ResolverTest, MaxTtlCapsCacheLifetime) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 3600, false});
  makeResolver(settings(2000ms, 200ms));
  auto first = resolveNow("pkg.test");
  ASSERT_TRUE(first.ok());
  EXPECT_LE(first.value()->expires, std::chrono::steady_clock::now() + 200ms);
  bool immediate = false;
  ASSERT_TRUE(resolveNow("pkg.test", &immediate).ok());
  EXPECT_TRUE(immediate) << "still fresh within max_ttl";
  runFor(300ms);
  ASSERT_TRUE(resolveNow("pkg.test", &immediate).ok());
  EXPECT_FALSE(immediate) << "max_ttl passed: asked again";
  EXPECT_EQ(server_->queries("pkg.test", FakeDnsServer::kTypeA), 2);
}

TEST_F(ResolverTest, NxDomainIsNotFoundAndNegativelyCached) {
  makeResolver();  // unknown names are NXDOMAIN
  auto r = resolveNow("nx.test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::NotFound);
  bool immediate = false;
  auto again = resolveNow("nx.test", &immediate);
  EXPECT_TRUE(immediate);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error(), DnsError::NotFound);
  EXPECT_EQ(server_->queries("nx.test"), 2);
  EXPECT_EQ(resolver_->stats().failures, 1u);
}

TEST_F(ResolverTest, NegativeCacheIsCappedByMaxTtl) {
  makeResolver(settings(2000ms, 100ms));
  ASSERT_FALSE(resolveNow("nx.test").ok());
  runFor(200ms);
  bool immediate = true;
  ASSERT_FALSE(resolveNow("nx.test", &immediate).ok());
  EXPECT_FALSE(immediate);
}

TEST_F(ResolverTest, NodataIsNoAddresses) {
  server_->set("empty.test", Zone{Mode::Answer, {}, {}, 60, false});
  makeResolver();
  auto r = resolveNow("empty.test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::NoAddresses);
  bool immediate = false;
  (void)resolveNow("empty.test", &immediate);
  EXPECT_TRUE(immediate) << "NODATA is cached too";
}

TEST_F(ResolverTest, RefusedIsRefusedAndNotCached) {
  server_->set("refused.test", Zone{Mode::Refused, {}, {}, 60, false});
  makeResolver();
  auto r = resolveNow("refused.test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::Refused);
  bool immediate = true;
  (void)resolveNow("refused.test", &immediate);
  EXPECT_FALSE(immediate);
}

TEST_F(ResolverTest, ServfailIsRefused) {
  server_->set("broken.test", Zone{Mode::ServFail, {}, {}, 60, false});
  makeResolver();
  auto r = resolveNow("broken.test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::Refused);
}

TEST_F(ResolverTest, UnreachableServerIsRefused) {
  // A port nobody listens on: the kernel answers with ICMP port unreachable.
  uv_udp_t probe;
  uv_udp_init(&loop_, &probe);
  sockaddr_in any{};
  uv_ip4_addr("127.0.0.1", 0, &any);
  ASSERT_EQ(uv_udp_bind(&probe, reinterpret_cast<const sockaddr*>(&any), 0), 0);
  sockaddr_in bound{};
  int len = sizeof(bound);
  uv_udp_getsockname(&probe, reinterpret_cast<sockaddr*>(&bound), &len);
  uv_close(reinterpret_cast<uv_handle_t*>(&probe), nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);

  auto s = settings(1000ms);
  s.servers = {endpointOf("127.0.0.1:" + std::to_string(ntohs(bound.sin_port)))};
  makeResolver(s);
  auto r = resolveNow("pkg.test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::Refused);
}

}  // namespace
}  // namespace sluice::proxy::dns
