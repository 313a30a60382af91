#pragma once
// What every connection of every generator thread does, built once before the threads start
// and read-only while they run (the SSL_CTX is shared: SSL_new only takes a reference).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <openssl/ssl.h>

#include "bench/loadgen/histogram.h"
#include "bench/loadgen/options.h"
#include "policy/ip_address.h"

namespace sluice::loadgen {

struct Target {
  Mode mode = Mode::KeepAlive;
  Proto proto = Proto::Http11;
  int streams = 1;                 // h2: streams open at once per connection
  policy::Endpoint dial;           // the proxy, or --connect
  std::string host;                // canonical: SNI and the name the certificate must carry
  std::string connect_request;     // "CONNECT host:port ..."; empty in direct mode
  std::string request;             // the GET, byte for byte, built once
  std::string authority;           // h2 :authority (the Host value) and :path, for the header
  std::string path;                // list each H2Session builds once (nghttp2 copies nothing)
  SSL_CTX* tls_context = nullptr;  // owned by main()
};

// Builds the request bytes for `options` (Connection: close for newconn, keep-alive otherwise).
Target makeTarget(const Options& options, SSL_CTX* tls_context);

// Why a request or connection failed. The JSON has only the total; stderr gets the split.
enum class ErrorKind : std::uint8_t {
  Connect,  // TCP connect refused, unreachable, out of ports or descriptors
  Proxy,    // the proxy answered CONNECT with something other than 200, or garbage
  Tls,      // handshake failure: certificate, name, alert, protocol
  Http,     // a malformed or truncated response
  Status,   // a complete response with a status other than 2xx
  Closed,   // reset or closed by the peer in the middle of an exchange
  Timeout,  // no progress for kProgressTimeoutMs
  Dropped,  // idle: a held connection was closed by the peer
  H2,       // HTTP/2: a session error, a GOAWAY with an error, a stream reset or cut short
};
inline constexpr std::size_t kErrorKinds = 9;
const char* toString(ErrorKind kind);

// What one thread measured; merged by main() after the threads have ended.
struct ThreadStats {
  std::uint64_t requests = 0;  // successful (2xx, complete) responses in the window
  std::uint64_t errors = 0;    // failures in the window
  std::uint64_t bytes = 0;     // response body bytes received in the window
  std::array<std::uint64_t, kErrorKinds> errors_by_kind{};
  std::uint64_t ignored_errors = 0;  // during warmup
  std::string first_error;           // the first failure's detail, for stderr
  LatencyHistogram latency;
  // The thread's measured window (uv_hrtime): from the end of the warmup to the end of the run
  // (idle: from the start until every connection is up or given up). end_ns == 0: never began.
  std::uint64_t begin_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint64_t held = 0;  // idle: connections that reached the hold
};

}  // namespace sluice::loadgen
