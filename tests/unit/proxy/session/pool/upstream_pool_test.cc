// The idle upstream pool's bounds: per key, per sandbox (counted over the pools of every worker)
// and its share of the total; least recently used first, across keys. Real loopback TCP connections
// on a real loop, so that what the pool closes is seen closed by the peer.
#include "proxy/session/pool/upstream_pool.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/loop_driver.h"

namespace sluice::proxy::session {
namespace {

using namespace std::chrono_literals;
using test_support::runLoopUntil;

// Streams outside the pool (before put, after take): the test closes them itself.
struct Outside : io::TcpStream::Handler {
  void onRead(io::TcpStream&, std::span<const char>) override {}
  void onEof(io::TcpStream&) override {}
  void onError(io::TcpStream&, int) override {}
  void onDrained(io::TcpStream&) override {}
  void onConnected(io::TcpStream&, int) override {}
  void onClosed(io::TcpStream&) override { ++closed; }
  int closed = 0;
};

class UpstreamPoolTest : public ::testing::Test {
 protected:
  UpstreamPoolTest() {
    uv_loop_init(&loop_);
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
    EXPECT_EQ(::listen(listener_, 128), 0);
    socklen_t length = sizeof address_;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address_), &length);
  }

  ~UpstreamPoolTest() override {
    for (auto& pool : pools_) {
      pool->close(nullptr);
    }
    for (auto& connection : outside_) {
      connection->stream.close();
    }
    runLoopUntil(
        &loop_, [] { return false; }, 50ms);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
    for (int fd : peers_) {
      ::close(fd);
    }
    ::close(listener_);
  }

  UpstreamPool& pool(UpstreamPool::Limits limits) {
    pools_.push_back(std::make_unique<UpstreamPool>(&loop_, limits));
    return *pools_.back();
  }

  std::shared_ptr<IdleCount> sandboxCount(std::uint64_t sandbox) {
    auto& count = sandbox_counts_[sandbox];
    if (!count) {
      count = std::make_shared<IdleCount>(0);
    }
    return count;
  }

  // A connected upstream for (sandbox, host); its peer's fd is peers_[number].
  std::unique_ptr<UpstreamConnection> connection(std::uint64_t sandbox, const std::string& host) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address_), sizeof address_), 0);
    peers_.push_back(::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    auto c = std::make_unique<UpstreamConnection>(&loop_, &outside_handler_,
                                                  UpstreamKey{sandbox, 1, host, 443, true});
    EXPECT_EQ(c->stream.adopt(fd), 0);
    c->sandbox_idle = sandboxCount(sandbox);
    return c;
  }

  // Whether sluice's end of connection `number` was closed: its peer reads EOF. Runs the loop
  // until the close has reached the peer (or a second passed).
  bool closedByPool(std::size_t number) {
    auto eof = [&] {
      char c;
      return ::recv(peers_[number], &c, 1, MSG_DONTWAIT) == 0;
    };
    return runLoopUntil(&loop_, eof, 1000ms);
  }
  bool stillOpen(std::size_t number) {
    runLoopUntil(
        &loop_, [] { return false; }, 20ms);
    char c;
    return ::recv(peers_[number], &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }

  // Whether the pool has an idle connection for (sandbox, host); takes it if so (the fixture
  // keeps it, and closes it at the end).
  bool has(UpstreamPool& p, std::uint64_t sandbox, const std::string& host) {
    auto c = p.take(UpstreamKey{sandbox, 1, host, 443, true}, &outside_handler_);
    if (!c) {
      return false;
    }
    outside_.push_back(std::move(c));
    return true;
  }

  static UpstreamPool::Limits limits(std::size_t per_key, std::size_t per_sandbox,
                                     std::size_t total) {
    UpstreamPool::Limits l;
    l.per_key = per_key;
    l.per_sandbox = per_sandbox;
    l.total = total;
    return l;
  }

  uv_loop_t loop_{};
  int listener_ = -1;
  sockaddr_in address_{};
  std::map<std::uint64_t, std::shared_ptr<IdleCount>> sandbox_counts_;
  std::vector<int> peers_;
  Outside outside_handler_;
  std::vector<std::unique_ptr<UpstreamConnection>> outside_;
  std::vector<std::unique_ptr<UpstreamPool>> pools_;
};

TEST_F(UpstreamPoolTest, OverTheTotalTheLeastRecentlyUsedGoesWhateverItsKey) {
  UpstreamPool& p = pool(limits(16, 100, 3));
  p.put(connection(1, "a.test"));  // 0
  p.put(connection(2, "b.test"));  // 1
  p.put(connection(1, "c.test"));  // 2
  p.put(connection(3, "d.test"));  // 3: a.test is the oldest, of another key and sandbox
  EXPECT_TRUE(closedByPool(0));
  EXPECT_TRUE(stillOpen(1) && stillOpen(2) && stillOpen(3));
  EXPECT_EQ(p.idle(), 3u);
  EXPECT_EQ(sandboxCount(1)->load(), 1u);
  EXPECT_FALSE(has(p, 1, "a.test"));
  EXPECT_TRUE(has(p, 2, "b.test"));
}

