#include "proxy/audit/audit_record.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>
#include <utility>

#include "base/ascii.h"
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
    case Error::ClientReset:
      return "client_reset";
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
  int millis = static_cast<int>(ms % 1000);
  char text[sizeof(cached) + 5];
  std::memcpy(text, cached, cached_length);
  text[cached_length] = '.';
  text[cached_length + 1] = static_cast<char>('0' + millis / 100);
  text[cached_length + 2] = static_cast<char>('0' + millis / 10 % 10);
  text[cached_length + 3] = static_cast<char>('0' + millis % 10);
  text[cached_length + 4] = 'Z';
  out.append(text, cached_length + 5);  // one append
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

// Which of the capped fields were cut, and how long each value was: the `truncated` member.
struct Truncation {
  std::array<std::pair<std::string_view, std::size_t>, 4> cut{};
  std::size_t count = 0;
};

// The record is written through a buffer on the stack: its fixed parts are string literals
// whose length the compiler knows (a few moves each, no call), the values are copied in, and
// the std::string is appended to once per kLineBuffer bytes. Written member by member with
// JsonWriter, a record cost 27 keys of separate(), appendJsonString and out-of-line push_backs,
// a fifth of sluice's own instructions per request. Values copied from the sandbox, and names
// from the configuration, take the escaping writers only when they hold a byte that needs it:
// the line is the one JsonWriter wrote, byte for byte (audit_record_line_test.cc).
constexpr std::size_t kLineBuffer = 1024;

class LineBuilder {
 public:
  explicit LineBuilder(std::string& out) : out_(out) {}
  ~LineBuilder() { flush(); }
  LineBuilder(const LineBuilder&) = delete;
  LineBuilder& operator=(const LineBuilder&) = delete;

  template <std::size_t N>
  void lit(const char (&text)[N]) {
    static_assert(N - 1 <= kLineBuffer);
    room(N - 1);
    std::memcpy(buf_ + n_, text, N - 1);
    n_ += N - 1;
  }
  // `plain_text` between quotes, unescaped: only for text isJsonPlain() holds for (sluice's own
  // words, numbers and addresses, or a value checked).
  void quoted(std::string_view plain_text) {
    room(plain_text.size() + 2);
    if (plain_text.size() + 2 > kLineBuffer) {
      out_ += '"';
      out_.append(plain_text);
      out_ += '"';
      return;
    }
    buf_[n_++] = '"';
    std::memcpy(buf_ + n_, plain_text.data(), plain_text.size());
    n_ += plain_text.size();
    buf_[n_++] = '"';
  }
  // Any string (a name from the configuration): escaped as appendJsonString does, if it needs it.
  void string(std::string_view text) {
    if (isJsonPlain(text)) {
      quoted(text);
    } else {
      appendJsonString(direct(), text);
    }
  }
  // As JsonWriter::number writes it (the record's counters went through it as int64).
  void number(std::int64_t value) {
    room(kMaxNumber);
    auto [end, ec] = std::to_chars(buf_ + n_, buf_ + kLineBuffer, value);
    (void)ec;  // room() left kMaxNumber bytes
    n_ = static_cast<std::size_t>(end - buf_);
  }
  void endpoint(const policy::Endpoint& endpoint) {
    char text[64];
    quoted(formatEndpoint(endpoint, text));
  }
  // The std::string itself, for a writer that appends to it (what is buffered goes first).
  std::string& direct() {
    flush();
    return out_;
  }

 private:
  static constexpr std::size_t kMaxNumber = 20;  // "-9223372036854775808"

  void room(std::size_t k) {
    if (kLineBuffer - n_ < k) {
      flush();
    }
  }
  void flush() {
    out_.append(buf_, n_);
    n_ = 0;
  }
  std::string& out_;
  std::size_t n_ = 0;
  char buf_[kLineBuffer];
};

// A value copied from the sandbox, capped (appendCappedString); plain and short enough: as is.
void cappedValue(LineBuilder& line, std::string_view name, std::optional<std::string_view> value,
                 std::size_t cap, Truncation& truncation) {
  if (!value) {
    line.lit("null");
  } else if (value->size() <= cap && isJsonPlain(*value)) {
    line.quoted(*value);
  } else if (!appendCappedString(line.direct(), *value, cap)) {
    truncation.cut[truncation.count++] = {name, value->size()};
  }
}

