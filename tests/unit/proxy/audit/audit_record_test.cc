// The audit record writer against the worst a sandbox can send: what a record copies from the
// sandbox (method, sni, host, url) is capped, a cut value is marked in a member no sandbox byte
// can forge, and the log grows by a bounded number of bytes per record and at most a small
// factor per byte received. The numbers here are the ones
// docs/audit.md#what-a-record-copies-from-the-sandbox-is-capped states; they are written out,
// not taken from the header, so that changing a cap means changing the contract on purpose.
#include "proxy/audit/audit_record.h"

#include <gtest/gtest.h>

#include <limits>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::audit {
namespace {

// The caps, in bytes between the quotes, and the bounds on the rest of a line.
constexpr std::size_t kMethodCap = 32;
constexpr std::size_t kSniCap = 512;
constexpr std::size_t kHostCap = 512;
constexpr std::size_t kUrlCap = 4096;
// Everything sluice writes itself, addrs empty; a package at its longest included.
constexpr std::size_t kFixedMax = 2944;
constexpr std::size_t kPerAddressMax = 48;         // 45 characters of IPv6 text, quotes, a comma
constexpr std::size_t kPerDeniedAddressMax = 128;  // {"ip","class","refused"}, a comma
constexpr std::size_t kTruncatedMax = 120;         // ,"truncated":{4 fields with 20-digit lengths}
// The whole record (up to `,"chain"`; the chain member adds 77 bytes) without addresses.
constexpr std::size_t kRecordMax =
    kFixedMax + kMethodCap + kSniCap + kHostCap + kUrlCap + kTruncatedMax;

enum class Field { Method, Sni, Host, Url };

struct FieldCase {
  Field field;
  std::string_view name;
  std::size_t cap;
};

constexpr FieldCase kFields[] = {{Field::Method, "method", kMethodCap},
                                 {Field::Sni, "sni", kSniCap},
                                 {Field::Host, "host", kHostCap},
                                 {Field::Url, "url", kUrlCap}};

void set(AuditRecord& r, Field field, std::string_view value) {
  switch (field) {
    case Field::Method:
      r.method = value;
      break;
    case Field::Sni:
      r.sni = value;
      break;
    case Field::Host:
      r.host = value;
      break;
    case Field::Url:
      r.url = value;
      break;
  }
}

AuditRecord ordinary() {
  AuditRecord r;
  r.ts = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764607425123));
  r.sandbox = "sbx1";
  r.conn = 7;
  r.client = *policy::Endpoint::parse("127.0.0.1:40000");
  r.decision = policy::Verdict::Deny;
  r.reason = policy::Reason::BadRequest;
  r.status = 400;
  return r;
}

std::string line(const AuditRecord& r) {
  std::string out;
  appendRecordBody(out, r);
  return out;
}

// The raw text of member `name`'s string value (between its quotes, escapes as written), or
// nullopt when the member is absent or not a string. Members are found outside strings only.
std::optional<std::string> stringMember(std::string_view text, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":";
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (in_string) {
      if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '"') {
        in_string = false;
      }
      continue;
    }
    if (text.substr(i, key.size()) == key) {
      std::size_t start = i + key.size();
      if (start >= text.size() || text[start] != '"') {
        return std::nullopt;
      }
      std::size_t end = start + 1;
      while (end < text.size() && text[end] != '"') {
        end += text[end] == '\\' ? 2 : 1;
      }
      return std::string(text.substr(start + 1, end - start - 1));
    }
    if (text[i] == '"') {
      in_string = true;
    }
  }
  return std::nullopt;
}

// The `truncated` member as written (`{...}`), or "" when the record has none. Outside strings
// only: a sandbox can put the same characters inside one, escaped.
std::string truncatedMember(std::string_view text) {
  constexpr std::string_view kKey = ",\"truncated\":{";
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (in_string) {
      if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '"') {
        in_string = false;
      }
      continue;
    }
    if (text.substr(i, kKey.size()) == kKey) {
      std::size_t end = text.find('}', i);
      return std::string(text.substr(i + kKey.size() - 1, end - (i + kKey.size() - 1) + 1));
    }
    if (text[i] == '"') {
      in_string = true;
    }
  }
  return "";
}