TEST_F(UpstreamPoolTest, TakingAConnectionMakesItTheNewestWhenItComesBack) {
  UpstreamPool& p = pool(limits(16, 100, 2));
  p.put(connection(1, "a.test"));  // 0
  p.put(connection(1, "b.test"));  // 1
  auto a = p.take(UpstreamKey{1, 1, "a.test", 443, true}, &outside_handler_);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(p.idle(), 1u);
  EXPECT_EQ(sandboxCount(1)->load(), 1u);
  p.put(std::move(a));             // used again: now newer than b.test
  p.put(connection(1, "c.test"));  // 2: b.test goes
  EXPECT_TRUE(closedByPool(1));
  EXPECT_TRUE(stillOpen(0) && stillOpen(2));
}

TEST_F(UpstreamPoolTest, OverItsBoundASandboxLosesItsOwnOldestNotAnothers) {
  UpstreamPool& p = pool(limits(16, 2, 100));
  p.put(connection(7, "other.test"));  // 0: another sandbox's, the oldest of all
  p.put(connection(1, "a.test"));      // 1
  p.put(connection(1, "b.test"));      // 2
  p.put(connection(1, "c.test"));      // 3: sandbox 1 over 2, its oldest (a.test) goes
  EXPECT_TRUE(closedByPool(1));
  EXPECT_TRUE(stillOpen(0) && stillOpen(2) && stillOpen(3));
  EXPECT_EQ(sandboxCount(1)->load(), 2u);
  EXPECT_EQ(sandboxCount(7)->load(), 1u);
  EXPECT_EQ(p.idle(), 3u);
}

TEST_F(UpstreamPoolTest, ManyNamesUnderOneWildcardAreHeldToTheSandboxBound) {
  UpstreamPool& p = pool(limits(16, 8, 4096));
  p.put(connection(2, "victim.test"));  // 0
  for (int i = 0; i < 50; ++i) {
    p.put(connection(1, "n" + std::to_string(i) + ".flood.test"));
  }
  EXPECT_EQ(sandboxCount(1)->load(), 8u);
  EXPECT_EQ(p.idle(), 9u);
  EXPECT_TRUE(closedByPool(1));   // the flood's first
  EXPECT_TRUE(closedByPool(42));  // its 42nd (the last 8 stay)
  EXPECT_TRUE(stillOpen(43) && stillOpen(50));
  EXPECT_TRUE(has(p, 2, "victim.test"));
}

TEST_F(UpstreamPoolTest, ASandboxsBoundHoldsAcrossTheWorkersPools) {
  // Two workers' pools share the sandbox's count. The second holds none of sandbox 1's older
  // connections, so over the bound the connection it was given goes itself.
  UpstreamPool& first = pool(limits(16, 2, 100));
  UpstreamPool& second = pool(limits(16, 2, 100));
  first.put(connection(1, "a.test"));   // 0
  first.put(connection(1, "b.test"));   // 1
  second.put(connection(1, "c.test"));  // 2
  EXPECT_TRUE(closedByPool(2));
  EXPECT_TRUE(stillOpen(0) && stillOpen(1));
  EXPECT_EQ(sandboxCount(1)->load(), 2u);
  EXPECT_EQ(second.idle(), 0u);
  // Once the first pool lets one go, the second may keep one.
  EXPECT_TRUE(has(first, 1, "a.test"));
  second.put(connection(1, "d.test"));  // 3
  EXPECT_TRUE(stillOpen(3));
  EXPECT_EQ(sandboxCount(1)->load(), 2u);
}

TEST_F(UpstreamPoolTest, EachPoolHoldsItsShareOfTheTotalAndNoMore) {
  // A flood through one worker fills that worker's share; the other's pool keeps its own.
  UpstreamPool& flooded = pool(limits(16, 100, 2));
  UpstreamPool& other = pool(limits(16, 100, 2));
  other.put(connection(2, "victim.test"));  // 0
  for (int i = 0; i < 5; ++i) {
    flooded.put(connection(1, "n" + std::to_string(i) + ".flood.test"));  // 1..5
  }
  EXPECT_EQ(flooded.idle(), 2u);
  EXPECT_TRUE(closedByPool(1) && closedByPool(3));
  EXPECT_TRUE(stillOpen(0) && stillOpen(4) && stillOpen(5));
  EXPECT_TRUE(has(other, 2, "victim.test"));
}