void endpointOrNull(LineBuilder& line, const std::optional<policy::Endpoint>& endpoint) {
  if (endpoint) {
    line.endpoint(*endpoint);
  } else {
    line.lit("null");
  }
}

void constantOrNull(LineBuilder& line, std::string_view text) {
  if (text.empty()) {
    line.lit("null");
  } else {
    line.quoted(text);  // sluice's own words: nothing to escape
  }
}

void bytesOrNull(LineBuilder& line, std::optional<std::uint64_t> bytes) {
  if (bytes) {
    line.number(static_cast<std::int64_t>(*bytes));
  } else {
    line.lit("null");
  }
}

void digestOrNull(LineBuilder& line, bool present, const Sha256& digest) {
  if (present) {
    char hex[64];
    appendHex(hex, digest);
    line.quoted(std::string_view(hex, sizeof(hex)));
  } else {
    line.lit("null");
  }
}

void stringOrNull(LineBuilder& line, std::string_view text) {
  if (text.empty()) {
    line.lit("null");
  } else {
    line.string(text);
  }
}

// A text of the origin's written as it is only when it is short and of plain characters, so
// that the record's bound holds (docs/audit.md#what-a-record-copies-from-the-sandbox-is-capped).
constexpr std::size_t kMaxRemovedText = 128;
bool isVersionChar(char c) {
  return ascii::isAlnum(c) || c == '.' || c == '+' || c == '!' || c == '_' || c == '~' || c == '-';
}
bool isAdvisoryChar(char c) {
  return ascii::isAlnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
}
template <typename CharTest>
bool isRecordableText(std::string_view text, CharTest test) {
  return !text.empty() && text.size() <= kMaxRemovedText &&
         std::all_of(text.begin(), text.end(), test);
}

void packageOrNull(LineBuilder& line, const std::optional<PackageFacts>& package) {
  if (!package) {
    line.lit("null");
    return;
  }
  line.lit("{\"ecosystem\":");
  line.quoted(policy::toString(package->ecosystem));
  line.lit(",\"kind\":");
  line.quoted(policy::toString(package->kind));
  line.lit(",\"name\":");
  stringOrNull(line, package->name);
  line.lit(",\"version\":");
  stringOrNull(line, package->version);
  line.lit(",\"advisory\":");
  stringOrNull(line, package->advisory);
  line.lit(",\"removed\":");
  if (!package->removed) {
    line.lit("null}");
    return;
  }
  line.lit("{\"count\":");
  line.number(static_cast<std::int64_t>(*package->removed));
  line.lit(",\"versions\":[");
  const std::size_t listed = std::min(package->removed_listed_count, kMaxRemovedListed);
  for (std::size_t i = 0; i < listed; ++i) {
    const RemovedVersionFacts& removed = package->removed_listed[i];
    if (i > 0) {
      line.lit(",");
    }
    line.lit("{\"version\":");
    line.quoted(isRecordableText(removed.version, isVersionChar) ? removed.version : "?");
    line.lit(",\"reason\":");
    line.quoted(policy::reasonInfo(removed.reason).token);
    line.lit(",\"advisory\":");
    if (isRecordableText(removed.advisory, isAdvisoryChar)) {
      line.quoted(removed.advisory);
    } else {
      line.lit("null");
    }
    line.lit("}");
  }
  line.lit("]}}");
}

// The field names below are spelled out in the literals; they are the field:: constants.
static_assert(field::kTs == "ts" && field::kSandbox == "sandbox" && field::kKind == "kind" &&
              field::kConn == "conn" && field::kClient == "client" && field::kMode == "mode" &&
              field::kSni == "sni" && field::kHost == "host" && field::kMethod == "method" &&
              field::kUrl == "url" && field::kOrigDst == "orig_dst" && field::kAddrs == "addrs" &&
              field::kUpstream == "upstream" && field::kDecision == "decision" &&
              field::kRule == "rule" && field::kReason == "reason" && field::kStatus == "status" &&
              field::kReqBytes == "req_bytes" && field::kRespBytes == "resp_bytes" &&
              field::kReqSha256 == "req_sha256" && field::kRespSha256 == "resp_sha256" &&
              field::kProto == "proto" && field::kUpstreamProto == "upstream_proto" &&
              field::kUpgrade == "upgrade" && field::kError == "error" &&
              field::kDeniedAddrs == "denied_addrs" && field::kPackage == "package" &&
              field::kDurationMs == "duration_ms" && field::kTruncated == "truncated");

}  // namespace

