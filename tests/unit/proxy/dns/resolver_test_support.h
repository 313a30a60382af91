#pragma once
// What the tests of the resolver share: an in-process DNS server (tests/support) and the
// resolver on a real libuv loop, closed at the end of every test with uv_loop_close() == 0.

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
#include "proxy/dns/resolver.h"
#include "tests/support/fake_dns_server.h"
#include "tests/support/loop_driver.h"

namespace sluice::proxy::dns::resolver_test {

using namespace std::chrono_literals;
using sluice::testing::FakeDnsServer;
using Mode = FakeDnsServer::Mode;
using Zone = FakeDnsServer::Zone;

inline policy::IpAddress ip(std::string_view text) {
  auto parsed = policy::IpAddress::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(policy::IpAddress());
}

inline policy::Endpoint endpointOf(const std::string& text) {
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

inline std::vector<policy::IpAddress> addressesOf(const LookupResult& r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : toString(r.error()));
  return r.ok() ? r.value()->addresses : std::vector<policy::IpAddress>{};
}

}  // namespace sluice::proxy::dns::resolver_test
