// The resolver's lookups on a real loop: fail-over and the timeout budget, joined and cancelled
// lookups, callbacks that destroy or start lookups, closing with lookups in flight, names that
// get no query, and the cache's bound.
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

}  // namespace
}  // namespace sluice::proxy::dns
