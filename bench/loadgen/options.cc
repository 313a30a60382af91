#include "bench/loadgen/options.h"

#include <charconv>
#include <cmath>
#include <string_view>

#include "policy/authority.h"
#include "policy/host_name.h"

namespace sluice::loadgen {

namespace {

constexpr const char* kUsage =
    "usage: sluice-loadgen --url https://HOST[:PORT]/PATH --cacert FILE\n"
    "                      --mode keepalive|newconn|bulk|idle\n"
    "                      (--connect IP:PORT | --proxy IP:PORT)\n"
    "                      [--concurrency C] [--duration SECONDS | --requests N]\n"
    "                      [--warmup SECONDS] [--connections N] [--hold SECONDS]\n"
    "                      [--threads T] [--label TEXT] [--proto http/1.1|h2]\n"
    "                      [--streams S]\n"
    "       sluice-loadgen --help | --version\n"
    "\n"
    "  --url          what to fetch; its host goes into CONNECT, SNI and Host\n"
    "  --connect      where to dial for the URL's host (direct mode, like curl --connect-to)\n"
    "  --proxy        explicit proxy: CONNECT host:port, then TLS through the tunnel\n"
    "  --cacert       CA bundle the TLS server (and its name) is verified against\n"
    "  --mode         keepalive: request after request per connection\n"
    "                 newconn:   TCP (+CONNECT) + full TLS handshake per request\n"
    "                 bulk:      download the URL repeatedly, measuring MB/s of body bytes\n"
    "                 idle:      open --connections, one request each, hold them --hold s\n"
    "  --concurrency  parallel connections (default 32; idle: connections opening at once)\n"
    "  --duration     seconds measured (default 10); --requests N stops after N requests\n"
    "                 (both: whichever comes first; --requests alone: no time limit)\n"
    "  --warmup       seconds run before measuring (default 1; not counted; not idle)\n"
    "  --connections  idle: connections to open (default: the concurrency)\n"
    "  --hold         idle: seconds to hold them open (default 10)\n"
    "  --threads      generator threads, each with its own loop (default 1)\n"
    "  --label        copied into the JSON result\n"
    "  --proto        http/1.1 (default), or h2: ALPN h2 offered alone (a server that does not\n"
    "                 agree fails the connection), then an HTTP/2 session per connection\n"
    "  --streams      h2, keepalive and bulk: concurrent streams per connection (default 1),\n"
    "                 each a GET after GET; newconn and idle make one request per connection\n"
    "\n"
    "Prints one JSON line at the end (idle also prints {\"event\":\"holding\",...} once every\n"
    "connection is up). Exit 0 if it ran, 1 if nothing succeeded (no request; bulk: no body\n"
    "byte), 2 on bad arguments.\n";

Err<std::string> bad(std::string message) { return Err{std::move(message)}; }

template <class T>
std::optional<T> parseWhole(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

// Plain decimal seconds ("10", "0.5"): no sign, exponent, inf or nan.
std::optional<double> parseSeconds(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string_view::npos) {
    return std::nullopt;
  }
  auto value = parseWhole<double>(text);
  if (!value || !std::isfinite(*value)) {
    return std::nullopt;
  }
  return value;
}

// Request-line safe: no SP, control characters or DEL (they would change the request line).
bool targetIsSafe(std::string_view target) {
  for (char c : target) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return false;
    }
  }
  return true;
}

Result<Ok, std::string> setUrl(Options& o, std::string_view text) {
  auto url = policy::parseAbsoluteUrl(text);
  if (!url || url->scheme != policy::UrlScheme::Https) {
    return bad("--url: not an https:// URL: " + std::string(text));
  }
  auto host = policy::canonicalizeHost(url->authority.host);
  if (!host) {
    return bad("--url: bad host: " + std::string(toString(host.error())));
  }
  if (!targetIsSafe(url->target)) {
    return bad("--url: the path holds spaces or control characters");
  }
  o.url = std::string(text);
  o.host = std::string(host->text());
  o.port = url->port;
  o.authority = host->authorityText() + ":" + std::to_string(url->port);
  o.host_field = url->port == 443 ? host->authorityText() : o.authority;
  o.target = url->target.front() == '?' ? "/" + std::string(url->target) : std::string(url->target);
  return Ok{};
}

}  // namespace

const char* toString(Mode mode) {
  switch (mode) {
    case Mode::KeepAlive:
      return "keepalive";
    case Mode::NewConn:
      return "newconn";
    case Mode::Bulk:
      return "bulk";
    case Mode::Idle:
      return "idle";
  }
  return "keepalive";
}

const char* toString(Proto proto) { return proto == Proto::H2 ? "h2" : "http/1.1"; }

const char* usage() { return kUsage; }

