#pragma once
// What the HTTP/2 session tests share: a bed whose TLS origin (HTTP/1.1) answers by path, and
// HTTP/2 clients through tunnels to it (tests/support/http2_client.h). The tests assert on what
// the client saw (frames), what the origin got (bytes, requests) and the audit records.

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/http2_client.h"
#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {

// The loop's clock counts whole milliseconds and is read at the start of each round.
inline constexpr auto kH2ClockSlack = 20ms;

class SessionH2Test : public ::testing::Test {
 protected:
  // The bed, with `config`; its TLS origin answers by path:
  //   /stall...  never (the request is read, nothing is written)
  //   /held...   not yet: held() is its connection, for the test to answer
  //   anything else  200 "answer <path>", Content-Length, keep-alive
  void configure(const BedConfig& config = {}) {
    bed_.configure(config);
    bed_.tlsOrigin().on_request = [this](LoopPeer& connection, const OriginServer::Request& r) {
      const std::string& path = r.message.target;
      if (path.starts_with("/stall")) {
        return;
      }
      if (path.starts_with("/held")) {
        held_ = &connection;
        return;
      }
      connection.write(okResponse("answer " + path));
    };
  }

  // A client through a tunnel to the TLS origin, open (ALPN h2, SETTINGS exchanged); null, with
  // the failure reported, if it could not be opened.
  Http2Client* openClient(Http2Client::Options options = {}) {
    clients_.push_back(std::make_unique<Http2Client>(bed_, std::move(options)));
    return clients_.back()->open() ? clients_.back().get() : nullptr;
  }

  // The origin's connection of the last /held request, once it came.
  LoopPeer* held() { return held_; }
  bool awaitHeld() {
    return bed_.runUntil([&] { return held_ != nullptr; }) && held_ != nullptr;
  }

  std::string authority() { return "origin.test:" + std::to_string(bed_.tlsOrigin().port()); }
  std::string url(std::string_view path) { return "https://" + authority() + std::string(path); }
  std::string upstream() { return "127.0.0.1:" + std::to_string(bed_.tlsOrigin().port()); }

  // The bytes every connection of the TLS origin received, in accept order.
  std::string originReceived() {
    std::string all;
    for (std::size_t i = 0; i < bed_.tlsOrigin().accepted(); ++i) {
      all += bed_.tlsOrigin().connection(i).received();
    }
    return all;
  }

  SessionBed bed_;
  LoopPeer* held_ = nullptr;
  std::vector<std::unique_ptr<Http2Client>> clients_;  // after bed_: closed before it
};

}  // namespace sluice::test_support
