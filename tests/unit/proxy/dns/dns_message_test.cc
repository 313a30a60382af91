// The sandbox resolver's wire format: parseQuery() against a table of well-formed and hostile
// queries, and buildResponse()/buildError() decoded back by a decoder written here from
// RFC 1035, independent of the code under test.
#include "proxy/dns/dns_message.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "policy/host_name.h"

namespace sluice::proxy::dns {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr std::uint16_t kTxt = 16;
constexpr std::uint16_t kNull = 10;
constexpr std::uint16_t kHttps = 65;
constexpr std::uint16_t kAny = 255;

void put16(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

// The wire form of a dotted name, each label as written (no checks: tests build bad ones).
Bytes wireName(std::string_view dotted) {
  Bytes out;
  while (!dotted.empty()) {
    const std::size_t dot = dotted.find('.');
    const std::string_view label = dotted.substr(0, dot);
    out.push_back(static_cast<std::uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    dotted = dot == std::string_view::npos ? std::string_view() : dotted.substr(dot + 1);
  }
  out.push_back(0);
  return out;
}

Bytes header(std::uint16_t id, std::uint8_t flags1, std::uint16_t qd, std::uint16_t an = 0,
             std::uint16_t ns = 0, std::uint16_t ar = 0) {
  Bytes b;
  put16(b, id);
  b.push_back(flags1);
  b.push_back(0);
  put16(b, qd);
  put16(b, an);
  put16(b, ns);
  put16(b, ar);
  return b;
}

Bytes opt(std::uint16_t udp_size = 4096, std::uint16_t rdlength = 0, Bytes rdata = {}) {
  Bytes b{0};
  put16(b, kDnsTypeOpt);
  put16(b, udp_size);
  put16(b, 0);
  put16(b, 0);
  put16(b, rdlength);
  b.insert(b.end(), rdata.begin(), rdata.end());
  return b;
}

struct QuerySpec {
  std::uint16_t id = 0x1234;
  std::uint8_t flags1 = 0x01;  // RD
  Bytes name = wireName("allowed.test");
  std::uint16_t qtype = kDnsTypeA;
  std::uint16_t qclass = kDnsClassIn;
  std::optional<Bytes> additional;  // an OPT record, usually
  std::uint16_t qd = 1, an = 0, ns = 0;
  std::optional<std::uint16_t> ar;  // default: 1 with `additional`, else 0
  Bytes trailing;
};

Bytes build(const QuerySpec& s) {
  const std::uint16_t ar = s.ar.value_or(s.additional ? 1 : 0);
  Bytes b = header(s.id, s.flags1, s.qd, s.an, s.ns, ar);
  b.insert(b.end(), s.name.begin(), s.name.end());
  put16(b, s.qtype);
  put16(b, s.qclass);
  if (s.additional) {
    b.insert(b.end(), s.additional->begin(), s.additional->end());
  }
  b.insert(b.end(), s.trailing.begin(), s.trailing.end());
  return b;
}

Bytes query(std::string_view name, std::uint16_t qtype, bool edns = false) {
  QuerySpec s;
  s.name = wireName(name);
  s.qtype = qtype;
  if (edns) {
    s.additional = opt();
  }
  return build(s);
}

ParseOutcome parse(const Bytes& message, Query* q) {
  return parseQuery(std::span<const std::uint8_t>(message.data(), message.size()), q);
}

// ---- A decoder for responses, from RFC 1035 ----------------------------------------------

struct Record {
  std::string name;
  std::uint16_t type = 0;
  std::uint16_t rclass = 0;
  std::uint32_t ttl = 0;
  Bytes rdata;
  std::size_t name_offset = 0;  // where its owner name starts in the message
};

struct Decoded {
  std::uint16_t id = 0;
  bool qr = false, aa = false, tc = false, rd = false, ra = false;
  std::uint8_t opcode = 0, rcode = 0;
  std::uint16_t qd = 0, an = 0, ns = 0, ar = 0;
  std::string qname;
  std::uint16_t qtype = 0, qclass = 0;
  Bytes question;  // raw bytes of the question section
  std::vector<Record> answers;
  std::vector<Record> additional;
};

class Decoder {
 public:
  explicit Decoder(const Bytes& m) : m_(m) {}

  std::optional<Decoded> decode() {
    Decoded d;
    if (m_.size() < 12) {
      return std::nullopt;
    }
    d.id = read16(0);
    d.qr = m_[2] & 0x80;
    d.opcode = static_cast<std::uint8_t>((m_[2] >> 3) & 0xf);
    d.aa = m_[2] & 0x04;
    d.tc = m_[2] & 0x02;
    d.rd = m_[2] & 0x01;
    d.ra = m_[3] & 0x80;
    d.rcode = m_[3] & 0xf;
    d.qd = read16(4);
    d.an = read16(6);
    d.ns = read16(8);
    d.ar = read16(10);
    at_ = 12;
    for (int i = 0; i < d.qd; ++i) {
      const std::size_t start = at_;
      auto name = readName();
      if (!name || at_ + 4 > m_.size()) {
        return std::nullopt;
      }
      d.qname = *name;
      d.qtype = read16(at_);
      d.qclass = read16(at_ + 2);
      at_ += 4;
      d.question.assign(m_.begin() + static_cast<std::ptrdiff_t>(start),
                        m_.begin() + static_cast<std::ptrdiff_t>(at_));
    }
    for (int i = 0; i < d.an + d.ns + d.ar; ++i) {
      auto r = readRecord();
      if (!r) {
        return std::nullopt;
      }
      if (i < d.an) {
        d.answers.push_back(*r);
      } else if (i >= d.an + d.ns) {
        d.additional.push_back(*r);
      }
    }
    if (at_ != m_.size()) {
      return std::nullopt;
    }
    return d;
  }

 private:
  std::uint16_t read16(std::size_t at) const {
    return static_cast<std::uint16_t>(m_[at] << 8 | m_[at + 1]);
  }

  // Follows pointers (backwards only, so it ends).
  std::optional<std::string> readName() {
    std::string out;
    std::size_t at = at_;
    bool jumped = false;
    for (int guard = 0; guard < 128; ++guard) {
      if (at >= m_.size()) {
        return std::nullopt;
      }
      const std::uint8_t len = m_[at];
      if (len == 0) {
        if (!jumped) {
          at_ = at + 1;
        }
        return out;
      }
      if ((len & 0xc0) == 0xc0) {
        if (at + 1 >= m_.size()) {
          return std::nullopt;
        }
        const std::size_t target = static_cast<std::size_t>((len & 0x3f) << 8 | m_[at + 1]);
        if (target >= at) {
          return std::nullopt;
        }
        if (!jumped) {
          at_ = at + 2;
        }
        jumped = true;
        at = target;
        continue;
      }
      if (len > 63 || at + 1 + len > m_.size()) {
        return std::nullopt;
      }
      if (!out.empty()) {
        out += '.';
      }
      out.append(reinterpret_cast<const char*>(&m_[at + 1]), len);
      at += 1 + len;
    }
    return std::nullopt;
  }

  std::optional<Record> readRecord() {
    Record r;
    r.name_offset = at_;
    auto name = readName();
    if (!name || at_ + 10 > m_.size()) {
      return std::nullopt;
    }
    r.name = *name;
    r.type = read16(at_);
    r.rclass = read16(at_ + 2);
    r.ttl = static_cast<std::uint32_t>(read16(at_ + 4)) << 16 | read16(at_ + 6);
    const std::size_t length = read16(at_ + 8);
    at_ += 10;
    if (at_ + length > m_.size()) {
      return std::nullopt;
    }
    r.rdata.assign(m_.begin() + static_cast<std::ptrdiff_t>(at_),
                   m_.begin() + static_cast<std::ptrdiff_t>(at_ + length));
    at_ += length;
    return r;
  }

  const Bytes& m_;
  std::size_t at_ = 0;
};

Decoded decodeOrFail(const Bytes& m) {
  auto d = Decoder(m).decode();
  EXPECT_TRUE(d) << "response does not decode";
  return d.value_or(Decoded{});
}

policy::IpAddress ip(std::string_view text) {
  auto parsed = policy::IpAddress::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(policy::IpAddress());
}

// ---- parseQuery: the table -----------------------------------------------------------------

struct ParseCase {
  std::string label;
  Bytes message;
  ParseOutcome outcome;
  std::string name = {};  // checked for Query outcomes
  std::uint16_t qtype = 0;
  bool edns = false;
};

std::string repeat(char c, std::size_t n) { return std::string(n, c); }

std::vector<ParseCase> parseCases() {
  std::vector<ParseCase> cases;
  for (bool edns : {false, true}) {
    const std::string suffix = edns ? " with EDNS" : "";
    for (auto [type, type_name] :
         std::vector<std::pair<std::uint16_t, std::string>>{{kDnsTypeA, "A"},
                                                            {kDnsTypeAaaa, "AAAA"},
                                                            {kTxt, "TXT"},
                                                            {kHttps, "HTTPS"},
                                                            {kAny, "ANY"},
                                                            {kNull, "NULL"}}) {
      cases.push_back({type_name + suffix, query("allowed.test", type, edns), ParseOutcome::Query,
                       "allowed.test", type, edns});
    }
  }
  cases.push_back({"mixed case kept as sent", query("AlLoWeD.TeSt", kDnsTypeA), ParseOutcome::Query,
                   "AlLoWeD.TeSt", kDnsTypeA});
  cases.push_back({"exfiltration label", query("c2VjcmV0.attacker.test", kTxt), ParseOutcome::Query,
                   "c2VjcmV0.attacker.test", kTxt});
  cases.push_back({"63-byte label", query(repeat('a', 63) + ".test", kDnsTypeA),
                   ParseOutcome::Query, repeat('a', 63) + ".test", kDnsTypeA});
  cases.push_back(
      {"64-byte label", query(repeat('a', 64) + ".test", kDnsTypeA), ParseOutcome::FormErr});
  // 63+1 bytes * 3 + 61+1 + root = 255 wire bytes: the longest name.
  const std::string longest =
      repeat('a', 63) + "." + repeat('b', 63) + "." + repeat('c', 63) + "." + repeat('d', 61);
  cases.push_back(
      {"255-byte name", query(longest, kDnsTypeA), ParseOutcome::Query, longest, kDnsTypeA});
  cases.push_back({"256-byte name", query(longest + "d", kDnsTypeA), ParseOutcome::FormErr});
  cases.push_back({"root name", query("", kDnsTypeA), ParseOutcome::Query, "", kDnsTypeA});
  cases.push_back({"underscore passes", query("_dmarc.allowed.test", kTxt), ParseOutcome::Query,
                   "_dmarc.allowed.test", kTxt});

  QuerySpec s;
  s.name = Bytes{0xc0, 0x0c};
  cases.push_back({"compression pointer as QNAME", build(s), ParseOutcome::FormErr});
  s.name = Bytes{1, 'a', 0xc0, 0x0c};
  cases.push_back({"compression pointer after a label", build(s), ParseOutcome::FormErr});
  s.name = Bytes{0x41, 'a', 0};
  cases.push_back({"extended label type 0x40", build(s), ParseOutcome::FormErr});
  s.name = Bytes{0x80, 'a', 0};
  cases.push_back({"label type 0x80", build(s), ParseOutcome::FormErr});

  s = QuerySpec{};
  s.qd = 0;
  cases.push_back({"QDCOUNT 0", build(s), ParseOutcome::FormErr});
  s.qd = 2;
  cases.push_back({"QDCOUNT 2", build(s), ParseOutcome::FormErr});
  s = QuerySpec{};
  s.an = 1;
  cases.push_back({"ANCOUNT 1", build(s), ParseOutcome::FormErr});
  s = QuerySpec{};
  s.ns = 1;
  cases.push_back({"NSCOUNT 1", build(s), ParseOutcome::FormErr});
  s = QuerySpec{};
  s.additional = opt();
  s.ar = 2;
  cases.push_back({"ARCOUNT 2", build(s), ParseOutcome::FormErr});
  s = QuerySpec{};
  s.ar = 1;
  cases.push_back({"ARCOUNT 1 and nothing there", build(s), ParseOutcome::FormErr});

  s = QuerySpec{};
  s.flags1 = 0x81;
  cases.push_back({"a response (QR=1)", build(s), ParseOutcome::Drop});
  s.flags1 = 0x80 | (2 << 3);
  cases.push_back({"a response with opcode 2", build(s), ParseOutcome::Drop});
  s.flags1 = 2 << 3;
  cases.push_back({"opcode 2 (STATUS)", build(s), ParseOutcome::NotImp});
  s.flags1 = 4 << 3;
  cases.push_back({"opcode 4 (NOTIFY)", build(s), ParseOutcome::NotImp});
  s.flags1 = 5 << 3;
  cases.push_back({"opcode 5 (UPDATE)", build(s), ParseOutcome::NotImp});
  s.flags1 = 1 << 3;
  s.qd = 7;
  cases.push_back({"opcode 1 (IQUERY) with odd counts", build(s), ParseOutcome::NotImp});

  s = QuerySpec{};
  s.trailing = Bytes{0};
  cases.push_back({"one trailing byte", build(s), ParseOutcome::FormErr});
  s.trailing = Bytes(100, 0xab);
  cases.push_back({"trailing garbage", build(s), ParseOutcome::FormErr});
  s.additional = opt();
  s.trailing = Bytes{0};
  cases.push_back({"a byte after the OPT", build(s), ParseOutcome::FormErr});

  s = QuerySpec{};
  s.additional = opt(4096, 1);
  cases.push_back({"OPT rdlength past the end", build(s), ParseOutcome::FormErr});
  s.additional = opt(4096, 0xffff, Bytes(10, 0));
  cases.push_back({"OPT rdlength 65535", build(s), ParseOutcome::FormErr});
  s.additional = opt(4096, 4, Bytes{0, 10, 0, 0});  // a COOKIE-like option, length 0
  cases.push_back(
      {"OPT with an option", build(s), ParseOutcome::Query, "allowed.test", kDnsTypeA, true});
  Bytes not_root{1, 'x', 0};
  Bytes tail = opt();
  not_root.insert(not_root.end(), tail.begin() + 1, tail.end());
  s.additional = not_root;
  cases.push_back({"OPT owner not root", build(s), ParseOutcome::FormErr});
  Bytes a_record = opt();
  a_record[2] = kDnsTypeA;
  s.additional = a_record;
  cases.push_back({"additional record not OPT", build(s), ParseOutcome::FormErr});
  const Bytes whole = opt();
  s.additional = Bytes(whole.begin(), whole.begin() + 10);
  cases.push_back({"OPT cut short", build(s), ParseOutcome::FormErr});
  return cases;
}

TEST(DnsMessageParse, Table) {
  for (const ParseCase& c : parseCases()) {
    SCOPED_TRACE(c.label);
    Query q;
    ASSERT_EQ(parse(c.message, &q), c.outcome);
    if (c.outcome != ParseOutcome::Query) {
      continue;
    }
    EXPECT_EQ(q.id, 0x1234);
    EXPECT_TRUE(q.recursion_desired);
    EXPECT_EQ(q.opcode, 0);
    EXPECT_EQ(q.name(), c.name);
    EXPECT_EQ(q.qtype, c.qtype);
    EXPECT_EQ(q.qclass, kDnsClassIn);
    EXPECT_EQ(q.edns, c.edns);
    EXPECT_EQ(q.question_end, 12 + (c.name.empty() ? 1 : c.name.size() + 2) + 4);
  }
}

TEST(DnsMessageParse, EveryLengthUnderAHeaderIsDropped) {
  const Bytes full = query("allowed.test", kDnsTypeA);
  for (std::size_t n = 0; n < kDnsHeaderBytes; ++n) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    Query q;
    EXPECT_EQ(parse(cut, &q), ParseOutcome::Drop) << n;
  }
}

TEST(DnsMessageParse, EveryTruncatedQuestionIsFormErr) {
  for (bool edns : {false, true}) {
    const Bytes full = query("allowed.test", kDnsTypeAaaa, edns);
    for (std::size_t n = kDnsHeaderBytes; n < full.size(); ++n) {
      // An exact-size heap copy: ASan flags any read past it.
      Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
      cut.shrink_to_fit();
      Query q;
      EXPECT_EQ(parse(cut, &q), ParseOutcome::FormErr) << n << (edns ? " edns" : "");
    }
  }
}

TEST(DnsMessageParse, HeaderFieldsReportedForNotImpAndFormErr) {
  QuerySpec s;
  s.id = 0xbeef;
  s.flags1 = (5 << 3) | 1;
  Query q;
  ASSERT_EQ(parse(build(s), &q), ParseOutcome::NotImp);
  EXPECT_EQ(q.id, 0xbeef);
  EXPECT_EQ(q.opcode, 5);
  EXPECT_TRUE(q.recursion_desired);
  s.flags1 = 0;
  s.qd = 0;
  ASSERT_EQ(parse(build(s), &q), ParseOutcome::FormErr);
  EXPECT_EQ(q.id, 0xbeef);
  EXPECT_FALSE(q.recursion_desired);
}

TEST(DnsMessageParse, OtherClassIsStillAQuery) {
  QuerySpec s;
  s.name = wireName("version.bind");
  s.qtype = kTxt;
  s.qclass = 3;  // CHAOS: the caller refuses it
  Query q;
  ASSERT_EQ(parse(build(s), &q), ParseOutcome::Query);
  EXPECT_EQ(q.qclass, 3);
  EXPECT_EQ(q.name(), "version.bind");
}

TEST(DnsMessageParse, EdnsUdpSizeAndLimit) {
  struct Case {
    std::uint16_t size;
    std::size_t limit;
  };
  for (Case c : {Case{0, 512}, Case{100, 512}, Case{512, 512}, Case{1232, 1232}, Case{1400, 1232},
                 Case{65535, 1232}}) {
    QuerySpec s;
    s.additional = opt(c.size);
    Query q;
    ASSERT_EQ(parse(build(s), &q), ParseOutcome::Query);
    EXPECT_TRUE(q.edns);
    EXPECT_EQ(q.edns_udp_size, c.size);
    EXPECT_EQ(q.udpLimit(), c.limit) << c.size;
  }
  Query q;
  ASSERT_EQ(parse(query("allowed.test", kDnsTypeA), &q), ParseOutcome::Query);
  EXPECT_EQ(q.udpLimit(), 512u);
}

// Labels with bytes outside [A-Za-z0-9-_] come out escaped, never as text a canonicaliser
// could read as a different, valid name.
TEST(DnsMessageParse, OddLabelBytesAreEscapedAndRefusedByTheCanonicaliser) {
  struct Case {
    Bytes name;
    std::string text;
  };
  const std::vector<Case> cases = {
      {Bytes{7, 'a', '.', 'l', 'l', 'o', 'w', 'e', 4, 't', 'e', 's', 't', 0},
       "a\\046llowe.test"},  // a label with a dot is not two labels
      {Bytes{3, 'a', 0, 'b', 4, 't', 'e', 's', 't', 0}, "a\\000b.test"},
      {Bytes{2, 0xc3, 0xa9, 4, 't', 'e', 's', 't', 0}, "\\195\\169.test"},
      {Bytes{3, 'a', ' ', 'b', 0}, "a\\032b"},
      {Bytes{3, 'a', '\\', 'b', 0}, "a\\092b"},
      {Bytes{1, '*', 4, 't', 'e', 's', 't', 0}, "\\042.test"},
  };
  for (const Case& c : cases) {
    QuerySpec s;
    s.name = c.name;
    Query q;
    ASSERT_EQ(parse(build(s), &q), ParseOutcome::Query) << c.text;
    EXPECT_EQ(q.name(), c.text);
    EXPECT_FALSE(policy::canonicalizeHost(q.name()).ok()) << c.text;
  }
}

TEST(DnsMessageParse, LongEscapedNameIsCutButKeepsItsBackslash) {
  // Four labels of dots: 1020 characters escaped, cut to 255.
  Bytes name;
  for (int i = 0; i < 3; ++i) {
    name.push_back(63);
    name.insert(name.end(), 63, '.');
  }
  name.push_back(61);
  name.insert(name.end(), 61, '.');
  name.push_back(0);
  QuerySpec s;
  s.name = name;
  Query q;
  ASSERT_EQ(parse(build(s), &q), ParseOutcome::Query);
  EXPECT_EQ(q.name().size(), 255u);
  EXPECT_EQ(q.name().substr(0, 8), "\\046\\046");
  EXPECT_FALSE(policy::canonicalizeHost(q.name()).ok());

  // Plain text up to the last label, whose only byte is odd: the backslash still fits.
  const std::string plain = repeat('a', 63) + "." + repeat('b', 63) + "." + repeat('c', 63);
  Bytes mixed = wireName(plain);
  mixed.pop_back();
  mixed.insert(mixed.end(), {1, '.', 0});
  s.name = mixed;
  ASSERT_EQ(parse(build(s), &q), ParseOutcome::Query);
  EXPECT_EQ(q.name(), plain + ".\\046");
}

// ---- buildResponse -------------------------------------------------------------------------

struct Built {
  Bytes query;
  Query parsed;
  Bytes response;
};

Built respond(const Bytes& message, Rcode rcode, const std::vector<policy::IpAddress>& addresses,
              std::uint32_t ttl = 60) {
  Built b;
  b.query = message;
  EXPECT_EQ(parse(b.query, &b.parsed), ParseOutcome::Query);
  buildResponse(b.response, b.query, b.parsed, rcode, addresses, ttl);
  EXPECT_EQ(b.response.size(), responseSize(b.parsed, addresses));
  return b;
}

Bytes questionOf(const Bytes& message, const Query& q) {
  return Bytes(message.begin() + 12, message.begin() + static_cast<std::ptrdiff_t>(q.question_end));
}

TEST(DnsMessageResponse, AddressesDecodeBack) {
  QuerySpec s;
  s.id = 0xa1b2;
  s.name = wireName("AlLoWeD.TeSt");
  const Built b = respond(build(s), Rcode::NoError, {ip("10.200.0.1"), ip("10.200.0.2")}, 300);
  const Decoded d = decodeOrFail(b.response);
  EXPECT_EQ(d.id, 0xa1b2);
  EXPECT_TRUE(d.qr);
  EXPECT_EQ(d.opcode, 0);
  EXPECT_TRUE(d.aa);
  EXPECT_FALSE(d.tc);
  EXPECT_TRUE(d.rd);
  EXPECT_FALSE(d.ra);
  EXPECT_EQ(d.rcode, 0);
  EXPECT_EQ(d.qd, 1);
  EXPECT_EQ(d.an, 2);
  EXPECT_EQ(d.ns, 0);
  EXPECT_EQ(d.ar, 0);
  EXPECT_EQ(d.question, questionOf(b.query, b.parsed));  // case kept, for DNS 0x20 clients
  EXPECT_EQ(d.qname, "AlLoWeD.TeSt");
  ASSERT_EQ(d.answers.size(), 2u);
  for (const Record& r : d.answers) {
    EXPECT_EQ(r.name, "AlLoWeD.TeSt");
    EXPECT_EQ(b.response[r.name_offset], 0xc0);    // a pointer...
    EXPECT_EQ(b.response[r.name_offset + 1], 12);  // ...to the question's name
    EXPECT_EQ(r.type, kDnsTypeA);
    EXPECT_EQ(r.rclass, kDnsClassIn);
    EXPECT_EQ(r.ttl, 300u);
  }
  EXPECT_EQ(d.answers[0].rdata, (Bytes{10, 200, 0, 1}));
  EXPECT_EQ(d.answers[1].rdata, (Bytes{10, 200, 0, 2}));
}

TEST(DnsMessageResponse, AaaaRecordAndEdns) {
  const Built b = respond(query("allowed.test", kDnsTypeAaaa, true), Rcode::NoError,
                          {ip("fd00::1")}, 0xfffffffe);
  const Decoded d = decodeOrFail(b.response);
  ASSERT_EQ(d.answers.size(), 1u);
  EXPECT_EQ(d.answers[0].type, kDnsTypeAaaa);
  EXPECT_EQ(d.answers[0].ttl, 0xfffffffeu);
  EXPECT_EQ(d.answers[0].rdata, (Bytes{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  ASSERT_EQ(d.ar, 1);
  ASSERT_EQ(d.additional.size(), 1u);
  const Record& o = d.additional[0];
  EXPECT_EQ(o.name, "");
  EXPECT_EQ(o.type, kDnsTypeOpt);
  EXPECT_EQ(o.rclass, kEdnsUdpPayload);
  EXPECT_EQ(o.ttl, 0u);
  EXPECT_TRUE(o.rdata.empty());
}

TEST(DnsMessageResponse, NxDomainAndNoDataHaveNoRecords) {
  for (Rcode rcode : {Rcode::NxDomain, Rcode::NoError, Rcode::Refused}) {
    const Built b = respond(query("c2VjcmV0.attacker.test", kTxt), rcode, {});
    const Decoded d = decodeOrFail(b.response);
    EXPECT_EQ(d.rcode, static_cast<int>(rcode));
    EXPECT_EQ(d.an + d.ns + d.ar, 0);
    EXPECT_EQ(d.qname, "c2VjcmV0.attacker.test");
    EXPECT_EQ(d.qtype, kTxt);
    EXPECT_TRUE(d.aa);
  }
}

TEST(DnsMessageResponse, RecursionDesiredIsCopiedNeverAvailable) {
  QuerySpec s;
  s.flags1 = 0;
  const Built b = respond(build(s), Rcode::NoError, {});
  const Decoded d = decodeOrFail(b.response);
  EXPECT_FALSE(d.rd);
  EXPECT_FALSE(d.ra);
}

TEST(DnsMessageResponse, RootNameAndMixedFamilies) {
  const Built b = respond(query("", kDnsTypeA), Rcode::NoError, {ip("1.2.3.4"), ip("::1")});
  const Decoded d = decodeOrFail(b.response);
  EXPECT_EQ(d.qname, "");
  ASSERT_EQ(d.answers.size(), 2u);
  EXPECT_EQ(d.answers[0].type, kDnsTypeA);
  EXPECT_EQ(d.answers[1].type, kDnsTypeAaaa);
  EXPECT_EQ(d.answers[0].name, "");
}

TEST(DnsMessageResponse, AppendsWithoutTouchingWhatIsThere) {
  const Bytes message = query("allowed.test", kDnsTypeA);
  Query q;
  ASSERT_EQ(parse(message, &q), ParseOutcome::Query);
  Bytes out{0xaa, 0xbb};
  const std::vector<policy::IpAddress> addresses{ip("10.200.0.1")};
  buildResponse(out, message, q, Rcode::NoError, addresses, 5);
  ASSERT_EQ(out.size(), 2 + responseSize(q, addresses));
  EXPECT_EQ(out[0], 0xaa);
  EXPECT_EQ(out[1], 0xbb);
  EXPECT_TRUE(Decoder(Bytes(out.begin() + 2, out.end())).decode());
}

TEST(DnsMessageResponse, TwoAddressesAlwaysFitUdp) {
  const std::string longest =
      repeat('a', 63) + "." + repeat('b', 63) + "." + repeat('c', 63) + "." + repeat('d', 61);
  const Built b =
      respond(query(longest, kDnsTypeAaaa, true), Rcode::NoError, {ip("fd00::1"), ip("fd00::2")});
  EXPECT_LE(b.response.size(), kDnsMaxUdpBytes);
}

// ---- buildError ----------------------------------------------------------------------------

TEST(DnsMessageError, FormErrEchoesIdAndAReadableQuestion) {
  QuerySpec s;
  s.id = 0x0102;
  s.an = 1;  // FormErr, but the question itself is fine
  const Bytes message = build(s);
  Query q;
  ASSERT_EQ(parse(message, &q), ParseOutcome::FormErr);
  Bytes out;
  buildError(out, message, Rcode::FormErr);
  const Decoded d = decodeOrFail(out);
  EXPECT_EQ(d.id, 0x0102);
  EXPECT_TRUE(d.qr);
  EXPECT_FALSE(d.aa);
  EXPECT_TRUE(d.rd);
  EXPECT_EQ(d.rcode, 1);
  EXPECT_EQ(d.qd, 1);
  EXPECT_EQ(d.qname, "allowed.test");
  EXPECT_EQ(d.an + d.ns + d.ar, 0);
}

TEST(DnsMessageError, NoQuestionWhenItCannotBeRead) {
  std::vector<QuerySpec> specs(4);
  specs[0].qd = 2;
  specs[1].qd = 0;
  specs[2].name = Bytes{0xc0, 0x0c};
  specs[3].name = Bytes{64, 'a', 0};
  for (const QuerySpec& s : specs) {
    Bytes out;
    buildError(out, build(s), Rcode::FormErr);
    const Decoded d = decodeOrFail(out);
    EXPECT_EQ(d.id, 0x1234);
    EXPECT_EQ(d.qd, 0);
    EXPECT_EQ(out.size(), kDnsHeaderBytes);
  }
  // Truncated inside the question.
  const Bytes full = query("allowed.test", kDnsTypeA);
  Bytes out;
  buildError(out, Bytes(full.begin(), full.end() - 3), Rcode::FormErr);
  EXPECT_EQ(decodeOrFail(out).qd, 0);
}

TEST(DnsMessageError, NotImpCopiesTheOpcode) {
  QuerySpec s;
  s.flags1 = 2 << 3;
  const Bytes message = build(s);
  Bytes out;
  buildError(out, message, Rcode::NotImp);
  const Decoded d = decodeOrFail(out);
  EXPECT_EQ(d.opcode, 2);
  EXPECT_EQ(d.rcode, 4);
  EXPECT_FALSE(d.rd);
  EXPECT_EQ(d.qd, 1);
}

TEST(DnsMessageError, ShorterThanAHeaderAppendsNothing) {
  Bytes out{1, 2, 3};
  buildError(out, Bytes{0x12, 0x34, 0, 0}, Rcode::FormErr);
  EXPECT_EQ(out, (Bytes{1, 2, 3}));
}

}  // namespace
}  // namespace sluice::proxy::dns
