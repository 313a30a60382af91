#include "proxy/audit/audit_record.h"

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
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[32];
  std::size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
  out.append(buf, n);
  int millis = static_cast<int>(ms % 1000);
  out += '.';
  out += static_cast<char>('0' + millis / 100);
  out += static_cast<char>('0' + millis / 10 % 10);
  out += static_cast<char>('0' + millis % 10);
  out += 'Z';
}

namespace {

void appendHex(std::string& out, const Sha256& digest) {
  constexpr char kHex[] = "0123456789abcdef";
  for (std::uint8_t b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
}

void endpointField(JsonWriter& json, std::string_view name,
                   const std::optional<policy::Endpoint>& endpoint) {
  if (endpoint) {
    json.field(name, endpoint->toString());
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
  std::string ts;
  appendTimestamp(ts, r.ts);
  json.field(field::kTs, ts);
  json.field(field::kSandbox, r.sandbox);
  json.field(field::kConn, static_cast<std::int64_t>(r.conn));
  json.field(field::kClient, r.client.toString());
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
    std::string hex;
    appendHex(hex, r.req_sha256);
    json.field(field::kReqSha256, hex);
    hex.clear();
    appendHex(hex, r.resp_sha256);
    json.field(field::kRespSha256, hex);
  } else {
    json.fieldNull(field::kReqSha256);
    json.fieldNull(field::kRespSha256);
  }
  json.field(field::kDurationMs, static_cast<std::int64_t>(r.duration_ms));
}

}  // namespace sluice::proxy::audit