// How one byte a sandbox sends is written, alone: the factor docs/audit.md states.
struct ByteCost {
  std::string_view what;
  char byte;
  std::string_view written;
};

const ByteCost kByteCosts[] = {
    {"a plain character", 'a', "a"},
    {"a quote", '"', "\\\""},
    {"a backslash", '\\', "\\\\"},
    {"a line feed", '\n', "\\n"},
    {"a byte that is not UTF-8", '\xff', "\xc3\xbf"},  // U+00FF, as \u00ff would read
    {"another one", '\x80', "\xc2\x80"},
    {"NUL", '\0', "\\u0000"},
    {"another control", '\x01', "\\u0001"},
    {"DEL", '\x7f', "\\u007f"},
};

// ---------------------------------------------------------------------------------------------

TEST(AuditRecordCaps, AValueBelowItsCapIsWrittenWhole) {
  for (const FieldCase& f : kFields) {
    AuditRecord r = ordinary();
    std::string value(f.cap, 'a');
    set(r, f.field, value);
    std::string text = line(r);
    EXPECT_EQ(stringMember(text, f.name), value) << f.name;
    EXPECT_EQ(truncatedMember(text), "") << f.name;
  }
}

// Each kind of worst byte, far past each cap: the value is cut to its cap, at a character
// boundary, and the record says which field was cut and how long the value was.
TEST(AuditRecordCaps, AnyValueIsCutAtItsCapAndMarked) {
  constexpr std::size_t kSent = 64 * 1024;
  for (const FieldCase& f : kFields) {
    for (const ByteCost& cost : kByteCosts) {
      SCOPED_TRACE(std::string(f.name) + ": " + std::string(cost.what));
      AuditRecord r = ordinary();
      std::string value(kSent, cost.byte);
      set(r, f.field, value);
      std::string text = line(r);
      std::string expected;
      while (expected.size() + cost.written.size() <= f.cap) {
        expected += cost.written;
      }
      EXPECT_EQ(stringMember(text, f.name), expected);
      EXPECT_EQ(truncatedMember(text), "{\"" + std::string(f.name) + "\":65536}");
    }
  }
}

// Under its cap a byte costs 1 byte of the line, 2 for '"', '\' and a byte that is not UTF-8,
// and 6 only for a control character: JSON has no shorter escape for it.
TEST(AuditRecordCaps, BelowItsCapAByteCostsAtMostTwoBytesSixForAControl) {
  for (const FieldCase& f : kFields) {
    for (const ByteCost& cost : kByteCosts) {
      SCOPED_TRACE(std::string(f.name) + ": " + std::string(cost.what));
      std::size_t n = f.cap / cost.written.size();
      AuditRecord r = ordinary();
      std::string value(n, cost.byte);
      set(r, f.field, value);
      std::string text = line(r);
      ASSERT_EQ(stringMember(text, f.name)->size(), n * cost.written.size());
      EXPECT_EQ(truncatedMember(text), "");
      bool control = static_cast<unsigned char>(cost.byte) < 0x20 && cost.byte != '\n';
      EXPECT_LE(cost.written.size(), control || cost.byte == '\x7f' ? 6u : 2u);
    }
  }
  // Every byte value, each alone: none costs more than 6.
  for (int b = 0; b < 256; ++b) {
    AuditRecord r = ordinary();
    char byte = static_cast<char>(b);
    r.host = std::string_view(&byte, 1);
    std::string text = line(r);
    EXPECT_LE(stringMember(text, "host")->size(), 6u) << b;
    EXPECT_LE(stringMember(text, "host")->size(), b >= 0x20 && b != 0x7f ? 2u : 6u) << b;
  }
}

