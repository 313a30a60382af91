// The ClientHello reader on the fields sluice reads (the server name, ALPN, versions, ECH) and
// on hand-built hostile bodies: every truncation and every length off by one is malformed.
#include "proxy/tls/client_hello.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "tests/unit/proxy/tls/client_hello_test_support.h"

namespace sluice::proxy::tls {
namespace {

using namespace client_hello_test;

// ---------------------------------------------------------------------------------------------
// The server name.

TEST(ClientHello, SniBytesArePassedThroughRaw) {
  const std::string nul("allowed.test\0.evil.test", 23);
  const std::string longest(255, 'a');
  for (const std::string& name : {nul, std::string("ALLOWED.TEST."), std::string("127.0.0.1"),
                                  std::string("a b"), std::string("\xff\x01"), longest}) {
    SCOPED_TRACE(testing::PrintToString(name));
    const HelloResult r = parse(wire(HelloSpec{}.set(serverNameExt(name))));
    ASSERT_EQ(r.status, HelloStatus::Done);
    EXPECT_EQ(r.info.sni_state, SniState::Present);
    EXPECT_EQ(r.info.sni(), name);
  }
  // The NUL case is then refused by canonicalisation, not silently truncated: a row of
  // tests/unit/policy/host_name_test.cc.
}

TEST(ClientHello, ServerNameThatNamesNoSingleHostIsSniMalformed) {
  using Names = std::vector<std::pair<std::uint8_t, std::string>>;
  const struct {
    const char* name;
    Names names;
  } cases[] = {
      {"two host_names", {{0, "allowed.test"}, {0, "evil.test"}}},
      {"the same host_name twice", {{0, "allowed.test"}, {0, "allowed.test"}}},
      {"another name type", {{1, "allowed.test"}}},
      {"host_name then another type", {{0, "allowed.test"}, {7, "x"}}},
      {"another type then host_name", {{7, "x"}, {0, "allowed.test"}}},
      {"empty list", {}},
      {"empty host_name", {{0, ""}}},
      {"256 bytes", {{0, std::string(256, 'a')}}},
      {"oversized then a good one", {{0, std::string(300, 'a')}, {0, "allowed.test"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const HelloResult r = parse(wire(HelloSpec{}.set(serverNameExt(c.names))));
    ASSERT_EQ(r.status, HelloStatus::Done);
    EXPECT_EQ(r.info.sni_state, SniState::Malformed);
    EXPECT_EQ(r.info.sni(), "");
  }
  // Without the extension there is no name, and nothing malformed.
  const HelloResult r = parse(wire(HelloSpec{}.remove(0)));
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_EQ(r.info.sni_state, SniState::Absent);
}

TEST(ClientHello, RefusesRepeatedExtensions) {
  // OpenSSL: illegal_parameter. Reading either copy would be a parser differential.
  EXPECT_EQ(parse(wire(HelloSpec{}.add(serverNameExt("evil.test")))).status,
            HelloStatus::Malformed);
  EXPECT_EQ(parse(wire(HelloSpec{}.add(serverNameExt("allowed.test")))).status,
            HelloStatus::Malformed);
  EXPECT_EQ(parse(wire(HelloSpec{}.add(alpnExt({"h2"})))).status, HelloStatus::Malformed);
  EXPECT_EQ(parse(wire(HelloSpec{}.add({0x1234, {}, {}}).add({0x1234, {}, {}}))).status,
            HelloStatus::Malformed);
}

// ---------------------------------------------------------------------------------------------
// ALPN, versions, ECH.

TEST(ClientHello, ReportsAlpnOffers) {
  const struct {
    std::vector<std::string> protocols;
    bool http11;
    bool h2;
  } cases[] = {
      {{"http/1.1"}, true, false},
      {{"h2"}, false, true},
      {{"h2", "http/1.1"}, true, true},
      {{"http/1.0", "h2c", "h3"}, false, false},
      {{"HTTP/1.1", "H2"}, false, false},
      {{"http/1.1x", "xh2"}, false, false},
      {{std::string(255, 'p')}, false, false},
  };
  for (const auto& c : cases) {
    const HelloResult r = parse(wire(HelloSpec{}.set(alpnExt(c.protocols))));
    ASSERT_EQ(r.status, HelloStatus::Done);
    EXPECT_TRUE(r.info.offers_alpn);
    EXPECT_EQ(r.info.offers_http11, c.http11);
    EXPECT_EQ(r.info.offers_h2, c.h2);
  }
  const HelloResult r = parse(wire(HelloSpec{}.remove(16)));
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_FALSE(r.info.offers_alpn || r.info.offers_http11 || r.info.offers_h2);
}

TEST(ClientHello, RefusesMalformedAlpnAndSupportedVersions) {
  const std::vector<Ext> cases = {
      alpnExt({}),                       // empty list
      alpnExt({"h2", ""}),               // empty protocol name
      {16, {}, {}},                      // no list at all
      {16, {0, 4, 2, 'h', '2'}, {}},     // list runs past the extension
      {16, {0, 3, 2, 'h', '2', 0}, {}},  // trailing byte after the list
      versionsExt({}),                   // empty list
      {43, {3, 3, 4, 3}, {}},            // odd length
      {43, {4, 3, 4}, {}},               // list runs past the extension
      {43, {2, 3, 4, 0}, {}},            // trailing byte
      {43, {}, {}},                      // nothing at all
  };
  for (const Ext& e : cases) {
    SCOPED_TRACE(testing::PrintToString(e.body));
    EXPECT_EQ(parse(wire(HelloSpec{}.set(e))).status, HelloStatus::Malformed);
  }
}

TEST(ClientHello, ReportsVersionsOffered) {
  HelloResult r = parse(wire(HelloSpec{}.set(versionsExt({0x0a0a, 0x0304, 0x0303}))));
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_TRUE(r.info.offers_tls13);
  r = parse(wire(HelloSpec{}.set(versionsExt({0x0303, 0x0302}))));
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_FALSE(r.info.offers_tls13);
  HelloSpec old;
  old.version = 0x0301;
  r = parse(wire(old.remove(43)));
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_FALSE(r.info.offers_tls13);
  EXPECT_EQ(r.info.legacy_version, 0x0301);
}

TEST(ClientHello, FlagsEchAndEsni) {
  for (int type : {0xfe0d, 0xfe0a, 0xffce}) {
    const HelloResult r =
        parse(wire(HelloSpec{}.add({static_cast<std::uint16_t>(type), Bytes(40, 7), {}})));
    ASSERT_EQ(r.status, HelloStatus::Done);
    EXPECT_TRUE(r.info.has_ech);
    EXPECT_EQ(r.info.sni(), "allowed.test");  // the outer name: the caller decides (L5)
  }
  EXPECT_FALSE(parse(wire(HelloSpec{}.add({0xfe0e, {}, {}}))).info.has_ech);
}

// ---------------------------------------------------------------------------------------------
// The body's structure.

TEST(ClientHello, RefusesMalformedBodies) {
  std::vector<std::pair<const char*, HelloSpec>> cases;
  auto add = [&cases](const char* name, auto change) {
    HelloSpec s;
    change(s);
    cases.emplace_back(name, std::move(s));
  };
  add("session id of 33", [](HelloSpec& s) { s.session_id = Bytes(33, 1); });
  add("no cipher suites", [](HelloSpec& s) { s.cipher_suites.clear(); });
  add("odd cipher suites", [](HelloSpec& s) { s.cipher_suites.push_back(0); });
  add("no compression methods", [](HelloSpec& s) { s.compressions.clear(); });
  add("no null compression", [](HelloSpec& s) { s.compressions = {1}; });
  add("garbage after the extensions", [](HelloSpec& s) { s.trailing = {0}; });
  add("garbage without extensions", [](HelloSpec& s) {
    s.has_extensions = false;
    s.trailing = {0};
  });
  add("pre_shared_key not last", [](HelloSpec& s) {
    s.extensions.insert(s.extensions.begin(), {41, Bytes(8, 0), {}});
  });
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(parse(wire(spec)).status, HelloStatus::Malformed);
  }
  EXPECT_EQ(parse(records(Bytes{1, 0, 0, 0})).status, HelloStatus::Malformed);
}

TEST(ClientHello, AcceptsWhatTls12SyntaxAllows) {
  HelloSpec s;
  s.has_extensions = false;  // no extensions block at all
  HelloResult r = parse(wire(s));
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_EQ(r.info.sni_state, SniState::Absent);
  s.has_extensions = true;  // an empty one
  s.extensions.clear();
  EXPECT_EQ(parse(wire(s)).status, HelloStatus::Done);
  s.session_id.clear();
  s.compressions = {1, 0};
  s.extensions = {{41, Bytes(8, 0), {}}};  // pre_shared_key last
  EXPECT_EQ(parse(wire(s)).status, HelloStatus::Done);
}

TEST(ClientHello, EveryTruncationOfTheMessageIsMalformed) {
  const Built full = build(HelloSpec{}.add({0x5a5a, {1, 2, 3}, {}}));
  // The message cut after its compression methods is a complete TLS 1.2-syntax hello.
  const std::size_t no_extensions = 4 + 2 + 32 + 1 + 32 + 2 + 8 + 1 + 1;
  for (std::size_t cut = 4; cut < full.message.size(); ++cut) {
    SCOPED_TRACE(cut);
    Bytes m(full.message.begin(), full.message.begin() + static_cast<std::ptrdiff_t>(cut));
    const std::size_t body = cut - 4;
    m[1] = static_cast<std::uint8_t>(body >> 16);
    m[2] = static_cast<std::uint8_t>(body >> 8);
    m[3] = static_cast<std::uint8_t>(body);
    const Bytes w = records(m);
    EXPECT_EQ(parse(w).status, cut == no_extensions ? HelloStatus::Done : HelloStatus::Malformed);
  }
}

TEST(ClientHello, EveryLengthFieldOffByOneIsMalformed) {
  const Built full = build(HelloSpec{}.add({0x5a5a, {1, 2, 3}, {}}));
  ASSERT_EQ(full.lengths.size(), 14u);
  for (const LengthField& f : full.lengths) {
    std::size_t value = 0;
    for (std::size_t i = 0; i < f.width; ++i) {
      value = value << 8 | full.message[f.offset + i];
    }
    const std::size_t max = (std::size_t{1} << (8 * f.width)) - 1;
    for (std::size_t changed : {value + 1, value - 1, max, std::size_t{0}}) {
      if (changed > max || changed == value) {
        continue;
      }
      SCOPED_TRACE(testing::Message()
                   << "field at " << f.offset << " from " << value << " to " << changed);
      Bytes m = full.message;
      for (std::size_t i = 0; i < f.width; ++i) {
        m[f.offset + i] = static_cast<std::uint8_t>(changed >> (8 * (f.width - 1 - i)));
      }
      const HelloResult r = parse(records(m));
      // Zero is a legal length for a few fields; it may then leave the name unusable, but it
      // never yields a different name.
      if (changed == 0 && r.status == HelloStatus::Done) {
        EXPECT_NE(r.info.sni_state, SniState::Present) << r.info.sni();
        continue;
      }
      EXPECT_EQ(r.status, HelloStatus::Malformed);
    }
  }
}

TEST(ClientHello, VerdictNeverChangesOnceFinal) {
  std::vector<Bytes> inputs = {genuine13(), wire(HelloSpec{}.add(serverNameExt("x"))),
                               records(payloadOf(genuine13()), 3), bytesOf("GET / HTTP/1.1\r\n")};
  std::mt19937 rng(11);
  for (int i = 0; i < 30; ++i) {
    Bytes w = records(payloadOf(genuine13()), 1 + rng() % 60);
    w[rng() % w.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    inputs.push_back(std::move(w));
  }
  for (const Bytes& w : inputs) {
    std::optional<HelloResult> final_result;
    for (std::size_t k = 0; k <= w.size(); ++k) {
      const HelloResult r = parse(w, k);
      if (final_result) {
        ASSERT_EQ(r.status, final_result->status) << k;
        EXPECT_EQ(r.info.sni(), final_result->info.sni());
        EXPECT_EQ(r.info.consumed, final_result->info.consumed);
      } else if (r.status != HelloStatus::NeedMore) {
        final_result = r;
        EXPECT_LE(r.info.consumed, k);
      }
    }
  }
}

TEST(ClientHello, AlertRecordIsAFatalAlert) {
  EXPECT_EQ(alertRecord(kAlertUnrecognizedName),
            (std::array<std::uint8_t, 7>{21, 3, 3, 0, 2, 2, 112}));
  EXPECT_EQ(alertRecord(kAlertDecodeError)[6], 50);
  EXPECT_EQ(toString(HelloStatus::TooLarge), "too_large");
  EXPECT_EQ(toString(SniState::Malformed), "malformed");
}

}  // namespace
}  // namespace sluice::proxy::tls
