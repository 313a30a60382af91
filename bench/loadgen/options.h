#pragma once
// The command line of sluice-loadgen, parsed into a plain struct. The comparison scripts are
// written against this exact CLI, so flags are only ever added, never renamed:
//
//   sluice-loadgen --url https://bench.test:8443/small.bin
//                  [--connect 127.0.0.20:8443] | [--proxy 127.0.0.2:3128]
//                  --cacert FILE --mode keepalive|newconn|bulk|idle
//                  [--concurrency C] [--duration S | --requests N] [--warmup S]
//                  [--connections N] [--hold S] [--threads T] [--label TEXT]
//                  [--proto http/1.1|h2] [--streams S]
//
// Every value is checked strictly (whole decimal numbers, IP:port endpoints, an https URL whose
// host canonicalises); a mistake is a usage error (exit 2), never a silent default.

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "base/result.h"
#include "policy/ip_address.h"

namespace sluice::loadgen {

enum class Mode : std::uint8_t { KeepAlive, NewConn, Bulk, Idle };
const char* toString(Mode mode);

// What is spoken inside TLS: HTTP/1.1, or HTTP/2 (ALPN h2 offered alone, and required).
enum class Proto : std::uint8_t { Http11, H2 };
const char* toString(Proto proto);

struct Options {
  std::string url;         // as given, for the report
  std::string host;        // canonical host of the URL: SNI and certificate name
  std::string authority;   // "host:port" (IPv6 bracketed): the CONNECT target
  std::string host_field;  // the Host value: the authority without a default port 443
  std::uint16_t port = 443;
  std::string target;  // "/path?query" of the URL

  std::optional<policy::Endpoint> proxy;    // explicit proxy: CONNECT through it
  std::string proxy_text;                   // as given, for the report
  std::optional<policy::Endpoint> connect;  // direct mode: where to dial the URL's host
  std::string cacert;

  Mode mode = Mode::KeepAlive;
  Proto proto = Proto::Http11;
  int concurrency = 32;  // connections (h2: each carrying `streams` requests at once)
  int streams = 1;       // h2, keepalive and bulk: concurrent streams per connection
  // Stop after `duration` seconds of measurement, or after `requests` counted requests,
  // whichever comes first. Without --duration, --requests alone has no time limit.
  std::optional<double> duration = 10.0;
  std::optional<std::uint64_t> requests;
  double warmup = 1.0;
  int connections = 0;  // idle: connections to open (default: the concurrency)
  double hold = 10.0;   // idle: seconds to hold them
  int threads = 1;
  std::optional<std::string> label;

  // Where the generator dials: the proxy, else --connect.
  const policy::Endpoint& dial() const { return proxy ? *proxy : *connect; }
};

// Help text (--help, and after a usage error).
const char* usage();

// Parses argv[1..]. Error: one line saying what is wrong. `help` is set for --help / -h,
// `version` for --version (nothing else is parsed then).
Result<Options, std::string> parseOptions(std::span<char* const> args, bool* help, bool* version);

}  // namespace sluice::loadgen