TEST(IdleShare, TheWorkersSharesAddUpToTheTotal) {
  EXPECT_EQ(idleShare(4096, 1, 0), 4096u);
  EXPECT_EQ(idleShare(4096, 2, 0) + idleShare(4096, 2, 1), 4096u);
  EXPECT_EQ(idleShare(7, 3, 0), 3u);
  EXPECT_EQ(idleShare(7, 3, 1), 2u);
  EXPECT_EQ(idleShare(7, 3, 2), 2u);
  EXPECT_EQ(idleShare(1, 2, 1), 0u);  // too few to share: the first worker keeps it
  EXPECT_EQ(idleShare(0, 4, 0), 0u);
}

TEST_F(UpstreamPoolTest, TheBoundPerKeyStillHolds) {
  UpstreamPool& p = pool(limits(2, 100, 100));
  p.put(connection(1, "a.test"));  // 0
  p.put(connection(1, "a.test"));  // 1
  p.put(connection(1, "a.test"));  // 2
  EXPECT_TRUE(closedByPool(0));
  EXPECT_EQ(p.idle(), 2u);
  EXPECT_EQ(sandboxCount(1)->load(), 2u);
}

TEST_F(UpstreamPoolTest, NoneIsKeptWhenABoundIsZero) {
  UpstreamPool& p = pool(limits(16, 0, 100));
  p.put(connection(1, "a.test"));
  EXPECT_TRUE(closedByPool(0));
  EXPECT_EQ(p.idle(), 0u);
  EXPECT_EQ(sandboxCount(1)->load(), 0u);
}

TEST_F(UpstreamPoolTest, LoweredBoundsCloseWhatIsOverThemAtOnce) {
  UpstreamPool& p = pool(limits(16, 100, 100));
  for (int i = 0; i < 6; ++i) {
    p.put(connection(i % 2 == 0 ? 1 : 2, "h" + std::to_string(i) + ".test"));
  }
  p.setLimits(limits(16, 2, 3));  // sandbox 1 had 0, 2, 4; sandbox 2 had 1, 3, 5
  EXPECT_TRUE(closedByPool(0));   // sandbox 1's oldest
  EXPECT_TRUE(closedByPool(1));   // sandbox 2's oldest
  EXPECT_TRUE(closedByPool(2));   // then the total: the oldest left
  EXPECT_EQ(p.idle(), 3u);
  EXPECT_TRUE(stillOpen(3) && stillOpen(4) && stillOpen(5));
}

TEST_F(UpstreamPoolTest, AnIdleConnectionThePeerClosesLeavesTheCounts) {
  UpstreamPool& p = pool(limits(16, 100, 100));
  p.put(connection(1, "a.test"));
  p.put(connection(1, "b.test"));
  ::shutdown(peers_[0], SHUT_WR);
  ASSERT_TRUE(runLoopUntil(
      &loop_, [&] { return p.idle() == 1; }, 1000ms));
  EXPECT_EQ(sandboxCount(1)->load(), 1u);
}

TEST_F(UpstreamPoolTest, ConnectionsOfRemovedSandboxesCanBeClosed) {
  UpstreamPool& p = pool(limits(16, 100, 100));
  p.put(connection(1, "a.test"));
  p.put(connection(2, "b.test"));
  p.closeWhere([](const UpstreamKey& key) { return key.sandbox == 1; });
  EXPECT_TRUE(closedByPool(0));
  EXPECT_TRUE(stillOpen(1));
  EXPECT_EQ(p.idle(), 1u);
  EXPECT_EQ(sandboxCount(1)->load(), 0u);
}

TEST_F(UpstreamPoolTest, IdleConnectionsExpire) {
  UpstreamPool::Limits l = limits(16, 100, 100);
  l.idle = 10ms;
  UpstreamPool& p = pool(l);
  p.put(connection(1, "a.test"));
  // The sweep runs once a second.
  ASSERT_TRUE(runLoopUntil(
      &loop_, [&] { return p.idle() == 0; }, 3000ms));
  EXPECT_TRUE(closedByPool(0));
  EXPECT_EQ(sandboxCount(1)->load(), 0u);
}

TEST_F(UpstreamPoolTest, ClosingThePoolGivesBackItsCounts) {
  UpstreamPool& p = pool(limits(16, 100, 100));
  p.put(connection(1, "a.test"));
  p.put(connection(2, "b.test"));
  bool done = false;
  p.close([&] { done = true; });
  EXPECT_TRUE(runLoopUntil(
      &loop_, [&] { return done; }, 1000ms));
  EXPECT_EQ(sandboxCount(1)->load(), 0u);
  EXPECT_EQ(sandboxCount(2)->load(), 0u);
  p.put(connection(1, "c.test"));  // after close: closed at once, never counted
  EXPECT_TRUE(closedByPool(2));
  EXPECT_EQ(sandboxCount(1)->load(), 0u);
}

