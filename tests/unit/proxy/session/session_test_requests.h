#pragma once
// What the session tests send and what their origins answer, written out byte for byte.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tests/support/session_harness.h"

namespace sluice::test_support {

// An absolute-form request for http://<authority><path>, as a client sends it to a proxy.
inline std::string absoluteRequest(std::string_view method, std::string_view authority,
                                   std::string_view path, std::string_view extra_fields = "") {
  return std::string(method) + " http://" + std::string(authority) + std::string(path) +
         " HTTP/1.1\r\nHost: " + std::string(authority) + "\r\n" + std::string(extra_fields) +
         "\r\n";
}

inline std::string okResponse(std::string_view body, std::string_view extra_fields = "") {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra_fields) + "\r\n" + std::string(body);
}

// An origin script: every request is answered 200 with `body`.
inline OriginServer::Script answerEach(std::string body) {
  return [body = std::move(body)](LoopPeer& connection, const OriginServer::Request&) {
    connection.write(okResponse(body));
  };
}

// Runs the bed's loop until `client` holds one complete response, and takes it.
inline std::optional<HttpMessage> awaitResponse(SessionBed& bed, LoopPeer& client,
                                                bool bodiless = false) {
  // (The condition is asked once more after it held: it must not take a second response.)
  std::optional<HttpMessage> response;
  bed.runUntil([&] {
    if (!response) {
      response = client.takeResponse(bodiless);
    }
    return response.has_value() || client.end() != LoopPeer::End::Open;
  });
  if (!response) {
    response = client.takeResponse(bodiless);  // it may have come with the end
  }
  return response;
}

// Runs the bed's loop until the peer's end is seen (FIN or RST).
inline bool awaitEnd(SessionBed& bed, LoopPeer& peer,
                     std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  return bed.runUntil([&] { return peer.end() != LoopPeer::End::Open; }, limit);
}

// Runs the bed's loop until the audit file holds `count` records; returns them.
inline std::vector<AuditLine> awaitAudit(SessionBed& bed, std::size_t count) {
  std::vector<AuditLine> lines;
  bed.runUntil([&] {
    lines = bed.auditLines();
    return lines.size() >= count;
  });
  return lines;
}

// Sends `bytes` to `peer` one byte at a time, one every `every`, from a timer on the loop; stops
// when they are all sent, or the connection was reset or closed here (a FIN from the other side
// ends only its sending). Declare it after the bed: it must close
// its timer before the bed runs the loop dry.
class Trickle {
 public:
  Trickle(uv_loop_t* loop, LoopPeer& peer, std::string bytes, std::chrono::milliseconds every)
      : timer_(new uv_timer_t), peer_(peer), bytes_(std::move(bytes)) {
    uv_timer_init(loop, timer_);
    timer_->data = this;
    const auto period = static_cast<std::uint64_t>(every.count());
    uv_timer_start(timer_, &Trickle::onTick, period, period);
  }
  ~Trickle() {
    uv_close(reinterpret_cast<uv_handle_t*>(timer_),
             [](uv_handle_t* handle) { delete reinterpret_cast<uv_timer_t*>(handle); });
  }
  Trickle(const Trickle&) = delete;
  Trickle& operator=(const Trickle&) = delete;
  std::size_t sent() const { return sent_; }

 private:
  static void onTick(uv_timer_t* timer) {
    auto* self = static_cast<Trickle*>(timer->data);
    if (self->sent_ == self->bytes_.size() || self->peer_.end() == LoopPeer::End::Reset ||
        self->peer_.closed()) {
      uv_timer_stop(timer);
      return;
    }
    self->peer_.write(std::string_view(self->bytes_).substr(self->sent_++, 1));
  }

  uv_timer_t* timer_;  // freed by its close callback
  LoopPeer& peer_;
  std::string bytes_;
  std::size_t sent_ = 0;
};

inline std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace sluice::test_support
