#include "proxy/audit/audit_record.h"

#include <charconv>
#include <cstring>
#include <ctime>

#include "proxy/json_writer.h"

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

namespace {

void appendHex(char (&out)[64], const Sha256& digest) {
  constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
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

void endpointField(JsonWriter& json, std::string_view name,
                   const std::optional<policy::Endpoint>& endpoint) {
  if (endpoint) {
    char buf[64];
    json.field(name, formatEndpoint(*endpoint, buf));
  } else {
    json.fieldNull(name);
  }
}

void optionalField(JsonWriter& json, std::string_view name,
                   const std::optional<std::string_view>& value) {
  if (value) {
    json.field(name, *value);
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
  json.field(field::kConn, static_cast<std::int64_t>(r.conn));
  endpointField(json, field::kClient, r.client);
  json.field(field::kMode, toString(r.mode));
  optionalField(json, field::kSni, r.sni);
  optionalField(json, field::kHost, r.host);
  optionalField(json, field::kMethod, r.method);
  json.fieldOrNull(field::kUrl, r.url);
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
  json.field(field::kReqBytes, static_cast<std::int64_t>(r.req_bytes));
  json.field(field::kRespBytes, static_cast<std::int64_t>(r.resp_bytes));
  if (r.hashed) {
    char hex[64];
    appendHex(hex, r.req_sha256);
    json.field(field::kReqSha256, std::string_view(hex, sizeof(hex)));
    appendHex(hex, r.resp_sha256);
    json.field(field::kRespSha256, std::string_view(hex, sizeof(hex)));
  } else {
    json.fieldNull(field::kReqSha256);
    json.fieldNull(field::kRespSha256);
  }
  json.field(field::kDurationMs, static_cast<std::int64_t>(r.duration_ms));
}

}  // namespace sluice::proxy::audit