TEST(EffectiveIdleBound, AQuarterOfTheDescriptorsAtMost) {
  struct Case {
    std::uint64_t configured;
    std::uint64_t descriptors;
    std::size_t expected;
  } cases[] = {
      {4096, 65536, 4096},  // a fleet host: as configured
      {4096, 1024, 256},    // a shell's default limit
      {4096, 256, 64},     {10, 256, 10}, {0, 1024, 0}, {4096, 0, 4096},  // unlimited
      {4096, 3, 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(effectiveIdleBound(c.configured, c.descriptors), c.expected)
        << c.configured << " with " << c.descriptors << " descriptors";
  }
}


// --- HTTP/2 sessions with no stream: held idle, in the same bounds ----------------------------

// Stands for an HTTP/2 session the registry keeps: it owns its connection; evicted, it ends.
struct Held final : HeldIdle {
  explicit Held(std::unique_ptr<UpstreamConnection> c) : connection(std::move(c)) {}
  const UpstreamConnection& idleConnection() const override { return *connection; }
  void evictIdle() override { ++evicted; }
  std::unique_ptr<UpstreamConnection> connection;
  int evicted = 0;
};

TEST_F(UpstreamPoolTest, AHeldSessionCountsInTheSandboxsBoundAndGoesFirstWhenOldest) {
  UpstreamPool& p = pool(limits(16, 2, 100));
  Held session(connection(1, "h2.test"));  // 0: held first, the sandbox's oldest idle one
  p.holdIdle(session);
  p.holdIdle(session);  // (idempotent)
  EXPECT_EQ(sandboxCount(1)->load(), 1u);
  EXPECT_EQ(p.idle(), 1u);
  p.put(connection(1, "a.test"));  // 1
  EXPECT_EQ(session.evicted, 0);
  p.put(connection(1, "b.test"));  // 2: over 2, the oldest is the session: it ends
  EXPECT_EQ(session.evicted, 1);
  EXPECT_EQ(sandboxCount(1)->load(), 2u);
  EXPECT_TRUE(stillOpen(1) && stillOpen(2));
  EXPECT_FALSE(has(p, 1, "h2.test")) << "take() never hands out a held session";
  outside_.push_back(std::move(session.connection));
}

TEST_F(UpstreamPoolTest, AHeldSessionGivenAStreamAgainLeavesTheCounts) {
  UpstreamPool& p = pool(limits(16, 1, 100));
  Held session(connection(1, "h2.test"));
  p.holdIdle(session);
  p.releaseIdle(session);  // a stream rides it again
  p.releaseIdle(session);  // (idempotent)
  EXPECT_EQ(sandboxCount(1)->load(), 0u);
  p.put(connection(1, "a.test"));  // the one idle connection of the sandbox: nothing goes
  EXPECT_EQ(session.evicted, 0);
  EXPECT_TRUE(has(p, 1, "a.test"));
  outside_.push_back(std::move(session.connection));
}

TEST_F(UpstreamPoolTest, HeldSessionsAreHeldToTheTotalAndExpire) {
  UpstreamPool::Limits l = limits(16, 100, 2);
  l.idle = 50ms;
  UpstreamPool& p = pool(l);
  Held a(connection(1, "a.test"));
  Held b(connection(2, "b.test"));
  Held c(connection(3, "c.test"));
  p.holdIdle(a);
  p.holdIdle(b);
  p.holdIdle(c);  // over the total of 2: the least recently used, a, ends
  EXPECT_EQ((std::vector{a.evicted, b.evicted, c.evicted}), (std::vector{1, 0, 0}));
  EXPECT_TRUE(runLoopUntil(&loop_, [&] { return b.evicted == 1 && c.evicted == 1; }, 2000ms))
      << "held sessions expire after the pool's idle time";
  EXPECT_EQ(p.idle(), 0u);
  EXPECT_EQ(sandboxCount(2)->load() + sandboxCount(3)->load(), 0u);
  for (Held* h : {&a, &b, &c}) {
    outside_.push_back(std::move(h->connection));
  }
}

TEST_F(UpstreamPoolTest, AHeldSessionPastABoundOfZeroEndsAtOnce) {
  UpstreamPool& p = pool(limits(16, 0, 100));
  Held session(connection(1, "h2.test"));
  p.holdIdle(session);
  EXPECT_EQ(session.evicted, 1);
  EXPECT_EQ(p.idle(), 0u);
  outside_.push_back(std::move(session.connection));
}

}  // namespace
}  // namespace sluice::proxy::session
