// The ClientHello reader on genuine OpenSSL hellos, whole, in pieces and across records, and on
// what is not a hello: not TLS, broken record framing, hellos too large.
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
// Reading genuine hellos, whole and in pieces.

TEST(ClientHello, ReadsGenuineOpenSslHellos) {
  struct Case {
    const char* name;
    ClientOptions options;
    bool tls13;
    bool http11;
    bool h2;
  };
  const Case cases[] = {
      {"tls13 sni alpn", {"allowed.test", TLS1_3_VERSION, kAlpnBoth}, true, true, true},
      {"tls12 only", {"allowed.test", TLS1_2_VERSION, {}}, false, false, false},
      {"tls12 http/1.1",
       {"allowed.test", TLS1_2_VERSION, {8, 'h', 't', 't', 'p', '/', '1', '.', '1'}},
       false,
       true,
       false},
      {"no sni", {nullptr, TLS1_3_VERSION, {}}, true, false, false},
      {"upper case, trailing dot", {"ALLOWED.TEST.", TLS1_3_VERSION, {}}, true, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Bytes hello = genuineHello(c.options);
    const HelloResult r = parse(hello);
    ASSERT_EQ(r.status, HelloStatus::Done);
    if (c.options.sni != nullptr) {
      EXPECT_EQ(r.info.sni_state, SniState::Present);
      EXPECT_EQ(r.info.sni(), c.options.sni);  // raw: no case folding, dot kept
    } else {
      EXPECT_EQ(r.info.sni_state, SniState::Absent);
      EXPECT_EQ(r.info.sni(), "");
    }
    EXPECT_EQ(r.info.legacy_version, 0x0303);
    EXPECT_EQ(r.info.offers_tls13, c.tls13);
    EXPECT_EQ(r.info.offers_alpn, !c.options.alpn.empty());
    EXPECT_EQ(r.info.offers_http11, c.http11);
    EXPECT_EQ(r.info.offers_h2, c.h2);
    EXPECT_FALSE(r.info.has_ech);
    EXPECT_EQ(r.info.consumed, hello.size());
  }
}

// Every prefix of `w` is NeedMore, and all of it is Done naming `sni`.
void expectNeedMoreUntilComplete(const Bytes& w, std::string_view sni) {
  for (std::size_t k = 0; k < w.size(); ++k) {
    const HelloResult r = parse(w, k);
    ASSERT_EQ(r.status, HelloStatus::NeedMore) << "prefix of " << k << " of " << w.size();
  }
  const HelloResult r = parse(w);
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_EQ(r.info.sni_state, SniState::Present);
  EXPECT_EQ(r.info.sni(), sni);
  EXPECT_EQ(r.info.consumed, w.size());
}

TEST(ClientHello, NeedsMoreUntilTheLastByteOfEverySplit) {
  expectNeedMoreUntilComplete(genuine13(), "allowed.test");
  expectNeedMoreUntilComplete(genuineHello({"allowed.test", TLS1_2_VERSION, {}}), "allowed.test");
}

TEST(ClientHello, ReassemblesHelloFragmentedAcrossRecords) {
  const Bytes message = payloadOf(genuine13());
  for (std::size_t fragment : {1u, 2u, 3u, 4u, 5u, 7u, 41u, 100u, 255u, 16384u}) {
    SCOPED_TRACE(fragment);
    expectNeedMoreUntilComplete(records(message, fragment), "allowed.test");
  }
  // Records of random sizes, the server name straddling several of them.
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    Bytes w;
    for (std::size_t at = 0; at < message.size();) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % 40, message.size() - at);
      const Bytes piece(message.begin() + static_cast<std::ptrdiff_t>(at),
                        message.begin() + static_cast<std::ptrdiff_t>(at + n));
      const Bytes r = records(piece, n, static_cast<std::uint8_t>(rng() % 5));
      w.insert(w.end(), r.begin(), r.end());
      at += n;
    }
    expectNeedMoreUntilComplete(w, "allowed.test");
  }
}

TEST(ClientHello, ConsumedEndsWithTheLastRecordOfTheHello) {
  const Bytes hello = genuine13();
  // Later records (a change_cipher_spec, application data) are not the hello's.
  Bytes w = hello;
  w.insert(w.end(), {20, 3, 3, 0, 1, 1, 23, 3, 3, 0, 2, 'h', 'i'});
  HelloResult r = parse(w);
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_EQ(r.info.consumed, hello.size());

  // Bytes after the hello in its own record belong to later messages: allowed, and consumed.
  Bytes message = payloadOf(hello);
  message.insert(message.end(), {0xde, 0xad, 0xbe, 0xef});
  w = records(message);
  expectNeedMoreUntilComplete(w, "allowed.test");
  w = records(message, 50);
  r = parse(w);
  ASSERT_EQ(r.status, HelloStatus::Done);
  EXPECT_EQ(r.info.consumed, w.size());
}

// ---------------------------------------------------------------------------------------------
// What is not TLS, and broken framing.