TEST(AuditRecordCaps, ACutNeverSplitsACharacterOrAnEscape) {
  struct Case {
    std::string value;
    std::string written;
    bool cut;
  };
  std::string a4094(kUrlCap - 2, 'a');
  std::string a4095(kUrlCap - 1, 'a');
  std::string a4090(kUrlCap - 6, 'a');
  const Case cases[] = {
      {a4094 + "\xe2\x82\xac", a4094, true},  // a 3-byte character over the cap by one
      {a4094 + "\xc3\xbc", a4094 + "\xc3\xbc", false},
      {a4095 + "\\", a4095, true},                 // an escape over the cap by one
      {a4095 + "\xff", a4095, true},               // a non-UTF-8 byte over the cap by one
      {a4090 + "\x01", a4090 + "\\u0001", false},  // exactly the cap
      {a4090 + "\x01" + "b", a4090 + "\\u0001", true},
  };
  for (const Case& c : cases) {
    AuditRecord r = ordinary();
    r.url = c.value;
    std::string text = line(r);
    EXPECT_EQ(stringMember(text, "url"), c.written) << c.value.substr(kUrlCap - 8);
    EXPECT_EQ(truncatedMember(text).empty(), !c.cut);
  }
}

// The marker is outside every string: a sandbox that sends its text gets it escaped, and the
// record has no `truncated` member.
TEST(AuditRecordCaps, TheMarkerCannotBeForged) {
  AuditRecord r = ordinary();
  r.host = "x\",\"truncated\":{\"url\":1},\"y\":\"";
  r.url = "http://x/\",\"truncated\":{\"host\":2}}";
  std::string text = line(r);
  EXPECT_EQ(truncatedMember(text), "");
  EXPECT_EQ(stringMember(text, "host"), "x\\\",\\\"truncated\\\":{\\\"url\\\":1},\\\"y\\\":\\\"");
}

// `error`: null on an ordinary record, else sluice's own token (docs/audit.md#errors), after
// `upgrade` and before `denied_addrs`.
TEST(AuditRecordError, IsNullUnlessTheConnectionEndedAbnormally) {
  std::string text = line(ordinary());
  EXPECT_NE(text.find("\"upgrade\":null,\"error\":null,\"denied_addrs\":[],"), std::string::npos)
      << text;
  struct Row {
    Error error;
    std::string_view token;
  };
  const Row rows[] = {
      {Error::H2RapidReset, "h2_rapid_reset"},
      {Error::H2EmptyData, "h2_empty_data_flood"},
      {Error::H2ControlFlood, "h2_control_frame_flood"},
      {Error::H2SettingsFlood, "h2_settings_flood"},
      {Error::H2Continuation, "h2_continuation_flood"},
      {Error::H2CompressionError, "h2_compression_error"},
      {Error::H2ProtocolError, "h2_protocol_error"},
      {Error::ClientReset, "client_reset"},
      {Error::TlsUnknownCa, "tls_unknown_ca"},
      {Error::TlsBadCertificate, "tls_bad_certificate"},
      {Error::TlsFailed, "tls_failed"},
      {Error::ClientClosed, "client_closed"},
      {Error::TimedOut, "timeout"},
      {Error::SluiceClosed, "closed_by_sluice"},
  };
  for (const Row& row : rows) {
    AuditRecord r = ordinary();
    r.error = row.error;
    EXPECT_EQ(stringMember(line(r), "error"), std::string(row.token)) << row.token;
    EXPECT_LE(row.token.size(), toString(Error::H2ControlFlood).size()) << "the longest";
  }
}

// ---------------------------------------------------------------------------------------------
// The fields a user aggregates on (docs/audit.md#the-fields).

TEST(AuditRecordFields, ARequestRecordSaysItsKindAfterTheSandbox) {
  EXPECT_NE(line(ordinary()).find("\"sandbox\":\"sbx1\",\"kind\":\"http\",\"conn\":7,"),
            std::string::npos)
      << line(ordinary());
}

