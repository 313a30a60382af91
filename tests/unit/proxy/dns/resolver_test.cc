// The resolver against an in-process DNS server on a real libuv loop (and real dnsmasq when it
// is installed). Every test ends with the resolver closed and uv_loop_close() == 0.
#include "proxy/dns/resolver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/dns/resolv_conf.h"
// Compiled into this test directly (the unit-test CMake function links one source per test).
#include "tests/support/fake_dns_server.h"
#include "tests/support/loop_driver.h"

namespace sluice::proxy::dns {
namespace {

using namespace std::chrono_literals;
using sluice::testing::FakeDnsServer;
using Mode = FakeDnsServer::Mode;
using Zone = FakeDnsServer::Zone;

policy::IpAddress ip(std::string_view text) {
  auto parsed = policy::IpAddress::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(policy::IpAddress());
}

policy::Endpoint endpointOf(const std::string& text) {
  auto parsed = policy::Endpoint::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(policy::Endpoint());
}

// What one caller saw.
struct Outcome {
  int calls = 0;
  std::optional<LookupResult> result;
};

class ResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    server_ = std::make_unique<FakeDnsServer>(&loop_);
  }

  // Every test ends here: close the resolver and the server, let the loop free the handles,
  // and require that nothing is left on the loop.
  void TearDown() override {
    bool closed = resolver_ == nullptr;
    if (resolver_) {
      resolver_->close([&] { closed = true; });
    }
    server_->close();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed) << "close() never called done";
    resolver_.reset();
    server_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  policy::DnsSettings settings(std::chrono::milliseconds timeout = 2000ms,
                               std::chrono::milliseconds max_ttl = 300000ms) {
    policy::DnsSettings s;
    s.servers = {endpointOf(server_->address())};
    s.timeout = timeout;
    s.max_ttl = max_ttl;
    return s;
  }

  Resolver& makeResolver(const policy::DnsSettings& s,
                         std::size_t max_names = Resolver::kDefaultMaxCachedNames) {
    resolver_ = std::make_unique<Resolver>(&loop_, s, max_names);
    return *resolver_;
  }
  Resolver& makeResolver() { return makeResolver(settings()); }

  // Drives the loop until `done` holds or `limit` passes (a safety net, not a sleep).
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
    return test_support::runLoopUntil(&loop_, done, limit);
  }

  // Lets the loop run for `how_long` (to let a TTL pass, or to show that nothing happens).
  void runFor(std::chrono::milliseconds how_long) {
    bool expired = false;
    runUntil([&] { return expired; }, how_long);
  }

  // Starts a lookup whose callback records into `out`; returns the handle, or nullptr when the
  // result came back at once (then out.result is set and out.calls stays 0).
  std::unique_ptr<Resolver::Lookup> start(std::string_view name, Outcome& out) {
    auto r = resolver_->resolve(name, [&out](LookupResult result) {
      ++out.calls;
      out.result = std::move(result);
    });
    if (auto* now = std::get_if<LookupResult>(&r)) {
      out.result = std::move(*now);
      return nullptr;
    }
    auto lookup = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r));
    EXPECT_EQ(out.calls, 0) << "callback ran inside resolve()";
    return lookup;
  }

  // Resolves `name` to completion. `immediate` says whether it came back without a callback.
  LookupResult resolveNow(std::string_view name, bool* immediate = nullptr) {
    Outcome out;
    auto lookup = start(name, out);
    if (immediate) {
      *immediate = lookup == nullptr;
    }
    if (lookup) {
      EXPECT_TRUE(runUntil([&] { return out.calls > 0; })) << "no answer for " << name;
      EXPECT_EQ(out.calls, 1);
    }
    if (!out.result) {
      return LookupResult(Err{DnsError::Cancelled});
    }
    return std::move(*out.result);
  }

  uv_loop_t loop_{};
  std::unique_ptr<FakeDnsServer> server_;
  std::unique_ptr<Resolver> resolver_;
};

std::vector<policy::IpAddress> addressesOf(const LookupResult& r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : toString(r.error()));
  return r.ok() ? r.value()->addresses : std::vector<policy::IpAddress>{};
}

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

