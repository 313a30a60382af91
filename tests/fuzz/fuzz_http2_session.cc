// libFuzzer target for a whole HTTP/2 session as a sandbox meets it. Where fuzz_http2_frames
// feeds nghttp2 configured as sluice runs it, this one feeds a real session: ClientConnection,
// its Http2ServerCodec, the streams and their exchanges, on a real libuv loop with the session
// harness's in-process DNS server and HTTP/1.1 origin over TLS (tests/support/session_harness.h).
// So what sluice itself does with each frame is reached: streams admitted and refused, requests
// decided, denied (gRPC's way too) and forwarded, bodies and trailers relayed, windows given back
// as the origin takes the bytes, floods counted, the connection's end and its records.
// Parser files: proxy/session/http2/http2_server_codec.cc proxy/session/http2/http2_stream.cc
//   proxy/http/http2_request.cc
//
// Each input is one client: CONNECT origin.test:<the TLS origin's port>, TLS with ALPN h2, the
// connection preface, then the input, written in pieces: a PING frame ends a piece (up to
// kMaxPieces), and the loop runs until the session is quiet before the next, so an input can
// wait for its answers before it goes on (a second request once the first is over, a reset or
// a window update once a response is under way). Every "00000" in the input becomes the
// origin's port (five digits: an ephemeral port), so a seed can name the tunnel's authority in
// an HPACK literal ("origin.test:00000") and reach the origin. The origin answers by the
// request's path: /big 100 KiB (more than a stream's window), /chunked a chunked body with a
// trailer, /stall never, anything else 5 bytes; each answer ends its connection.
// Invariants, each a trap on violation:
//   - the origin gets only what the policy allows, written by sluice: Host is the tunnel's
//     "origin.test:<port>", and every other field is end-to-end (policy/request_header.h) or one
//     sluice writes itself (Content-Length; Transfer-Encoding: chunked; Connection: close or
//     Upgrade with Upgrade: websocket);
//   - once the client is gone (reset), the session ends within a bound: no stream, exchange or
//     upstream keeps it alive;
//   - nothing crashes, leaks, or reads out of bounds (ASan, UBSan).

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "policy/request_header.h"
#include "tests/support/session_harness.h"
#include "tests/support/transition_log.h"

namespace {

namespace ts = sluice::test_support;
using namespace std::chrono_literals;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

constexpr std::string_view kPortPlaceholder = "00000";
constexpr std::size_t kMaxPieces = 8;

// Where the input's pieces end: after each of its first kMaxPieces - 1 PING frames (RFC 9113
// section 4.1: a 9-byte header whose first 3 bytes are the payload's length, then the type),
// and at its end.
std::vector<std::size_t> pieceEnds(std::string_view input) {
  std::vector<std::size_t> ends;
  std::size_t at = 0;
  while (at + 9 <= input.size() && ends.size() + 1 < kMaxPieces) {
    const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(input[at + i]); };
    const std::size_t length = (std::size_t{byte(0)} << 16) | (std::size_t{byte(1)} << 8) | byte(2);
    const std::uint8_t type = byte(3);
    at += 9 + length;
    if (at > input.size()) {
      break;
    }
    if (type == 0x6) {  // PING
      ends.push_back(at);
    }
  }
  ends.push_back(input.size());
  return ends;
}

// More than a stream's default window (65,535 bytes), so the response waits on WINDOW_UPDATE.
const std::string kBigBody(100 * 1024, 'b');