// A body sluice never read is null, and so is its digest; a body read, even an empty one, has
// both.
TEST(AuditRecordFields, ABodyNeverReadIsNullAndHasNoDigest) {
  AuditRecord r = ordinary();
  r.hashed = true;
  r.resp_bytes = 0;
  std::string text = line(r);
  EXPECT_NE(text.find("\"req_bytes\":null,\"resp_bytes\":0,\"req_sha256\":null,"),
            std::string::npos)
      << text;
  // SHA-256 of nothing is not what was hashed here (the digest is the caller's), but it is
  // present: 64 hex digits.
  ASSERT_TRUE(stringMember(text, "resp_sha256"));
  EXPECT_EQ(stringMember(text, "resp_sha256")->size(), 64u);

  r.hashed = false;
  r.req_bytes = 12;
  text = line(r);
  EXPECT_NE(text.find("\"req_bytes\":12,\"resp_bytes\":0,\"req_sha256\":null,"
                      "\"resp_sha256\":null,"),
            std::string::npos)
      << text;
}

TEST(AuditRecordFields, DeniedAddressesCarryTheirClassAndWhy) {
  AuditRecord r = ordinary();
  r.reason = policy::Reason::IpDenied;
  EXPECT_NE(line(r).find(",\"denied_addrs\":[],\"package\":null,\"duration_ms\":"),
            std::string::npos);
  DeniedAddress denied[] = {
      {*policy::IpAddress::parse("192.0.2.7"), policy::AddressRefusal::NotGlobal},
      {*policy::IpAddress::parse("::ffff:10.1.2.3"), policy::AddressRefusal::OutsideRuleIps},
      {*policy::IpAddress::parse("127.0.0.1"), policy::AddressRefusal::SluiceListener}};
  r.denied_addrs = denied;
  EXPECT_NE(line(r).find(",\"denied_addrs\":["
                         "{\"ip\":\"192.0.2.7\",\"class\":\"documentation\",\"refused\":"
                         "\"not_global\"},"
                         "{\"ip\":\"::ffff:10.1.2.3\",\"class\":\"mapped:private\","
                         "\"refused\":\"outside_rule_ips\"},"
                         "{\"ip\":\"127.0.0.1\",\"class\":\"loopback\",\"refused\":"
                         "\"sluice_listener\"}],\"package\":null,\"duration_ms\":"),
            std::string::npos)
      << line(r);
}