TEST_F(ResolverTest, FailsOverToTheNextServer) {
  FakeDnsServer good(&loop_);
  good.set("pkg.test", Zone{Mode::Answer, {"192.0.2.7"}, {}, 60, false});
  server_->set("pkg.test", Zone{Mode::Refused, {}, {}, 60, false});
  auto s = settings();
  s.servers.push_back(endpointOf(good.address()));
  makeResolver(s);
  EXPECT_EQ(addressesOf(resolveNow("pkg.test")), std::vector{ip("192.0.2.7")});
  EXPECT_GE(server_->queries("pkg.test"), 1);
  good.close();
}

TEST_F(ResolverTest, SilentServerTimesOutWithinTheBudget) {
  server_->set("slow.test", Zone{Mode::Silent, {}, {}, 60, false});
  auto& resolver = makeResolver(settings(300ms));
  const auto start_time = std::chrono::steady_clock::now();
  auto r = resolveNow("slow.test");
  const auto elapsed = std::chrono::steady_clock::now() - start_time;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::Timeout);
  // 100 ms, then 200 ms: about settings.timeout, measured loosely.
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LE(elapsed, 800ms);
  EXPECT_EQ(server_->queries("slow.test", FakeDnsServer::kTypeA), Resolver::kTries);
  bool immediate = true;
  (void)resolveNow("slow.test", &immediate);
  EXPECT_FALSE(immediate) << "timeouts are not cached";
  EXPECT_EQ(resolver.stats().failures, 2u);
}

TEST_F(ResolverTest, TimeoutBudgetIsSharedAcrossServers) {
  FakeDnsServer second(&loop_);
  server_->set("slow.test", Zone{Mode::Silent, {}, {}, 60, false});
  second.set("slow.test", Zone{Mode::Silent, {}, {}, 60, false});
  auto s = settings(300ms);
  s.servers.push_back(endpointOf(second.address()));
  makeResolver(s);
  const auto start_time = std::chrono::steady_clock::now();
  auto r = resolveNow("slow.test");
  const auto elapsed = std::chrono::steady_clock::now() - start_time;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), DnsError::Timeout);
  EXPECT_LE(elapsed, 800ms);
  EXPECT_EQ(second.queries("slow.test", FakeDnsServer::kTypeA), Resolver::kTries);
  second.close();
}

TEST_F(ResolverTest, CancelledLookupNeverCallsBack) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, true});
  auto& resolver = makeResolver();
  Outcome out;
  auto lookup = start("pkg.test", out);
  ASSERT_TRUE(lookup);
  ASSERT_TRUE(runUntil([&] { return server_->held() == 2; }));
  lookup.reset();
  server_->releaseHeld();
  ASSERT_TRUE(runUntil([&] { return resolver.inFlight() == 0; }));
  runFor(20ms);
  EXPECT_EQ(out.calls, 0);
  // The answer nobody waited for is still cached.
  bool immediate = false;
  EXPECT_EQ(addressesOf(resolveNow("pkg.test", &immediate)), std::vector{ip("192.0.2.1")});
  EXPECT_TRUE(immediate);
  EXPECT_EQ(server_->queries("pkg.test"), 2);
}

TEST_F(ResolverTest, JoinsConcurrentLookupsOfOneName) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, true});
  auto& resolver = makeResolver();
  std::vector<Outcome> outs(10);
  std::vector<std::unique_ptr<Resolver::Lookup>> lookups;
  for (auto& out : outs) {
    lookups.push_back(start("pkg.test", out));
    ASSERT_TRUE(lookups.back());
  }
  ASSERT_TRUE(runUntil([&] { return server_->held() == 2; }));
  server_->releaseHeld();
  ASSERT_TRUE(runUntil([&] {
    return std::all_of(outs.begin(), outs.end(), [](const Outcome& o) { return o.calls > 0; });
  }));
  for (auto& out : outs) {
    EXPECT_EQ(out.calls, 1);
    ASSERT_TRUE(out.result && out.result->ok());
    EXPECT_EQ(out.result->value(), outs[0].result->value()) << "one shared Answer";
  }
  EXPECT_EQ(server_->queries("pkg.test", FakeDnsServer::kTypeA), 1);
  EXPECT_EQ(server_->queries("pkg.test", FakeDnsServer::kTypeAaaa), 1);
  EXPECT_EQ(resolver.stats().queries, 1u);
  EXPECT_EQ(resolver.stats().joined, 9u);
}

