// The admin endpoint on a real libuv loop, spoken to by plain blocking sockets on 127.0.0.1
// from a helper thread while the test's thread runs the loop. Every test ends with the server
// closed and uv_loop_close() == 0.
#include "proxy/admin/admin_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/admin/metrics.h"
#include "tests/support/loop_driver.h"
#include "tests/support/loopback_tcp_client.h"

namespace sluice::proxy::admin {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kBody = "# TYPE sluice_build_info gauge\nsluice_build_info 1\n";

// 127.0.0.1, port 0: the kernel picks a free one (Endpoint::parse refuses port 0).
policy::Endpoint loopbackAnyPort() {
  return policy::Endpoint{policy::IpAddress::fromV4(0x7f000001), 0};
}

// ---- A blocking client (runs on the helper thread) ---------------------------------------

class Client : public test_support::LoopbackTcpClient {
 public:
  using LoopbackTcpClient::LoopbackTcpClient;

  // Everything until the server's FIN. `eof` tells whether it came (not a reset or timeout).
  std::string readToEnd(bool* eof = nullptr) {
    std::string out;
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        if (eof != nullptr) {
          *eof = n == 0;
        }
        return out;
      }
      out.append(buffer, static_cast<std::size_t>(n));
    }
  }
};

struct Response {
  int status = 0;
  std::string head;  // status line and fields, without the blank line
  std::string body;
  bool eof = false;  // the server ended with a FIN

  // The value of the first field named `name` (exact case: the server's own spelling).
  std::string field(std::string_view name) const {
    const std::string key = "\r\n" + std::string(name) + ": ";
    const std::size_t at = head.find(key);
    if (at == std::string::npos) {
      return "<absent>";
    }
    const std::size_t from = at + key.size();
    const std::size_t to = head.find("\r\n", from);
    return head.substr(from, to == std::string::npos ? std::string::npos : to - from);
  }
};

Response exchange(std::uint16_t port, std::string_view request) {
  Client c(port);
  Response r;
  if (!c.connected() || !c.send(request)) {
    return r;
  }
  const std::string raw = c.readToEnd(&r.eof);
  const std::size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) {
    r.body = raw;
    return r;
  }
  r.status = std::stoi(raw.substr(9, 3));
  r.head = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  return r;
}

// ---- The fixture -------------------------------------------------------------------------

class AdminServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    wake_ = new uv_async_t;
    uv_async_init(&loop_, wake_, [](uv_async_t*) {});
    auto bound = AdminServer::bind(loopbackAnyPort());
    ASSERT_TRUE(bound.ok()) << bound.error();
    server_ = std::move(bound).value();
    port_ = server_->endpoint().port;
    ASSERT_NE(port_, 0);
    AdminServer::Handlers handlers;
    handlers.metrics = [this] {
      ++scrapes_;
      if (metrics_throw_) {
        throw std::runtime_error("render failed");
      }
      return std::string(kBody);
    };
    handlers.problems = [this] { return problems_; };
    auto started = server_->start(&loop_, std::move(handlers));
    ASSERT_TRUE(started.ok()) << started.error();
  }

  void TearDown() override {
    if (!server_) {
      return;  // SetUp failed; its assertion says why
    }
    bool closed = server_closed_;  // a test that closed the server itself
    server_->close([&] { closed = true; });
    uv_close(reinterpret_cast<uv_handle_t*>(wake_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed) << "close() never called back";
    server_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  // Runs `client` on a helper thread while this thread runs the loop; returns when it is done.
  void withClient(const std::function<void()>& client) {
    test_support::runLoopWithClient(&loop_, wake_, client);
  }

  // Drives the loop until `done` holds or `limit` passes (a safety net, not a sleep).
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 3000ms) {
    return test_support::runLoopUntil(&loop_, done, limit);
  }

  Response get(std::string_view request) {
    Response r;
    withClient([&] { r = exchange(port_, request); });
    return r;
  }

  uv_loop_t loop_{};
  uv_async_t* wake_ = nullptr;
  std::unique_ptr<AdminServer> server_;
  std::uint16_t port_ = 0;
  std::string problems_;  // loop thread only (handlers run there, as get() runs the loop)
  int scrapes_ = 0;  // loop thread only
  bool server_closed_ = false;
  std::atomic<bool> metrics_throw_{false};
};

// ---- Routes --------------------------------------------------------------------------------