// Every field sluice writes itself at its longest: names from the config at their limit (a
// rule name of 64 quotes, each escaped), IPv6 endpoints, 20-digit numbers, both digests.
AuditRecord longestFixedPart(std::vector<policy::IpAddress>& addrs, std::size_t address_count) {
  AuditRecord r;
  // A timestamp is 24 characters whatever its value (system_clock cannot hold year 9999).
  r.ts = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764607425123));
  static const std::string sandbox(64, 'x');
  static const std::string rule(64, '"');
  r.sandbox = sandbox;
  r.conn = std::uint64_t{1} << 63;
  // The longest text IpAddress::format writes.
  policy::IpAddress longest;
  std::size_t longest_length = 0;
  for (std::string_view text : {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:255.255.255.255",
                                "1111:2222:3333:4444:5555:6666:7777:8888", "::255.255.255.255",
                                "64:ff9b::255.255.255.255"}) {
    policy::IpAddress ip = *policy::IpAddress::parse(text);
    char buf[policy::IpAddress::kMaxTextLength + 1];
    if (std::size_t n = ip.format(buf); n > longest_length) {
      longest_length = n;
      longest = ip;
    }
  }
  policy::Endpoint endpoint{longest, 65535};
  r.client = endpoint;
  r.mode = Mode::Transparent;
  r.orig_dst = endpoint;
  r.upstream = endpoint;
  addrs.assign(address_count, longest);
  r.addrs = addrs;
  r.decision = policy::Verdict::Report;
  r.rule = rule;
  r.reason = policy::Reason::PackageMetadataTooLarge;  // the longest token
  r.status = 503;
  r.req_bytes = std::uint64_t{1} << 63;
  r.resp_bytes = std::uint64_t{1} << 63;
  r.hashed = true;
  r.req_sha256.fill(0xab);
  r.resp_sha256.fill(0xcd);
  r.proto = Proto::Http1;  // "http/1.1" is longer than "h2"
  r.upstream_proto = Proto::Http1;
  r.websocket = true;
  r.error = Error::H2ControlFlood;  // the longest token
  // The longest package a record can name: each part at the longest it is checked to have.
  static const std::string name(214, 'n');
  static const std::string version(128, 'v');
  static const std::string advisory(128, 'A');
  PackageFacts& package = r.package.emplace();
  package.ecosystem = policy::Ecosystem::Pypi;
  package.kind = policy::PackageRequestKind::VersionMetadata;
  package.name = name;
  package.version = version;
  package.advisory = advisory;
  // Filtered metadata, with every listed version at its longest.
  r.package->removed = std::numeric_limits<std::int64_t>::max();
  r.package->removed_listed_count = kMaxRemovedListed;
  for (RemovedVersionFacts& removed : r.package->removed_listed) {
    removed = {version, policy::Reason::PackageMetadataTooLarge, advisory};
  }
  r.duration_ms = std::uint64_t{1} << 63;
  return r;
}

// Each refused address of an ip_denied, at its longest: the longest address text, the longest
// class (an IPv4 class carried in IPv6), the longest why.
TEST(AuditRecordBound, EachDeniedAddressIsBounded) {
  AuditRecord r = ordinary();
  std::string none = line(r);
  for (std::string_view text :
       {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:255.255.255.255", "::203.0.113.255",
        "64:ff9b::203.0.113.255", "2002:cb00:71ff::", "fe80::ffff:ffff:ffff:ffff"}) {
    DeniedAddress denied[] = {
        {*policy::IpAddress::parse(text), policy::AddressRefusal::OutsideRuleIps}};
    r.denied_addrs = denied;
    std::string one = line(r);
    EXPECT_LE(one.size() - none.size(), kPerDeniedAddressMax) << one;
  }
}

TEST(AuditRecordBound, TheFixedPartIsBounded) {
  std::vector<policy::IpAddress> addrs;
  std::string none = line(longestFixedPart(addrs, 0));
  EXPECT_LE(none.size(), kFixedMax) << none;
  std::string ten = line(longestFixedPart(addrs, 10));
  EXPECT_LE(ten.size() - none.size(), 10 * kPerAddressMax);
  std::printf("fixed part at its longest: %zu bytes; per address: %zu\n", none.size(),
              (ten.size() - none.size()) / 10);
}

// Whatever the sandbox sends, one record stays under kRecordMax (docs/audit.md: about 6 KiB), so
// the log grows by at most that much per request, however large the head.
TEST(AuditRecordBound, ARecordIsBoundedWhateverTheSandboxSends) {
  std::vector<policy::IpAddress> addrs;
  for (char worst : {'\x01', '\xff', '"'}) {
    AuditRecord r = longestFixedPart(addrs, 0);
    std::string huge(1 << 20, worst);
    for (const FieldCase& f : kFields) {
      set(r, f.field, huge);
    }
    std::string text = line(r);
    EXPECT_LE(text.size(), kRecordMax) << static_cast<int>(worst);
    EXPECT_EQ(truncatedMember(text),
              "{\"sni\":1048576,\"host\":1048576,\"method\":1048576,\"url\":1048576}");
    std::printf("worst record (byte 0x%02x): %zu bytes for %zu bytes received\n",
                static_cast<unsigned char>(worst), text.size(), 4 * huge.size());
  }
}

}  // namespace
}  // namespace sluice::proxy::audit