TEST_F(ResolverTest, CancellingOneJoinedLookupKeepsTheOthers) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, true});
  makeResolver();
  Outcome first, second, third;
  auto l1 = start("pkg.test", first);
  auto l2 = start("pkg.test", second);
  auto l3 = start("pkg.test", third);
  ASSERT_TRUE(runUntil([&] { return server_->held() == 2; }));
  l2.reset();
  server_->releaseHeld();
  ASSERT_TRUE(runUntil([&] { return first.calls > 0 && third.calls > 0; }));
  runFor(20ms);
  EXPECT_EQ(second.calls, 0);
  EXPECT_EQ(first.calls, 1);
  EXPECT_EQ(third.calls, 1);
}

TEST_F(ResolverTest, CallbackMayDestroyOtherLookupsAndItsOwn) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, false});
  makeResolver();
  std::unique_ptr<Resolver::Lookup> l1, l2, l3;
  int calls1 = 0, calls2 = 0, calls3 = 0;
  auto r1 = resolver_->resolve("pkg.test", [&](LookupResult) {
    ++calls1;
    l1.reset();  // its own handle
    l2.reset();  // a caller not yet delivered
  });
  auto r2 = resolver_->resolve("pkg.test", [&](LookupResult) { ++calls2; });
  auto r3 = resolver_->resolve("pkg.test", [&](LookupResult) { ++calls3; });
  l1 = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r1));
  l2 = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r2));
  l3 = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r3));
  ASSERT_TRUE(runUntil([&] { return calls3 > 0; }));
  EXPECT_EQ(calls1, 1);
  EXPECT_EQ(calls2, 0);
  EXPECT_EQ(calls3, 1);
}

TEST_F(ResolverTest, CallbackMayResolveAgain) {
  server_->set("a.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 0, false});
  server_->set("b.test", Zone{Mode::Answer, {"192.0.2.2"}, {}, 60, false});
  makeResolver();
  Outcome inner;
  std::unique_ptr<Resolver::Lookup> inner_lookup;
  int outer_calls = 0;
  auto r = resolver_->resolve("a.test", [&](LookupResult) {
    ++outer_calls;
    inner_lookup = start("a.test", inner);  // TTL 0: a fresh query, not a join of a dead one
  });
  auto outer = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r));
  ASSERT_TRUE(runUntil([&] { return inner.calls > 0; }));
  EXPECT_EQ(outer_calls, 1);
  EXPECT_EQ(addressesOf(*inner.result), std::vector{ip("192.0.2.1")});
  EXPECT_EQ(server_->queries("a.test", FakeDnsServer::kTypeA), 2);
}

TEST_F(ResolverTest, CloseWithLookupsInFlightCallsNothing) {
  server_->set("slow.test", Zone{Mode::Silent, {}, {}, 60, false});
  server_->set("held.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, true});
  auto& resolver = makeResolver();
  Outcome a, b, c;
  auto la = start("slow.test", a);
  auto lb = start("held.test", b);
  auto lc = start("held.test", c);
  ASSERT_TRUE(runUntil([&] { return server_->held() == 2; }));
  bool done = false;
  resolver.close([&] { done = true; });
  server_->releaseHeld();
  Outcome after;
  EXPECT_FALSE(start("held.test", after));
  EXPECT_EQ(after.result->error(), DnsError::Cancelled);
  ASSERT_TRUE(runUntil([&] { return done; }));
  EXPECT_EQ(a.calls + b.calls + c.calls, 0);
  lb.reset();  // inert handles: destroying them after close is fine, even after the Resolver
  resolver_.reset();
  la.reset();
}

TEST_F(ResolverTest, CloseInsideACallbackStopsTheRest) {
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, false});
  makeResolver();
  bool done = false;
  int calls1 = 0, calls2 = 0;
  auto r1 = resolver_->resolve("pkg.test", [&](LookupResult) {
    ++calls1;
    resolver_->close([&] { done = true; });
  });
  auto r2 = resolver_->resolve("pkg.test", [&](LookupResult) { ++calls2; });
  auto l1 = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r1));
  auto l2 = std::move(std::get<std::unique_ptr<Resolver::Lookup>>(r2));
  ASSERT_TRUE(runUntil([&] { return done; }));
  EXPECT_EQ(calls1, 1);
  EXPECT_EQ(calls2, 0);
  resolver_.reset();  // done ran: destroying it now is the documented way
}

