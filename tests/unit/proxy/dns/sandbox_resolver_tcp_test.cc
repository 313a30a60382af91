// The sandbox's resolver over TCP (RFC 7766), on a real loop: pipelining, split and cut-off
// queries, half-closes, and the bounds on connections, idle time and unread answers.
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
  // Who asked, as accepted: the same client for both.
  ASSERT_EQ(clients_.size(), 2u);
  EXPECT_EQ(clients_[0].ip, ip("127.0.0.1"));
  EXPECT_NE(clients_[0].port, 0);
  EXPECT_EQ(clients_[1], clients_[0]);
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

}  // namespace
}  // namespace sluice::proxy::dns