TEST(ClientHello, RecognisesNotTlsFromTheFirstByte) {
  using namespace std::string_view_literals;
  const std::string_view cases[] = {
      "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"sv,
      "SSH-2.0-x\r\n"sv,
      "CONNECT a:443 HTTP/1.1"sv,
      "\x80\x2e\x01\x03\x01\x00\x15"sv,  // SSLv2-compatible hello
      "\x14\x03\x03\x00\x01\x01"sv,      // change_cipher_spec first
      "\x15\x03\x03\x00\x02\x02\x28"sv,  // an alert first
      "\x17\x03\x03\x00\x01\x00"sv,      // application data first
      "\x00"sv,
  };
  for (std::string_view c : cases) {
    SCOPED_TRACE(testing::PrintToString(c));
    const Bytes b = bytesOf(c);
    EXPECT_EQ(parse(b, 0).status, HelloStatus::NeedMore);
    for (std::size_t k = 1; k <= b.size(); ++k) {
      EXPECT_EQ(parse(b, k).status, HelloStatus::NotTls);
    }
  }
  // A handshake record, but not TLS 3.x, or not a client's first message.
  EXPECT_EQ(parse(Bytes{22, 2}).status, HelloStatus::NotTls);
  EXPECT_EQ(parse(Bytes{22, 0x80}).status, HelloStatus::NotTls);
  EXPECT_EQ(parse(Bytes{22, 3, 1, 0, 4}).status, HelloStatus::NeedMore);
  EXPECT_EQ(parse(Bytes{22, 3, 1, 0, 4, 2}).status, HelloStatus::NotTls);  // server_hello
  EXPECT_EQ(parse(Bytes{22, 3, 1, 0, 4, 0}).status, HelloStatus::NotTls);  // hello_request
}

TEST(ClientHello, RecordVersionMinorIsNotChecked) {
  const Bytes message = build(HelloSpec{}).message;
  for (int minor : {0, 1, 2, 3, 4, 0xff}) {
    EXPECT_EQ(parse(records(message, 16384, static_cast<std::uint8_t>(minor))).status,
              HelloStatus::Done);
  }
}

TEST(ClientHello, RefusesBrokenRecordFraming) {
  const Bytes message = build(HelloSpec{}).message;
  const Bytes two = records(message, 30);  // the second record starts at 35
  struct Case {
    const char* name;
    std::size_t at;
    std::uint8_t value;
  };
  const Case cases[] = {
      {"empty first record", 4, 0},  // length 0x0000 (the high byte is already 0)
      {"second record is change_cipher_spec", 35, 20},
      {"second record is an alert", 35, 21},
      {"second record is application data", 35, 23},
      {"second record is SSLv2-ish", 35, 0x80},
      {"second record is not TLS 3.x", 36, 2},
      {"empty second record", 39, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Bytes w = two;
    w[c.at] = c.value;
    EXPECT_EQ(parse(w).status, HelloStatus::Malformed);
    // Final from the byte that decides it.
    EXPECT_EQ(parse(w, c.at).status, HelloStatus::NeedMore);
    EXPECT_EQ(parse(w, c.at + 1).status, HelloStatus::Malformed);
  }
  // A record longer than 2^14 bytes is one OpenSSL refuses (record_overflow).
  Bytes big = records(build(HelloSpec{}.add({21, Bytes(16500, 0), {}})).message, 16385);
  EXPECT_EQ(parse(big, 5).status, HelloStatus::Malformed);
  big = records(build(HelloSpec{}.add({21, Bytes(16500, 0), {}})).message, 16384);
  EXPECT_EQ(parse(big).status, HelloStatus::Done);
}

TEST(ClientHello, TooLargeAsSoonAsTheLengthSaysSo) {
  // 70 KiB: the handshake header alone says it cannot fit.
  const Bytes huge = records(
      build(HelloSpec{}.add({21, Bytes(65000, 0), {}}).add({22, Bytes(7000, 0), {}})).message);
  ASSERT_GT(huge.size(), 70u * 1024);
  EXPECT_EQ(parse(huge, 8).status, HelloStatus::NeedMore);
  EXPECT_EQ(parse(huge, 9).status, HelloStatus::TooLarge);
  EXPECT_EQ(parse(huge).status, HelloStatus::TooLarge);

  // Exactly kMaxClientHelloBytes of records is allowed; one byte more is not, and that is
  // known from the header: the rest cannot fit even in full records.
  HelloSpec spec;
  const std::size_t base = build(spec).message.size() + 4;  // + the padding extension header
  const std::size_t fits = kMaxClientHelloBytes - 4 * 5 - base;
  Bytes w = records(build(HelloSpec{}.add({21, Bytes(fits, 0), {}})).message);
  ASSERT_EQ(w.size(), kMaxClientHelloBytes);
  EXPECT_EQ(parse(w).status, HelloStatus::Done);
  w = records(build(HelloSpec{}.add({21, Bytes(fits + 1, 0), {}})).message);
  EXPECT_EQ(parse(w, 9).status, HelloStatus::TooLarge);
}

TEST(ClientHello, TooLargeWhenTinyRecordsOverrunTheLimit) {
  // 12 000 bytes of hello in 1-byte records is 72 000 bytes on the wire. Verdicts are final
  // once given (VerdictNeverChangesOnceFinal), so the first final prefix can be bisected.
  const Bytes w = records(build(HelloSpec{}.add({21, Bytes(11800, 0), {}})).message, 1);
  ASSERT_GT(w.size(), kMaxClientHelloBytes);
  std::size_t need_more = 0;
  std::size_t final_at = w.size();
  while (final_at - need_more > 1) {
    const std::size_t mid = need_more + (final_at - need_more) / 2;
    (parse(w, mid).status == HelloStatus::NeedMore ? need_more : final_at) = mid;
  }
  EXPECT_EQ(parse(w, need_more).status, HelloStatus::NeedMore);
  EXPECT_EQ(parse(w, final_at).status, HelloStatus::TooLarge);
  // Known before the limit is buffered: the bytes still owed cannot fit in what is left.
  EXPECT_LT(final_at, kMaxClientHelloBytes - 1000);
}

}  // namespace
}  // namespace sluice::proxy::tls