void appendRecordBody(std::string& out, const AuditRecord& r) {
  Truncation truncation;
  {
    LineBuilder line(out);
    line.lit("{\"ts\":\"");
    appendTimestamp(line.direct(), r.ts);  // digits, '-', ':', '.', 'T', 'Z'
    line.lit("\",\"sandbox\":");
    line.string(r.sandbox);
    line.lit(",\"kind\":\"http\",\"conn\":");
    line.number(static_cast<std::int64_t>(r.conn));
    line.lit(",\"client\":");
    line.endpoint(r.client);
    line.lit(",\"mode\":");
    line.quoted(toString(r.mode));
    // Copied from the sandbox: capped.
    line.lit(",\"sni\":");
    cappedValue(line, field::kSni, r.sni, kMaxSniBytes, truncation);
    line.lit(",\"host\":");
    cappedValue(line, field::kHost, r.host, kMaxHostBytes, truncation);
    line.lit(",\"method\":");
    cappedValue(line, field::kMethod, r.method, kMaxMethodBytes, truncation);
    line.lit(",\"url\":");
    cappedValue(line, field::kUrl,
                r.url.empty() ? std::nullopt : std::optional<std::string_view>(r.url), kMaxUrlBytes,
                truncation);
    line.lit(",\"orig_dst\":");
    endpointOrNull(line, r.orig_dst);
    line.lit(",\"addrs\":[");
    bool first = true;
    for (const policy::IpAddress& address : r.addrs) {
      char buf[policy::IpAddress::kMaxTextLength + 1];
      if (!first) {
        line.lit(",");
      }
      first = false;
      line.quoted(std::string_view(buf, address.format(buf)));
    }
    line.lit("],\"upstream\":");
    endpointOrNull(line, r.upstream);
    line.lit(",\"decision\":");
    line.quoted(policy::toString(r.decision));
    line.lit(",\"rule\":");
    if (r.rule.empty()) {
      line.lit("null");
    } else {
      line.string(r.rule);
    }
    line.lit(",\"reason\":");
    constantOrNull(
        line, r.reason == policy::Reason::None ? std::string_view{} : policy::toString(r.reason));
    line.lit(",\"status\":");
    if (r.status != 0) {
      line.number(std::int64_t{r.status});
    } else {
      line.lit("null");
    }
    line.lit(",\"req_bytes\":");
    bytesOrNull(line, r.req_bytes);
    line.lit(",\"resp_bytes\":");
    bytesOrNull(line, r.resp_bytes);
    line.lit(",\"req_sha256\":");
    digestOrNull(line, r.hashed && r.req_bytes, r.req_sha256);
    line.lit(",\"resp_sha256\":");
    digestOrNull(line, r.hashed && r.resp_bytes, r.resp_sha256);
    line.lit(",\"proto\":");
    constantOrNull(line, toString(r.proto));
    line.lit(",\"upstream_proto\":");
    constantOrNull(line, toString(r.upstream_proto));
    line.lit(",\"upgrade\":");
    constantOrNull(line, r.websocket ? std::string_view("websocket") : std::string_view{});
    line.lit(",\"error\":");
    constantOrNull(line, toString(r.error));
    line.lit(",\"denied_addrs\":[");
    first = true;
    for (const DeniedAddress& denied : r.denied_addrs) {
      char buf[policy::IpAddress::kMaxTextLength + 1];
      if (!first) {
        line.lit(",");
      }
      first = false;
      line.lit("{\"ip\":");
      line.quoted(std::string_view(buf, denied.ip.format(buf)));
      line.lit(",\"class\":");
      line.string(policy::addressClassText(denied.ip));
      line.lit(",\"refused\":");
      line.string(policy::toString(denied.why));
      line.lit("}");
    }
    line.lit("],\"package\":");
    packageOrNull(line, r.package);
    line.lit(",\"duration_ms\":");
    line.number(static_cast<std::int64_t>(r.duration_ms));
  }
  if (truncation.count != 0) {
    JsonWriter json(out);
    json.afterValue();
    json.key(field::kTruncated).beginObject();
    for (std::size_t i = 0; i < truncation.count; ++i) {
      json.field(truncation.cut[i].first, static_cast<std::int64_t>(truncation.cut[i].second));
    }
    json.endObject();
  }
}

}  // namespace sluice::proxy::audit