void answer(ts::LoopPeer& origin, const ts::OriginServer::Request& request) {
  const std::string_view path = request.message.target;
  if (path.starts_with("/stall")) {
    return;
  }
  if (path.starts_with("/chunked")) {
    origin.write(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-digest\r\n"
        "Connection: close\r\n\r\n5\r\nhello\r\n0\r\nx-digest: abc\r\n\r\n");
  } else {
    const std::string_view body = path.starts_with("/big") ? kBigBody : std::string_view("hello");
    origin.write("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                 "\r\nConnection: close\r\n\r\n");
    origin.write(body);
  }
  origin.shutdownWrite();
}

// What sluice may write upstream beside the request's end-to-end fields.
void checkAtOrigin(const ts::OriginServer::Request& request, std::string_view authority) {
  namespace policy = sluice::policy;
  for (const auto& [name, value] : request.message.headers) {
    if (policy::sameRequestHeaderName(name, "Host")) {
      check(value == authority);
    } else if (policy::sameRequestHeaderName(name, "Transfer-Encoding")) {
      check(value == "chunked");
    } else if (policy::sameRequestHeaderName(name, "Connection")) {
      check(value == "close" || value == "Upgrade");
    } else if (policy::sameRequestHeaderName(name, "Upgrade")) {
      check(value == "websocket");
    } else if (!policy::sameRequestHeaderName(name, "Content-Length")) {
      check(policy::isEndToEndRequestHeader(name));
    }
  }
}

struct Bed {
  ts::SessionBed bed;
  std::string authority;  // origin.test:<port>
  std::string port;
};

Bed* g_bed = nullptr;

Bed& bed() {
  // Made once: every input is a new client of the same gateway (as a worker's sessions share
  // it). Torn down at exit, which closes every handle and removes the bed's directory.
  if (g_bed == nullptr) {
    std::signal(SIGPIPE, SIG_IGN);  // as the server does: a peer gone mid-write is an error value
    auto* b = new Bed;
    spdlog::set_level(spdlog::level::off);  // after the bed, which sets its own level
    ts::BedConfig config;
    // A small max_header_bytes, so that a few mutated fields reach the bound (431 on its stream).
    config.limits = "{handshake_timeout: 2s, idle_timeout: 2s, max_header_bytes: 8KiB}";
    b->bed.configure(config);
    b->port = std::to_string(b->bed.tlsOrigin().port());
    check(b->port.size() == kPortPlaceholder.size());
    b->authority = "origin.test:" + b->port;
    b->bed.tlsOrigin().on_request = answer;
    g_bed = b;
    std::atexit([] { delete g_bed; });
  }
  return *g_bed;
}

// Runs the loop until the session has settled: for `quiet`, the client heard nothing, no state
// machine moved and the origin got no request; or until `limit` passed.
void runUntilQuiet(ts::SessionBed& bed, ts::LoopPeer& client, std::chrono::milliseconds quiet,
                   std::chrono::milliseconds limit) {
  const auto activity = [&] {
    return client.rawBytesReceived() + ts::transitionsCounted() + bed.tlsOrigin().requests().size();
  };
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end && client.end() == ts::LoopPeer::End::Open) {
    const std::size_t before = activity();
    if (!bed.runUntil([&] { return activity() != before; }, quiet)) {
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bed& b = bed();
  ts::SessionBed& sb = b.bed;

  std::string input(reinterpret_cast<const char*>(data), size);
  for (std::size_t at = input.find(kPortPlaceholder); at != std::string::npos;
       at = input.find(kPortPlaceholder, at + kPortPlaceholder.size())) {
    input.replace(at, kPortPlaceholder.size(), b.port);
  }

  ts::LoopPeer& client = sb.connectClient(ts::Entry::Explicit);
  client.write("CONNECT " + b.authority + " HTTP/1.1\r\nHost: " + b.authority + "\r\n\r\n");
  check(sb.runUntil([&] { return client.received().find("\r\n\r\n") != std::string::npos; }, 5s));
  check(client.received().starts_with("HTTP/1.1 200"));
  client.received().clear();
  client.startTlsClient(sb.sandboxCaFile(), "origin.test", ts::MemoryTls::Alpn::H2);
  check(sb.runUntil([&] { return client.tls()->handshakeDone() || client.tls()->failed(); }, 5s));
  check(client.tls()->handshakeDone() && client.tls()->selectedAlpn() == "h2");

  client.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  std::size_t written = 0;
  for (const std::size_t end : pieceEnds(input)) {
    client.write(std::string_view(input).substr(written, end - written));
    written = end;
    runUntilQuiet(sb, client, 10ms, 500ms);
  }

  for (const auto& request : sb.tlsOrigin().requests()) {
    checkAtOrigin(request, b.authority);
  }
  client.reset();
  check(sb.allSessionsFinished(5s));
  sb.forgetPeers();
  return 0;
}
