#pragma once
// One audit record (docs/audit.md): one per HTTP request, allowed or not, and one per connection
// that ended denied before any request. Field names are constants here and nowhere else, so tests
// and log pipelines can rely on them.
//
// What a record copies from the sandbox (method, sni, host, url) is capped: each of these
// strings takes at most its kMax* bytes of the line (escapes counted), so a sandbox cannot make
// one record large, whatever it sends. A value that did not fit is cut at a character boundary
// and the record says so in a member of its own, `"truncated":{"url":70012}` (each cut field
// with the length in bytes of the value received), which no sandbox byte can forge: the
// sandbox's bytes only ever appear inside escaped strings. Within a cap, a byte received costs
// at most 2 bytes of the line ('"', '\', or a byte that is not UTF-8: written as the character
// of its Latin-1 reading, the same JSON string as \u00XX in a third of the bytes), except a
// control character, which JSON writes as \u00XX (6 bytes). The fixed part, what sluice writes
// itself, is at most kMaxFixedBytes plus kMaxAddressBytes per address in `addrs`.
// docs/audit.md#what-a-record-copies-from-the-sandbox-is-capped states the resulting bound.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "policy/decision.h"
#include "policy/ip_address.h"
#include "policy/package_request.h"
#include "policy/reason.h"

namespace sluice::proxy::audit {

namespace field {
inline constexpr std::string_view kTs = "ts";
inline constexpr std::string_view kSandbox = "sandbox";
inline constexpr std::string_view kKind = "kind";
inline constexpr std::string_view kConn = "conn";
inline constexpr std::string_view kClient = "client";
inline constexpr std::string_view kMode = "mode";
inline constexpr std::string_view kSni = "sni";
inline constexpr std::string_view kHost = "host";
inline constexpr std::string_view kMethod = "method";
inline constexpr std::string_view kUrl = "url";
inline constexpr std::string_view kOrigDst = "orig_dst";
inline constexpr std::string_view kAddrs = "addrs";
inline constexpr std::string_view kUpstream = "upstream";
inline constexpr std::string_view kDecision = "decision";
inline constexpr std::string_view kRule = "rule";
inline constexpr std::string_view kReason = "reason";
inline constexpr std::string_view kStatus = "status";
inline constexpr std::string_view kReqBytes = "req_bytes";
inline constexpr std::string_view kRespBytes = "resp_bytes";
inline constexpr std::string_view kReqSha256 = "req_sha256";
inline constexpr std::string_view kRespSha256 = "resp_sha256";
inline constexpr std::string_view kProto = "proto";
inline constexpr std::string_view kUpstreamProto = "upstream_proto";
inline constexpr std::string_view kUpgrade = "upgrade";
inline constexpr std::string_view kError = "error";
inline constexpr std::string_view kDeniedAddrs = "denied_addrs";
inline constexpr std::string_view kPackage = "package";
inline constexpr std::string_view kDurationMs = "duration_ms";
inline constexpr std::string_view kTruncated = "truncated";  // only when a value was cut
inline constexpr std::string_view kChain = "chain";
}  // namespace field

// Caps on the strings copied from the sandbox, in bytes of the line between the quotes. Each
// holds any valid value of its kind whole: a method token, a DNS name with its port, and a
// URL of the length clients and servers commonly accept.
inline constexpr std::size_t kMaxMethodBytes = 32;
inline constexpr std::size_t kMaxSniBytes = 512;
inline constexpr std::size_t kMaxHostBytes = 512;
inline constexpr std::size_t kMaxUrlBytes = 4096;
// What sluice writes itself, from '{' up to `,"chain"`, with every field at its longest (names
// from the config at their 64-character limit, IPv6 endpoints, 20-digit numbers, both
// digests, a `package` with the longest name, version and advisory id any can have: each is
// checked before it is recorded, in characters JSON writes as they are), and `addrs` and
// `denied_addrs` empty; and the most each resolved address adds to
// `addrs`, and each refused one to `denied_addrs` (only the kMaxAddresses an answer is checked
// for can be refused).
inline constexpr std::size_t kMaxFixedBytes = 2944;
inline constexpr std::size_t kMaxAddressBytes = 48;
inline constexpr std::size_t kMaxDeniedAddressBytes = 128;
// The `truncated` member with all four fields cut, each with a 20-digit length.
inline constexpr std::size_t kMaxTruncatedBytes = 120;

enum class Mode : std::uint8_t { Connect, Transparent, Forward };
std::string_view toString(Mode m);

// The HTTP version of a leg: "http/1.1", "h2"; None is null (no HTTP on that leg: a redirected
// connection refused before any request, a request that never went upstream).
enum class Proto : std::uint8_t { None, Http1, H2 };
std::string_view toString(Proto p);  // "" for None

// Why a request or connection ended abnormally (`error`): sluice's own stable tokens
// (docs/audit.md#errors). None is null.
enum class Error : std::uint8_t {
  None,
  // An HTTP/2 connection the sandbox made sluice end (GOAWAY, docs/wire.md#http2).
  H2RapidReset,        // streams reset faster than sluice's budget (CVE-2023-44487)
  H2EmptyData,         // DATA frames that carry nothing and end nothing
  H2ControlFlood,      // PING or SETTINGS acknowledgements queued for a client that does not read
  H2SettingsFlood,     // a SETTINGS frame with too many entries
  H2Continuation,      // a header block in too many CONTINUATION frames
  H2CompressionError,  // an HPACK block that does not decode
  H2ProtocolError,     // any other connection error of RFC 9113 (a bad preface, a bad frame)
  // A request: the client reset its HTTP/2 stream before the answer was whole (a gRPC call's
  // deadline or cancel: RST_STREAM CANCEL).
  ClientReset,
  // A tunnel that ended without carrying a request (docs/audit.md#errors).
  TlsUnknownCa,       // the sandbox refused sluice's certificate: it does not trust the CA
  TlsBadCertificate,  // the sandbox refused sluice's certificate otherwise (bad, expired...)
  TlsFailed,          // any other failure of the sandbox's TLS handshake or session
  ClientClosed,       // the sandbox closed (or reset) the tunnel
  TimedOut,           // handshake_timeout or idle_timeout ran out
  SluiceClosed,       // sluice ended it: a shutdown, a reload that removed the sandbox
};
inline constexpr std::size_t kErrorCount = static_cast<std::size_t>(Error::SluiceClosed) + 1;
// The record is of a tunnel that carried no request: on record, but no request in the metrics.
constexpr bool endsQuietTunnel(Error e) { return e >= Error::TlsUnknownCa; }
std::string_view toString(Error e);  // "" for None

using Sha256 = std::array<std::uint8_t, 32>;

// An address of H that the address checks refused (`denied_addrs`, reason ip_denied), and why.
// The package a registry request names (docs/packages.md#on-record): views valid while the
// record is written. Empty views are null.
// A version filtered metadata did not show the client (docs/packages.md#metadata).
struct RemovedVersionFacts {
  // As the metadata spells it: written when it is at most 128 characters of
  // [A-Za-z0-9.+!_~-], else as "?" (the origin's text, which could be anything).
  std::string_view version;
  policy::Reason reason = policy::Reason::None;
  std::string_view advisory;  // an OSV id (at most 128 characters of [A-Za-z0-9._:-]), or none
};
inline constexpr std::size_t kMaxRemovedListed = 4;

struct PackageFacts {
  policy::Ecosystem ecosystem = policy::Ecosystem::Npm;
  policy::PackageRequestKind kind = policy::PackageRequestKind::None;
  std::string_view name;      // normal form, at most 214 characters of [a-z0-9@/._~!'()-]
  std::string_view version;   // as in the URL, at most 128 characters of [A-Za-z0-9.+!_-]
  std::string_view advisory;  // the id of the advisory that refused it, at most 64 characters
  // Metadata sluice filtered: how many versions it removed (nullopt: it filtered none), and
  // the first kMaxRemovedListed of them.
  std::optional<std::size_t> removed;
  std::array<RemovedVersionFacts, kMaxRemovedListed> removed_listed{};
  std::size_t removed_listed_count = 0;
};

struct DeniedAddress {
  policy::IpAddress ip;
  policy::AddressRefusal why = policy::AddressRefusal::NotGlobal;
};

// Views into the session's state: valid for the duration of AuditLog::write().
struct AuditRecord {
  std::chrono::system_clock::time_point ts;
  std::string_view sandbox;
  std::uint64_t conn = 0;
  policy::Endpoint client;
  Mode mode = Mode::Connect;
  std::optional<std::string_view> sni;   // as received; absent: null
  std::optional<std::string_view> host;  // as received; absent: null
  std::optional<std::string_view> method;
  std::string_view url;  // empty: null
  std::optional<policy::Endpoint> orig_dst;
  std::span<const policy::IpAddress> addrs;
  std::optional<policy::Endpoint> upstream;
  policy::Verdict decision = policy::Verdict::Deny;
  std::string_view rule;  // empty: null
  policy::Reason reason = policy::Reason::None;
  int status = 0;  // 0: null (no HTTP answer was sent)
  // Body bytes of a body sluice read (sent upstream, or relayed down); null for one it never
  // read (a refused request's, the origin's when none answered), even with hash_bodies.
  std::optional<std::uint64_t> req_bytes;
  std::optional<std::uint64_t> resp_bytes;
  bool hashed = false;  // hash_bodies: the digest of each body that was read
  Sha256 req_sha256{};
  Sha256 resp_sha256{};
  Proto proto = Proto::None;           // the sandbox's leg
  Proto upstream_proto = Proto::None;  // the origin's leg
  bool websocket = false;              // `upgrade`: the request asked for a WebSocket
  Error error = Error::None;
  std::span<const DeniedAddress> denied_addrs;
  std::optional<PackageFacts> package;  // a request of a rule with a `registry`; else null
  std::uint64_t duration_ms = 0;
};

// Appends the record's JSON, from '{' up to (not including) the `,"chain"` member, to `out`.
void appendRecordBody(std::string& out, const AuditRecord& record);

// "2026-11-29T22:09:51.123Z"
void appendTimestamp(std::string& out, std::chrono::system_clock::time_point ts);

// For the record writers: "1.2.3.4:80" or "[::1]:53" into `buf`, without allocating.
std::string_view formatEndpoint(const policy::Endpoint& endpoint, char (&buf)[64]);
// The JSON string (quotes included) of a value copied from the sandbox, with at most `cap`
// bytes between its quotes (the header comment says how each byte is written); false when it
// was cut, at a character boundary.
bool appendCappedString(std::string& out, std::string_view text, std::size_t cap);

}  // namespace sluice::proxy::audit