TEST_F(ResolverTest, DestroyedWithoutCloseLeavesTheLoopClean) {
  server_->set("slow.test", Zone{Mode::Silent, {}, {}, 60, false});
  makeResolver();
  Outcome out;
  auto lookup = start("slow.test", out);
  ASSERT_TRUE(runUntil([&] { return server_->queries() == 2; }));
  resolver_.reset();  // the loop frees the handles on its next run (TearDown)
  lookup.reset();
  EXPECT_EQ(out.calls, 0);
}

TEST_F(ResolverTest, AnswerInsideAresQueryIsReturnedNotCalledBack) {
  auto& resolver = makeResolver();
  // Use up every descriptor, so that c-ares cannot open its socket and fails both questions
  // inside ares_query() itself. That result must come back from resolve(), not a callback.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  std::size_t open_now = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++open_now;
  }
  rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, open_now + 16);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) {
    fillers.push_back(fd);
  }
  Outcome out;
  auto lookup = start("pkg.test", out);
  for (int fd : fillers) {
    ::close(fd);
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);

  EXPECT_EQ(lookup, nullptr);
  ASSERT_TRUE(out.result);
  ASSERT_FALSE(out.result->ok());
  EXPECT_EQ(out.result->error(), DnsError::Refused);
  EXPECT_EQ(resolver.inFlight(), 0u);
  runFor(20ms);
  EXPECT_EQ(out.calls, 0);
  // Not cached: with descriptors back, the next lookup asks the server.
  server_->set("pkg.test", Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, false});
  EXPECT_EQ(addressesOf(resolveNow("pkg.test")), std::vector{ip("192.0.2.1")});
}

TEST_F(ResolverTest, IpLiteralsAndNonCanonicalNamesAreRefusedWithoutAQuery) {
  auto& resolver = makeResolver();
  for (std::string_view name : {"127.0.0.1", "::1", "[::1]", "0177.0.0.1", "2130706433", "Pkg.Test",
                                "pkg.test.", "", "a..b", "_x.test"}) {
    bool immediate = false;
    auto r = resolveNow(name, &immediate);
    EXPECT_TRUE(immediate) << name;
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.error(), DnsError::Failed) << name;
  }
  EXPECT_EQ(server_->queries(), 0);
  EXPECT_EQ(resolver.stats().queries, 0u);
}

TEST_F(ResolverTest, LocalhostGoesToDnsNotTheHostsFile) {
  makeResolver();  // the server says NXDOMAIN for everything unknown
  for (std::string_view name : {"localhost", "x.localhost"}) {
    auto r = resolveNow(name);
    ASSERT_FALSE(r.ok()) << name << " resolved to " << r.value()->addresses[0].toString();
    EXPECT_EQ(r.error(), DnsError::NotFound) << name;
    EXPECT_EQ(server_->queries(name), 2) << name;
  }
}

TEST_F(ResolverTest, EvictsLeastRecentlyUsedWhenFull) {
  for (const char* name : {"a.test", "b.test", "c.test"}) {
    server_->set(name, Zone{Mode::Answer, {"192.0.2.1"}, {}, 60, false});
  }
  makeResolver(settings(), 2);
  ASSERT_TRUE(resolveNow("a.test").ok());
  ASSERT_TRUE(resolveNow("b.test").ok());
  bool immediate = false;
  ASSERT_TRUE(resolveNow("a.test", &immediate).ok());  // a is now the most recent
  EXPECT_TRUE(immediate);
  ASSERT_TRUE(resolveNow("c.test").ok());  // evicts b
  ASSERT_TRUE(resolveNow("a.test", &immediate).ok());
  EXPECT_TRUE(immediate);
  ASSERT_TRUE(resolveNow("b.test", &immediate).ok());
  EXPECT_FALSE(immediate);
}

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
  bool up = false;
  for (int i = 0; i < 50 && !up; ++i) {
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
