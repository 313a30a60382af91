#include "proxy/audit/audit_record.h"

#include <charconv>
#include <cstring>
#include <ctime>
#include <utility>

#include "base/json_writer.h"

namespace sluice::proxy::audit {

std::string_view toString(Mode m) {
  switch (m) {
    case Mode::Connect:
      return "connect";
    case Mode::Transparent:
      return "transparent";
    case Mode::Forward:
      return "forward";
  }
  return "connect";
}

std::string_view toString(Proto p) {
  switch (p) {
    case Proto::None:
      return "";
    case Proto::Http1:
      return "http/1.1";
    case Proto::H2:
      return "h2";
  }
  return "";
}

std::string_view toString(Error e) {
  switch (e) {
    case Error::None:
      return "";
    case Error::H2RapidReset:
      return "h2_rapid_reset";
    case Error::H2EmptyData:
      return "h2_empty_data_flood";
    case Error::H2ControlFlood:
      return "h2_control_frame_flood";
    case Error::H2SettingsFlood:
      return "h2_settings_flood";
    case Error::H2Continuation:
      return "h2_continuation_flood";
    case Error::H2CompressionError:
      return "h2_compression_error";
    case Error::H2ProtocolError:
      return "h2_protocol_error";
    case Error::TlsUnknownCa:
      return "tls_unknown_ca";
    case Error::TlsBadCertificate:
      return "tls_bad_certificate";
    case Error::TlsFailed:
      return "tls_failed";
    case Error::ClientClosed:
      return "client_closed";
    case Error::TimedOut:
      return "timeout";
    case Error::SluiceClosed:
      return "closed_by_sluice";
  }
  return "";
}

void appendTimestamp(std::string& out, std::chrono::system_clock::time_point ts) {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(ts.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  // The calendar part changes once a second: format it once a second per thread.
  thread_local std::time_t cached_second = -1;
  thread_local char cached[32];
  thread_local std::size_t cached_length = 0;
  if (seconds != cached_second) {
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    cached_length = std::strftime(cached, sizeof(cached), "%Y-%m-%dT%H:%M:%S", &utc);
    cached_second = seconds;
  }
  out.append(cached, cached_length);
  int millis = static_cast<int>(ms % 1000);
  out += '.';
  out += static_cast<char>('0' + millis / 100);
  out += static_cast<char>('0' + millis / 10 % 10);
  out += static_cast<char>('0' + millis % 10);
  out += 'Z';
}

// "1.2.3.4:80" or "[::1]:53" into `buf`, without allocating.
std::string_view formatEndpoint(const policy::Endpoint& endpoint, char (&buf)[64]) {
  char address[policy::IpAddress::kMaxTextLength + 1];
  std::size_t n = endpoint.ip.format(address);
  std::size_t at = 0;
  if (!endpoint.ip.isV4()) {
    buf[at++] = '[';
  }
  std::memcpy(buf + at, address, n);
  at += n;
  if (!endpoint.ip.isV4()) {
    buf[at++] = ']';
  }
  buf[at++] = ':';
  auto [end, ec] = std::to_chars(buf + at, buf + sizeof(buf), endpoint.port);
  (void)ec;  // 64 bytes hold any endpoint
  return std::string_view(buf, static_cast<std::size_t>(end - buf));
}

constexpr char kHexDigits[] = "0123456789abcdef";

// The JSON string of a value copied from the sandbox, with at most `cap` bytes between its
// quotes: valid UTF-8 as it is, '"' '\' and controls escaped, and a byte that is not UTF-8 as
// the UTF-8 of its Latin-1 reading (U+0080..U+00FF, 2 bytes: the string base/json_writer.h
// writes as \u00XX). Stops before the first character that would not fit, never inside one.
// Returns whether all of `text` was written.
bool appendCappedString(std::string& out, std::string_view text, std::size_t cap) {
  out += '"';
  std::size_t used = 0;
  std::size_t i = 0;
  bool whole = true;
  while (i < text.size()) {
    std::size_t run = i;
    while (run < text.size() && run - i < cap - used) {
      unsigned char c = static_cast<unsigned char>(text[run]);
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
        break;
      }
      ++run;
    }
    out.append(text.data() + i, run - i);
    used += run - i;
    i = run;
    if (i == text.size()) {
      break;
    }
    unsigned char c = static_cast<unsigned char>(text[i]);
    char escaped[6];
    std::size_t length = 0;
    std::size_t consumed = 1;
    if (c >= 0x80) {
      std::size_t n = utf8SequenceLength(text, i);
      if (n != 0) {
        consumed = length = n;
        std::memcpy(escaped, text.data() + i, n);
      } else {
        escaped[0] = static_cast<char>(0xc0 | (c >> 6));
        escaped[1] = static_cast<char>(0x80 | (c & 0x3f));
        length = 2;
      }
    } else if (c == '"' || c == '\\') {
      escaped[0] = '\\';
      escaped[1] = static_cast<char>(c);
      length = 2;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      escaped[0] = '\\';
      escaped[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
      length = 2;
    } else if (c != 0x7f && c >= 0x20) {
      escaped[0] = static_cast<char>(c);  // a plain character the run stopped at: the cap
      length = 1;
    } else {
      std::memcpy(escaped, "\\u00", 4);
      escaped[4] = kHexDigits[c >> 4];
      escaped[5] = kHexDigits[c & 0xf];
      length = 6;
    }
    if (used + length > cap) {
      whole = false;
      break;
    }
    out.append(escaped, length);
    used += length;
    i += consumed;
  }
  out += '"';
  return whole;
}

namespace {

void appendHex(char (&out)[64], const Sha256& digest) {
  constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
}

void endpointField(JsonWriter& json, std::string_view name,
                   const std::optional<policy::Endpoint>& endpoint) {
  if (endpoint) {
    char buf[64];
    json.field(name, formatEndpoint(*endpoint, buf));
  } else {
    json.fieldNull(name);
  }
}

// Which of the capped fields were cut, and how long each value was: the `truncated` member.
struct Truncation {
  std::array<std::pair<std::string_view, std::size_t>, 4> cut{};
  std::size_t count = 0;
};

void cappedField(JsonWriter& json, std::string& out, std::string_view name,
                 std::optional<std::string_view> value, std::size_t cap, Truncation& truncation) {
  json.key(name);
  if (!value) {
    out += "null";
  } else if (!appendCappedString(out, *value, cap)) {
    truncation.cut[truncation.count++] = {name, value->size()};
  }
  json.afterValue();
}

void bytesField(JsonWriter& json, std::string_view name, std::optional<std::uint64_t> bytes) {
  if (bytes) {
    json.field(name, static_cast<std::int64_t>(*bytes));
  } else {
    json.fieldNull(name);
  }
}

void digestField(JsonWriter& json, std::string_view name, bool present, const Sha256& digest) {
  if (present) {
    char hex[64];
    appendHex(hex, digest);
    json.field(name, std::string_view(hex, sizeof(hex)));
  } else {
    json.fieldNull(name);
  }
}

}  // namespace

void appendRecordBody(std::string& out, const AuditRecord& r) {
  JsonWriter json(out);
  json.beginObject();
  json.key(field::kTs);
  out += '"';
  appendTimestamp(out, r.ts);  // digits, '-', ':', '.', 'T', 'Z': nothing to escape
  out += '"';
  json.afterValue();
  json.field(field::kSandbox, r.sandbox);
  json.field(field::kKind, "http");
  json.field(field::kConn, static_cast<std::int64_t>(r.conn));
  endpointField(json, field::kClient, r.client);
  json.field(field::kMode, toString(r.mode));
  // Copied from the sandbox: capped.
  Truncation truncation;
  cappedField(json, out, field::kSni, r.sni, kMaxSniBytes, truncation);
  cappedField(json, out, field::kHost, r.host, kMaxHostBytes, truncation);
  cappedField(json, out, field::kMethod, r.method, kMaxMethodBytes, truncation);
  cappedField(json, out, field::kUrl,
              r.url.empty() ? std::nullopt : std::optional<std::string_view>(r.url), kMaxUrlBytes,
              truncation);
  endpointField(json, field::kOrigDst, r.orig_dst);
  json.key(field::kAddrs).beginArray();
  for (const policy::IpAddress& address : r.addrs) {
    char buf[policy::IpAddress::kMaxTextLength + 1];
    json.string(std::string_view(buf, address.format(buf)));
  }
  json.endArray();
  endpointField(json, field::kUpstream, r.upstream);
  json.field(field::kDecision, policy::toString(r.decision));
  json.fieldOrNull(field::kRule, r.rule);
  json.fieldOrNull(field::kReason, r.reason == policy::Reason::None
                                       ? std::string_view{}
                                       : policy::toString(r.reason));
  if (r.status != 0) {
    json.field(field::kStatus, std::int64_t{r.status});
  } else {
    json.fieldNull(field::kStatus);
  }
  bytesField(json, field::kReqBytes, r.req_bytes);
  bytesField(json, field::kRespBytes, r.resp_bytes);
  digestField(json, field::kReqSha256, r.hashed && r.req_bytes, r.req_sha256);
  digestField(json, field::kRespSha256, r.hashed && r.resp_bytes, r.resp_sha256);
  json.fieldOrNull(field::kProto, toString(r.proto));
  json.fieldOrNull(field::kUpstreamProto, toString(r.upstream_proto));
  json.fieldOrNull(field::kUpgrade,
                   r.websocket ? std::string_view("websocket") : std::string_view{});
  json.fieldOrNull(field::kError, toString(r.error));
  json.key(field::kDeniedAddrs).beginArray();
  for (const DeniedAddress& denied : r.denied_addrs) {
    char buf[policy::IpAddress::kMaxTextLength + 1];
    json.beginObject();
    json.field("ip", std::string_view(buf, denied.ip.format(buf)));
    json.field("class", policy::addressClassText(denied.ip));
    json.field("refused", policy::toString(denied.why));
    json.endObject();
  }
  json.endArray();
  json.field(field::kDurationMs, static_cast<std::int64_t>(r.duration_ms));
  if (truncation.count != 0) {
    json.key(field::kTruncated).beginObject();
    for (std::size_t i = 0; i < truncation.count; ++i) {
      json.field(truncation.cut[i].first, static_cast<std::int64_t>(truncation.cut[i].second));
    }
    json.endObject();
  }
}

}  // namespace sluice::proxy::audit
