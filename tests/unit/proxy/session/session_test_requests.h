#pragma once
// What the session tests send and what their origins answer, written out byte for byte.

#include <gtest/gtest.h>

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

}  // namespace sluice::test_support
