// OriginProtocols: what a sandbox's origins chose when offered h2, shared by the workers
// (docs/wire.md#http2-toward-origins, "One dial for a burst").
#include "proxy/runtime/origin_protocols.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace sluice::proxy {
namespace {

TEST(OriginProtocols, AnOriginIsItsTrustHostAndPortAndKeepsItsLatestChoice) {
  OriginProtocols protocols;
  EXPECT_EQ(protocols.chose(1, "h2.test", 443), OriginProtocol::Unknown);
  protocols.learn(1, "h2.test", 443, OriginProtocol::H2);
  EXPECT_EQ(protocols.chose(1, "h2.test", 443), OriginProtocol::H2);
  EXPECT_EQ(protocols.chose(2, "h2.test", 443), OriginProtocol::Unknown);  // another ca_file
  EXPECT_EQ(protocols.chose(1, "h2.test", 8443), OriginProtocol::Unknown);
  EXPECT_EQ(protocols.chose(1, "h2.tes", 443), OriginProtocol::Unknown);
  EXPECT_EQ(protocols.chose(1, "h2.test.", 443), OriginProtocol::Unknown);
  // The origin stopped offering h2: its requests no longer wait for one another's dials.
  protocols.learn(1, "h2.test", 443, OriginProtocol::Http1);
  EXPECT_EQ(protocols.chose(1, "h2.test", 443), OriginProtocol::Http1);
  EXPECT_EQ(protocols.size(), 1u);
}

TEST(OriginProtocols, PastItsCapacityItForgetsAllAndKeepsTheNewest) {
  OriginProtocols protocols;
  for (std::size_t i = 0; i < OriginProtocols::kCapacity; ++i) {
    protocols.learn(1, "o" + std::to_string(i) + ".test", 443, OriginProtocol::H2);
  }
  EXPECT_EQ(protocols.size(), OriginProtocols::kCapacity);
  // Learning again what it knows takes no room.
  protocols.learn(1, "o0.test", 443, OriginProtocol::Http1);
  EXPECT_EQ(protocols.size(), OriginProtocols::kCapacity);
  protocols.learn(1, "new.test", 443, OriginProtocol::H2);
  EXPECT_EQ(protocols.size(), 1u);
  EXPECT_EQ(protocols.chose(1, "new.test", 443), OriginProtocol::H2);
  EXPECT_EQ(protocols.chose(1, "o1.test", 443), OriginProtocol::Unknown);
}

// The workers learn and ask at once: without the lock the map is corrupted (a crash, an ASan
// report in the test command's second tree, or a wrong count).
TEST(OriginProtocols, WorkersLearnAndAskAtOnce) {
  OriginProtocols protocols;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&protocols, w] {
      for (int i = 0; i < 2000; ++i) {
        const std::string host = "o" + std::to_string(i % 50) + ".test";
        protocols.learn(static_cast<std::uint64_t>(w), host, 443, OriginProtocol::H2);
        (void)protocols.chose(static_cast<std::uint64_t>((w + 1) % 4), host, 443);
      }
    });
  }
  for (std::thread& t : workers) {
    t.join();
  }
  EXPECT_EQ(protocols.size(), 4u * 50u);
  EXPECT_EQ(protocols.chose(3, "o49.test", 443), OriginProtocol::H2);
}

}  // namespace
}  // namespace sluice::proxy