TEST_F(AdminServerTest, MetricsAnswersPrometheusTextAndCloses) {
  const Response r = get("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.field("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.field("Content-Length"), std::to_string(kBody.size()));
  EXPECT_EQ(r.field("Connection"), "close");
  EXPECT_EQ(r.body, kBody);
  EXPECT_TRUE(r.eof);
  EXPECT_EQ(scrapes_, 1);
  // The client closed after reading: the server lets go at once, not at its deadline.
  EXPECT_TRUE(runUntil([&] { return server_->connections() == 0; }, 1000ms));
}

TEST_F(AdminServerTest, MetricsIgnoresQueryString) {
  const Response r = get("GET /metrics?x HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);
  const Response r2 = get("GET /metrics?name[]=sluice_requests_total HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r2.status, 200);
  EXPECT_EQ(r2.body, kBody);
}

TEST_F(AdminServerTest, AbsoluteFormTargetIsServed) {
  const Response r = get("GET http://127.0.0.1/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);
}

TEST_F(AdminServerTest, HandlerThatThrowsIs500) {
  metrics_throw_ = true;
  const Response r = get("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.field("Content-Length"), std::to_string(r.body.size()));
  EXPECT_TRUE(r.eof);
}

TEST_F(AdminServerTest, HeadHasLengthButNoBody) {
  const Response r = get("HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.field("Content-Length"), std::to_string(kBody.size()));
  EXPECT_EQ(r.body, "");
  EXPECT_TRUE(r.eof);
  const Response h = get("HEAD /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.field("Content-Length"), "3");
  EXPECT_EQ(h.body, "");
}

TEST_F(AdminServerTest, HealthzOkThenDraining) {
  const Response ok = get("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok\n");
  EXPECT_EQ(ok.field("Content-Length"), "3");
  problems_ = "draining\n";
  const Response draining = get("GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(draining.status, 503);
  EXPECT_EQ(draining.body, "draining\n");
  EXPECT_EQ(draining.field("Content-Length"), "9");
  EXPECT_EQ(draining.field("Connection"), "close");
  EXPECT_EQ(scrapes_, 0);
}

// An audit log that cannot be written makes the gateway unhealthy, and the body says which
// file and why, beside any other problem.
TEST_F(AdminServerTest, HealthzNamesEveryProblem) {
  problems_ =
      "audit log /var/log/sluice/a.jsonl: cannot write: No space left on device since "
      "2026-12-01T16:13:45.123Z; 4 records (2100 bytes) kept; new requests refused (503 "
      "audit_unavailable)\ndraining\n";
  const Response r = get("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, problems_);
  EXPECT_EQ(r.field("Content-Length"), std::to_string(problems_.size()));
  problems_.clear();
  EXPECT_EQ(get("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n").status, 200);
}

TEST_F(AdminServerTest, UnknownPathIs404) {
  for (const char* request :
       {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET /metrics/ HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /METRICS HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://127.0.0.1/nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"}) {
    const Response r = get(request);
    EXPECT_EQ(r.status, 404) << request;
    EXPECT_EQ(r.field("Content-Length"), std::to_string(r.body.size())) << request;
  }
  EXPECT_EQ(scrapes_, 0);
}

TEST_F(AdminServerTest, OtherMethodIs405WithAllow) {
  for (const char* request : {"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
                              "DELETE /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
                              "OPTIONS /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
                              "CONNECT 127.0.0.1:9901 HTTP/1.1\r\nHost: 127.0.0.1:9901\r\n\r\n"}) {
    const Response r = get(request);
    EXPECT_EQ(r.status, 405) << request;
    EXPECT_EQ(r.field("Allow"), "GET, HEAD") << request;
    EXPECT_EQ(r.field("Content-Length"), std::to_string(r.body.size())) << request;
  }
  EXPECT_EQ(scrapes_, 0);
}

TEST_F(AdminServerTest, GarbageIs400) {
  for (std::string_view request :
       {std::string_view("hello\r\n\r\n"),
        std::string_view("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11),
        std::string_view("GET /metrics HTTP/1.1\r\nHost: a\r\n\tfolded\r\n\r\n"),
        std::string_view("GET /metrics HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        std::string_view("GET /metrics HTTP/1.1\nHost: a\n\n"),
        std::string_view("GET /metrics HTTP/2.0\r\n\r\n"),
        std::string_view("GET * HTTP/1.1\r\nHost: a\r\n\r\n")}) {
    const Response r = get(request);
    EXPECT_EQ(r.status, 400) << request;
    EXPECT_EQ(r.field("Connection"), "close");
    EXPECT_TRUE(r.eof);
  }
  EXPECT_EQ(scrapes_, 0);
}

TEST_F(AdminServerTest, OversizedHeadIs431) {
  const std::string pad(AdminServer::kMaxHeadBytes, 'a');
  const Response r = get("GET /metrics HTTP/1.1\r\nHost: a\r\nX-Pad: " + pad + "\r\n\r\n");
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(r.eof);
  // Far more than a head, never ending: refused as soon as the limit passes, and the rest is
  // drained rather than answered with a reset.
  const std::string flood = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(1 << 20, 'b');
  const Response f = get(flood);
  EXPECT_EQ(f.status, 431);
  EXPECT_EQ(scrapes_, 0);
}

TEST_F(AdminServerTest, HeadSentByteByByteIsAnswered) {
  Response r;
  withClient([&] {
    Client c(port_);
    for (char ch : std::string_view("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")) {
      ASSERT_TRUE(c.send(std::string_view(&ch, 1)));
    }
    r.body = c.readToEnd(&r.eof);
  });
  EXPECT_EQ(r.body.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r.body;
  EXPECT_TRUE(r.eof);
}

// ---- Hostile and slow clients --------------------------------------------------------------

TEST_F(AdminServerTest, SurplusConnectionClosedAtOnce) {
  Response served;
  bool surplus_closed = false;
  withClient([&] {
    std::vector<std::unique_ptr<Client>> idle;
    for (std::size_t i = 0; i < AdminServer::kMaxConnections; ++i) {
      idle.push_back(std::make_unique<Client>(port_));
      ASSERT_TRUE(idle.back()->connected());
    }
    // The kernel queue is FIFO: this one is accepted after the 64 above, and closed at once,
    // well before the 5 s deadline (the client's own timeout is 3 s).
    Client surplus(port_);
    surplus_closed = surplus.closedByPeer();
    // The 64 are served, not dropped.
    ASSERT_TRUE(idle[0]->send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"));
    served.body = idle[0]->readToEnd(&served.eof);
  });
  EXPECT_TRUE(surplus_closed);
  EXPECT_EQ(served.body.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << served.body;
  // The idle clients are gone: their slots come back without waiting for the deadline.
  EXPECT_TRUE(runUntil([&] { return server_->connections() == 0; }, 2000ms));
  EXPECT_EQ(get("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n").status, 200);
}

TEST_F(AdminServerTest, ClientGoneMidHeadIsClosedUnanswered) {
  withClient([&] {
    Client c(port_);
    ASSERT_TRUE(c.send("GET /metr"));
  });
  EXPECT_TRUE(runUntil([&] { return server_->connections() == 0; }, 2000ms));
  EXPECT_EQ(scrapes_, 0);
}

TEST_F(AdminServerTest, SlowClientClosedAtDeadline) {
  bool closed = false;
  std::chrono::steady_clock::duration waited{};
  withClient([&] {
    Client c(port_, AdminServer::kDeadline + 3000ms);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(c.send("GET /metrics HTTP/1.1\r\n"));
    closed = c.closedByPeer();
    waited = std::chrono::steady_clock::now() - start;
  });
  EXPECT_TRUE(closed);
  EXPECT_GE(waited, AdminServer::kDeadline - 500ms);
  EXPECT_EQ(scrapes_, 0);
}

TEST_F(AdminServerTest, CloseEndsOpenConnections) {
  // Connected from this thread: the kernel completes the handshake, the loop accepts below.
  auto waiting = std::make_unique<Client>(port_);
  ASSERT_TRUE(waiting->connected());
  ASSERT_TRUE(waiting->send("GET /healthz HTTP/1.1\r\n"));  // half a head: the server waits
  ASSERT_TRUE(runUntil([&] { return server_->connections() == 1; }));
  server_->close([&] { server_closed_ = true; });
  ASSERT_TRUE(runUntil([&] { return server_closed_; }));
  EXPECT_EQ(server_->connections(), 0u);
  EXPECT_TRUE(waiting->closedByPeer());
  // The port is free again once close() has called back.
  auto again = AdminServer::bind(server_->endpoint());
  EXPECT_TRUE(again.ok()) << again.error();
}

// ---- Binding -------------------------------------------------------------------------------

TEST_F(AdminServerTest, BusyAddressFailsNamingIt) {
  auto second = AdminServer::bind(server_->endpoint());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().find("admin.listen"), std::string::npos) << second.error();
  EXPECT_NE(second.error().find("127.0.0.1:" + std::to_string(port_)), std::string::npos)
      << second.error();
}

TEST(AdminServerBind, NeverStartedClosesAtOnce) {
  auto bound = AdminServer::bind(loopbackAnyPort());
  ASSERT_TRUE(bound.ok()) << bound.error();
  bool done = false;
  (*bound)->close([&] { done = true; });
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace sluice::proxy::admin
