// The audit line is written through a buffer of literals (appendRecordBody), and must stay the
// line the JsonWriter-based writer wrote, byte for byte: the chain, `sluice audit verify` and
// every reader of docs/audit.md's format take it as it is. That writer is kept here as the
// reference, as it was, and both write a table of records whose every member holds what a
// sandbox could make of it: controls, quotes, backslashes, bytes that are not UTF-8, valid
// UTF-8, values at, under and over their caps, longer than the buffer; and every enum value.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_writer.h"
#include "proxy/audit/audit_record.h"

namespace sluice::proxy::audit {
namespace {

// --- the reference: appendRecordBody and appendTimestamp as they were before the line builder

void referenceTimestamp(std::string& out, std::chrono::system_clock::time_point ts) {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(ts.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char calendar[32];
  out.append(calendar, std::strftime(calendar, sizeof(calendar), "%Y-%m-%dT%H:%M:%S", &utc));
  int millis = static_cast<int>(ms % 1000);
  out += '.';
  out += static_cast<char>('0' + millis / 100);
  out += static_cast<char>('0' + millis / 10 % 10);
  out += static_cast<char>('0' + millis % 10);
  out += 'Z';
}

void referenceHex(char (&out)[64], const Sha256& digest) {
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

struct Truncation {
  std::pair<std::string_view, std::size_t> cut[4];
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
    referenceHex(hex, digest);
    json.field(name, std::string_view(hex, sizeof(hex)));
  } else {
    json.fieldNull(name);
  }
}

// A removed version's text is written only when short and plain
// (docs/audit.md#what-a-record-copies-from-the-sandbox-is-capped).
constexpr std::string_view kVersionChars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.+!_~-";
constexpr std::string_view kAdvisoryChars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-";
bool recordable(std::string_view text, std::string_view chars) {
  return !text.empty() && text.size() <= 128 && text.find_first_not_of(chars) == text.npos;
}

std::string referenceBody(const AuditRecord& r) {
  std::string out;
  JsonWriter json(out);
  json.beginObject();
  json.key(field::kTs);
  out += '"';
  referenceTimestamp(out, r.ts);
  out += '"';
  json.afterValue();
  json.field(field::kSandbox, r.sandbox);
  json.field(field::kKind, "http");
  json.field(field::kConn, static_cast<std::int64_t>(r.conn));
  endpointField(json, field::kClient, r.client);
  json.field(field::kMode, toString(r.mode));
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
  json.fieldOrNull(field::kReason, r.reason == policy::Reason::None ? std::string_view{}
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
  if (r.package) {
    json.key(field::kPackage).beginObject();
    json.field("ecosystem", policy::toString(r.package->ecosystem));
    json.field("kind", policy::toString(r.package->kind));
    json.fieldOrNull("name", r.package->name);
    json.fieldOrNull("version", r.package->version);
    json.fieldOrNull("advisory", r.package->advisory);
    if (r.package->removed) {
      json.key("removed").beginObject();
      json.field("count", static_cast<std::int64_t>(*r.package->removed));
      json.key("versions").beginArray();
      for (std::size_t i = 0; i < r.package->removed_listed_count; ++i) {
        const RemovedVersionFacts& removed = r.package->removed_listed[i];
        json.beginObject();
        json.field("version", recordable(removed.version, kVersionChars) ? removed.version : "?");
        json.field("reason", policy::reasonInfo(removed.reason).token);
        json.fieldOrNull("advisory",
                         recordable(removed.advisory, kAdvisoryChars) ? removed.advisory : "");
        json.endObject();
      }
      json.endArray();
      json.endObject();
    } else {
      json.fieldNull("removed");
    }
    json.endObject();
  } else {
    json.fieldNull(field::kPackage);
  }
  json.field(field::kDurationMs, static_cast<std::int64_t>(r.duration_ms));
  if (truncation.count != 0) {
    json.key(field::kTruncated).beginObject();
    for (std::size_t i = 0; i < truncation.count; ++i) {
      json.field(truncation.cut[i].first, static_cast<std::int64_t>(truncation.cut[i].second));
    }
    json.endObject();
  }
  return out;
}

// --- the table

std::string bytes(std::string_view text, std::size_t times = 1) {
  std::string out;
  for (std::size_t i = 0; i < times; ++i) {
    out.append(text);
  }
  return out;
}

// What a sandbox (or a hostile configuration) can put in a string member.
std::vector<std::string> hostileStrings() {
  std::vector<std::string> values = {
      "",
      "GET",
      "api.example.test",
      "https://api.example.test/v1/x?y=1#z",
      "a\"b",
      "\\",
      "\"\\\"\\\\",
      std::string("nul\0inside", 10),
      "\x01\x1f\x7f",
      "line\r\nfeed\ttab",
      "\xff",
      "\xc3",              // a truncated sequence
      "\xc0\xaf",          // an overlong '/'
      "\xed\xa0\x80",      // a surrogate
      "\xf4\x90\x80\x80",  // above U+10FFFF
      "b\xc3\xbc"
      "cher \xf0\x9f\x98\x80",
      "</script><script>",
      "{\"decision\":\"allow\"}",
      ",\"truncated\":{\"url\":1}",
      bytes("a", 31),
      bytes("a", 32),
      bytes("a", 33),
      bytes("\"", 17),  // escapes cross the method's cap of 32
      bytes("\xc3\xbc", 16) + "x",
      bytes("\x01", 6),
      bytes("s", 511),
      bytes("s", 512),
      bytes("s", 513),
      bytes("\xe2\x82\xac", 171),  // a 3-byte character across the sni and host caps
      bytes("u", 1000),            // about the line buffer's size
      bytes("u", 1021),
      bytes("u", 1022),
      bytes("u", 1023),
      bytes("u", 1024),
      bytes("u", 1025),
      bytes("u", 4095),
      bytes("u", 4096),
      bytes("u", 4097),
      bytes("\\", 3000),  // over the url's cap once escaped
      bytes("\xff", 5000),
  };
  for (int c = 0; c < 256; ++c) {
    values.push_back("x" + std::string(1, static_cast<char>(c)) + "y");
  }
  return values;
}

struct Storage {
  std::vector<policy::IpAddress> addrs;
  std::vector<DeniedAddress> denied;
};

// The last millisecond a system_clock::time_point holds: its ticks are nanoseconds in an int64
// with libstdc++ (the year 2262), so a later time (9999-12-31, say) cannot even be made without
// overflowing (UBSan's report, in the test command's second tree).
constexpr std::int64_t kLatestMs =
    std::chrono::floor<std::chrono::milliseconds>(
        std::chrono::system_clock::time_point::max().time_since_epoch())
        .count();

const policy::Endpoint kEndpoints[] = {*policy::Endpoint::parse("127.0.0.1:40000"),
                                       *policy::Endpoint::parse("[::1]:53"),
                                       *policy::Endpoint::parse("[2001:db8::1:0:0:1]:65535"),
                                       *policy::Endpoint::parse("255.255.255.255:0")};

const char* const kAddresses[] = {"10.0.0.1",
                                  "127.0.0.1",
                                  "169.254.169.254",
                                  "::ffff:10.1.2.3",
                                  "64:ff9b::a9fe:a9fe",
                                  "fe80::1",
                                  "2001:db8::1",
                                  "8.8.8.8",
                                  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"};

// Record `i` of the table: string `s` in every string member (each its own in turn), and the
// other members cycling through their values with `i`.
AuditRecord record(std::size_t i, const std::string& s, Storage& storage) {
  AuditRecord r;
  const std::int64_t times[] = {0, 1764607425123, 1764607425999, 1764607426000, kLatestMs};
  r.ts = std::chrono::system_clock::time_point(std::chrono::milliseconds(times[i % 5]));
  r.sandbox = i % 7 == 0 ? std::string_view(s) : std::string_view("sbx1");
  const std::uint64_t counts[] = {0, 1, 7, 1u << 31, std::numeric_limits<std::uint64_t>::max()};
  r.conn = counts[i % 5];
  r.client = kEndpoints[i % 4];
  r.mode = static_cast<Mode>(i % 3);
  if (i % 5 != 1) {
    r.sni = s;
  }
  if (i % 5 != 2) {
    r.host = s;
  }
  if (i % 5 != 3) {
    r.method = s;
  }
  r.url = s;
  if (i % 2 == 0) {
    r.orig_dst = kEndpoints[(i / 2) % 4];
  }
  storage.addrs.clear();
  storage.denied.clear();
  for (std::size_t k = 0; k < i % 10; ++k) {
    storage.addrs.push_back(*policy::IpAddress::parse(kAddresses[(i + k) % 9]));
  }
  for (std::size_t k = 0; k < i % 4; ++k) {
    storage.denied.push_back({*policy::IpAddress::parse(kAddresses[(i * 3 + k) % 9]),
                              static_cast<policy::AddressRefusal>(k % 4)});
  }
  r.addrs = storage.addrs;
  r.denied_addrs = storage.denied;
  if (i % 3 != 0) {
    r.upstream = kEndpoints[(i + 1) % 4];
  }
  r.decision = static_cast<policy::Verdict>(i % 3);
  r.rule = i % 11 == 0  ? std::string_view(s)
           : i % 2 == 0 ? std::string_view("allow-api")
                        : std::string_view();
  r.reason = static_cast<policy::Reason>(i % policy::kReasonCount);
  const int statuses[] = {0, 200, 403, 502, 999, -1};
  r.status = statuses[i % 6];
  if (i % 4 != 0) {
    r.req_bytes = counts[(i + 1) % 5];
  }
  if (i % 3 != 0) {
    r.resp_bytes = counts[(i + 2) % 5];
  }
  r.hashed = i % 2 == 1;
  for (std::size_t k = 0; k < r.req_sha256.size(); ++k) {
    r.req_sha256[k] = static_cast<std::uint8_t>(i * 7 + k);
    r.resp_sha256[k] = static_cast<std::uint8_t>(255 - k - i);
  }
  r.proto = static_cast<Proto>(i % 3);
  r.upstream_proto = static_cast<Proto>((i / 3) % 3);
  r.websocket = i % 8 == 5;
  r.error = static_cast<Error>(i % kErrorCount);
  if (i % 4 != 3) {
    // (Names and versions are checked before they are recorded; the writer escapes anyway.)
    PackageFacts& package = r.package.emplace();
    package.ecosystem = static_cast<policy::Ecosystem>(i % 2);
    package.kind = static_cast<policy::PackageRequestKind>(i % 5);
    package.name = i % 6 == 0 ? std::string_view(s) : std::string_view("@myorg/util");
    package.version = i % 3 == 0 ? std::string_view() : std::string_view(s);
    package.advisory = i % 4 == 1 ? std::string_view("MAL-2025-1") : std::string_view();
    if (i % 5 != 0) {
      // Filtered metadata: the origin's hostile version texts, none to all four listed.
      package.removed = i % 7;
      package.removed_listed_count = std::min<std::size_t>(i % 7, kMaxRemovedListed);
      for (std::size_t k = 0; k < package.removed_listed_count; ++k) {
        package.removed_listed[k] = {k % 2 == 0 ? std::string_view(s) : "1.0.0-beta.1+b",
                                     static_cast<policy::Reason>((i + k) % policy::kReasonCount),
                                     k % 3 == 0 ? std::string_view(s) : "MAL-2025-1"};
      }
    }
  }
  r.duration_ms = counts[(i + 3) % 5];
  return r;
}

std::string body(const AuditRecord& r) {
  std::string out;
  appendRecordBody(out, r);
  return out;
}

TEST(AuditRecordLine, IsTheLineJsonWriterWroteForEveryHostileValue) {
  Storage storage;
  std::size_t i = 0;
  std::size_t truncated = 0;
  for (const std::string& s : hostileStrings()) {
    for (std::size_t round = 0; round < 12; ++round, ++i) {
      const AuditRecord r = record(i, s, storage);
      const std::string expected = referenceBody(r);
      ASSERT_EQ(body(r), expected) << "record " << i;
      truncated += expected.find(",\"truncated\":{") != std::string::npos ? 1 : 0;
    }
  }
  EXPECT_GT(truncated, 100u);  // the table does cut values
}

// Random bytes, lengths about the caps and the buffer: what no table thought of.
TEST(AuditRecordLine, IsTheLineJsonWriterWroteForRandomValues) {
  std::mt19937 random(20261207);
  const std::size_t lengths[] = {0, 1, 5, 31, 32, 33, 200, 511, 512, 513, 1023, 1024, 1030, 4096};
  Storage storage;
  for (std::size_t i = 0; i < 3000; ++i) {
    std::string s(lengths[random() % std::size(lengths)] + random() % 3, '\0');
    const std::uint32_t alphabet =
        static_cast<std::uint32_t>(random() % 3);  // all bytes, ASCII, mostly plain
    for (char& c : s) {
      const std::uint32_t v = static_cast<std::uint32_t>(random());
      c = static_cast<char>(alphabet == 0   ? v % 256
                            : alphabet == 1 ? v % 128
                            : v % 50 == 0   ? v % 256
                                            : 'a' + v % 26);
    }
    const AuditRecord r = record(i, s, storage);
    ASSERT_EQ(body(r), referenceBody(r)) << "record " << i;
  }
}

TEST(AuditRecordLine, TimestampIsTheCalendarSecondAndItsMilliseconds) {
  for (std::int64_t ms :
       {std::int64_t{0}, std::int64_t{999}, std::int64_t{1000}, std::int64_t{1764607425123},
        std::int64_t{1764607425123}, std::int64_t{1764607426001}, kLatestMs}) {
    const auto ts = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
    std::string expected;
    referenceTimestamp(expected, ts);
    std::string out = "x";
    appendTimestamp(out, ts);
    EXPECT_EQ(out, "x" + expected);
  }
  std::string out;
  appendTimestamp(out,
                  std::chrono::system_clock::time_point(std::chrono::milliseconds(1764607425123)));
  EXPECT_EQ(out, "2025-12-01T16:43:45.123Z");
  out.clear();
  appendTimestamp(out, std::chrono::system_clock::time_point(std::chrono::milliseconds(kLatestMs)));
  EXPECT_EQ(out, "2262-04-11T23:47:16.854Z");
}

}  // namespace
}  // namespace sluice::proxy::audit