Result<Options, std::string> parseOptions(std::span<char* const> args, bool* help, bool* version) {
  *help = false;
  *version = false;
  Options o;
  bool have_url = false;
  bool have_mode = false;
  bool have_duration = false;
  bool have_connections = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return o;
    }
    if (arg == "--version") {
      *version = true;
      return o;
    }
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    auto next = [&]() -> std::optional<std::string_view> {
      if (value) {
        return value;
      }
      if (i + 1 < args.size()) {
        return std::string_view(args[++i]);
      }
      return std::nullopt;
    };
    static constexpr std::string_view kFlags[] = {
        "--url",         "--connect",  "--proxy",    "--cacert", "--mode",
        "--concurrency", "--duration", "--requests", "--warmup", "--connections",
        "--hold",        "--threads",  "--label",    "--proto",  "--streams"};
    bool known = false;
    for (std::string_view flag : kFlags) {
      known = known || name == flag;
    }
    if (!known) {
      return bad("unknown argument: " + std::string(arg));
    }
    std::optional<std::string_view> v = next();
    if (!v) {
      return bad(std::string(name) + " needs a value");
    }
    const std::string text(*v);
    if (name == "--url") {
      if (auto r = setUrl(o, *v); !r) {
        return Err{std::move(r).error()};
      }
      have_url = true;
    } else if (name == "--connect" || name == "--proxy") {
      auto endpoint = policy::Endpoint::parse(*v);
      if (!endpoint || endpoint->isWildcard() || endpoint->port == 0) {
        return bad(std::string(name) + ": not IP:PORT: " + text);
      }
      if (name == "--connect") {
        o.connect = endpoint;
      } else {
        o.proxy = endpoint;
        o.proxy_text = text;
      }
    } else if (name == "--cacert") {
      o.cacert = text;
    } else if (name == "--mode") {
      if (text == "keepalive") {
        o.mode = Mode::KeepAlive;
      } else if (text == "newconn") {
        o.mode = Mode::NewConn;
      } else if (text == "bulk") {
        o.mode = Mode::Bulk;
      } else if (text == "idle") {
        o.mode = Mode::Idle;
      } else {
        return bad("--mode: keepalive, newconn, bulk or idle, not " + text);
      }
      have_mode = true;
    } else if (name == "--proto") {
      if (text == "http/1.1") {
        o.proto = Proto::Http11;
      } else if (text == "h2") {
        o.proto = Proto::H2;
      } else {
        return bad("--proto: http/1.1 or h2, not " + text);
      }
    } else if (name == "--streams") {
      auto n = parseWhole<int>(*v);
      if (!n || *n < 1 || *n > 1000) {
        return bad("--streams: a whole number from 1 to 1000, not " + text);
      }
      o.streams = *n;
    } else if (name == "--concurrency" || name == "--connections" || name == "--threads") {
      auto n = parseWhole<int>(*v);
      if (!n || *n < 1 || *n > 1000000) {
        return bad(std::string(name) + ": a whole number from 1, not " + text);
      }
      int* field = name == "--concurrency" ? &o.concurrency : &o.connections;
      field = name == "--threads" ? &o.threads : field;
      *field = *n;
      have_connections = have_connections || name == "--connections";
    } else if (name == "--requests") {
      auto n = parseWhole<std::uint64_t>(*v);
      if (!n || *n < 1) {
        return bad("--requests: a whole number from 1, not " + text);
      }
      o.requests = n;
    } else if (name == "--label") {
      o.label = text;
    } else {  // --duration, --warmup, --hold: seconds
      auto s = parseSeconds(*v);
      bool positive = name != "--warmup";
      if (!s || (positive && *s <= 0) || *s > 86400) {
        return bad(std::string(name) + ": seconds" + (positive ? " above 0" : "") +
                   ", at most a day, not " + text);
      }
      if (name == "--duration") {
        o.duration = s;
        have_duration = true;
      } else if (name == "--warmup") {
        o.warmup = *s;
      } else {
        o.hold = *s;
      }
    }
  }
  if (!have_url) {
    return bad("--url is required");
  }
  if (!have_mode) {
    return bad("--mode is required");
  }
  if (o.cacert.empty()) {
    return bad("--cacert is required");
  }
  if (o.proxy && o.connect) {
    return bad("--connect and --proxy exclude each other");
  }
  if (!o.proxy && !o.connect) {
    return bad("--connect IP:PORT is required without --proxy");
  }
  if (o.streams > 1 && o.proto != Proto::H2) {
    return bad("--streams above 1 needs --proto h2");
  }
  if (o.streams > 1 && (o.mode == Mode::NewConn || o.mode == Mode::Idle)) {
    return bad(std::string("--streams above 1: ") + toString(o.mode) +
               " makes one request per connection");
  }
  if (o.requests && !have_duration) {
    o.duration.reset();
  }
  if (!have_connections) {
    o.connections = o.concurrency;
  }
  return o;
}

}  // namespace sluice::loadgen
