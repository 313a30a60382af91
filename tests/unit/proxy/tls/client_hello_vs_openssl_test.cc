// The ClientHello reader against OpenSSL itself as the server that later reads the same bytes:
// two parsers that disagree on the name are a bypass
// (docs/threat-model.md#tls-parser-disagreement).
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
// The differential: the name sluice decides on is the name OpenSSL serves.

struct DiffCounts {
  int same_name = 0;      // both accept, same name
  int both_no_name = 0;   // both accept, no name
  int ours_stricter = 0;  // OpenSSL answers, we refuse the hello or its name
  int both_refuse = 0;
  int openssl_refuses_only = 0;  // we read it; OpenSSL refuses for reasons not about the name
};

// The OpenSSL functions that refuse a hello for the structure of its extensions or its body.
bool refusedForStructure(const ServerVerdict& v) {
  static const std::string_view kStructural[] = {
      "tls_collect_extensions", "tls_parse_ctos_server_name", "tls_parse_ctos_alpn",
      "tls_process_client_hello", "tls_parse_extension"};
  if (v.alert != SSL_AD_DECODE_ERROR && v.alert != SSL_AD_ILLEGAL_PARAMETER) {
    return false;
  }
  for (std::string_view f : kStructural) {
    if (v.error_func == f) {
      return true;
    }
  }
  return false;
}

void compareWithOpenSsl(const Bytes& w, DiffCounts& counts) {
  const HelloResult ours = parse(w);
  const ServerVerdict theirs = OpenSslServer::instance().read(w);
  const bool done = ours.status == HelloStatus::Done;
  const bool present = done && ours.info.sni_state == SniState::Present;
  SCOPED_TRACE(testing::Message() << "ours " << toString(ours.status) << "/"
                                  << toString(ours.info.sni_state) << " '" << ours.info.sni()
                                  << "'; openssl accepted=" << theirs.accepted
                                  << " alert=" << theirs.alert << " in " << theirs.error_func
                                  << " name=" << theirs.servername.value_or("(none)"));
  if (theirs.accepted && done && ours.info.sni_state != SniState::Malformed) {
    // Both read the hello: the same name, or no name on either side.
    ASSERT_EQ(present, theirs.servername.has_value());
    if (present) {
      // The same bytes, so canonicalisation (policy/) makes the same host of both.
      EXPECT_EQ(*theirs.servername, ours.info.sni());
      ++counts.same_name;
    } else {
      ++counts.both_no_name;
    }
  } else if (theirs.accepted) {
    // OpenSSL serves a hello that we refuse (or whose name we refuse): fails closed.
    EXPECT_NE(ours.status, HelloStatus::NeedMore);
    ++counts.ours_stricter;
  } else if (done) {
    // OpenSSL refuses what we read: harmless unless it refused the structure we read.
    EXPECT_FALSE(present && refusedForStructure(theirs));
    ++counts.openssl_refuses_only;
  } else {
    ++counts.both_refuse;
  }
}

std::vector<Bytes> differentialInputs() {
  std::vector<Bytes> out;
  const Bytes g13 = genuine13();
  const Bytes g12 = genuineHello({"allowed.test", TLS1_2_VERSION, {}});
  for (const char* name : {"allowed.test", "ALLOWED.TEST.", "127.0.0.1", "a", "x-y.z"}) {
    out.push_back(genuineHello({name, TLS1_3_VERSION, kAlpnBoth}));
    out.push_back(genuineHello({name, TLS1_2_VERSION, {}}));
  }
  out.push_back(genuineHello({nullptr, TLS1_3_VERSION, {}}));
  out.push_back(genuineHello({nullptr, TLS1_2_VERSION, {}}));
  out.push_back(records(payloadOf(g13), 7));
  out.push_back(records(payloadOf(g12), 1));

  // Genuine hellos with one hostile server_name or a repeated extension (Appendix B1).
  using Names = std::vector<std::pair<std::uint8_t, std::string>>;
  const std::vector<Ext> hostile = {
      serverNameExt(std::string("allowed.test\0.evil.test", 23)),
      serverNameExt(Names{{0, "allowed.test"}, {0, "evil.test"}}),
      serverNameExt(Names{{1, "allowed.test"}}),
      serverNameExt(Names{}),
      serverNameExt(""),
      serverNameExt(std::string(255, 'a')),
      serverNameExt(std::string(256, 'a')),
      serverNameExt("ALLOWED.TEST."),
      {0, {0, 15, 0, 0, 12, 'a', 'l', 'l', 'o', 'w', 'e', 'd', '.', 't', 'e', 's', 't', 0}, {}},
      {0, {0, 14, 0, 0, 12, 'a', 'l', 'l', 'o', 'w', 'e', 'd', '.', 't', 'e', 's'}, {}},
  };
  for (const Bytes& base : {g13, g12}) {
    for (const Ext& e : hostile) {
      out.push_back(wire(specOf(base).set(e)));
    }
    out.push_back(wire(specOf(base).add(serverNameExt("evil.test"))));
    out.push_back(wire(specOf(base).add(alpnExt({"h2"}))));
    out.push_back(wire(specOf(base).add({0xfe0d, Bytes(32, 1), {}})));
    out.push_back(wire(specOf(base).add({0xffce, Bytes(32, 1), {}})));
    out.push_back(wire(specOf(base).remove(0)));
  }

  // Every byte of the genuine hellos' extension blocks changed, and random mutations anywhere.
  std::mt19937 rng(2024);
  for (const Bytes& base : {g13, g12}) {
    const Bytes message = payloadOf(base);
    const HelloSpec spec = specOf(base);
    EXPECT_EQ(build(spec).message, message);  // the builder writes what OpenSSL wrote
    const std::size_t extensions_at = 4 + 2 + 32 + 1 + spec.session_id.size() + 2 +
                                      spec.cipher_suites.size() + 1 + spec.compressions.size();
    for (std::size_t i = extensions_at; i < message.size(); ++i) {
      for (int delta : {1, -1, 0x80}) {
        Bytes m = message;
        m[i] = static_cast<std::uint8_t>(m[i] + delta);
        out.push_back(records(m));
      }
    }
    for (int round = 0; round < 300; ++round) {
      Bytes w = base;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) {
        w[rng() % w.size()] = static_cast<std::uint8_t>(rng());
      }
      out.push_back(std::move(w));
    }
  }
  return out;
}

TEST(ClientHelloVsOpenSsl, BothReadTheSameServerName) {
  DiffCounts counts;
  const std::vector<Bytes> inputs = differentialInputs();
  for (const Bytes& w : inputs) {
    compareWithOpenSsl(w, counts);
  }
  std::printf(
      "[differential] %zu hellos: same name %d, no name on either side %d, we refuse what "
      "OpenSSL answers %d, OpenSSL refuses what we read %d, both refuse %d\n",
      inputs.size(), counts.same_name, counts.both_no_name, counts.ours_stricter,
      counts.openssl_refuses_only, counts.both_refuse);
  EXPECT_GT(counts.same_name, 20);
}

TEST(ClientHelloVsOpenSsl, AppendixB1Verdicts) {
  // Odd hellos as OpenSSL 3.0 on Debian 12 was seen to answer them, hello by hello: OpenSSL's
  // answer, and ours.
  const HelloSpec base = specOf(genuine13());
  using Names = std::vector<std::pair<std::uint8_t, std::string>>;
  const struct {
    const char* name;
    Bytes wire;
    int openssl_alert;  // -1: ServerHello
    HelloStatus status;
    SniState sni;
  } cases[] = {
      {"normal", wire(base), -1, HelloStatus::Done, SniState::Present},
      {"NUL", wire(HelloSpec(base).set(serverNameExt(std::string("allowed.test\0.evil.test", 23)))),
       SSL_AD_UNRECOGNIZED_NAME, HelloStatus::Done, SniState::Present},
      {"two names", wire(HelloSpec(base).set(serverNameExt(Names{{0, "a.test"}, {0, "b.test"}}))),
       SSL_AD_DECODE_ERROR, HelloStatus::Done, SniState::Malformed},
      {"second server_name", wire(HelloSpec(base).add(serverNameExt("evil.test"))),
       SSL_AD_ILLEGAL_PARAMETER, HelloStatus::Malformed, SniState::Absent},
      {"no sni", wire(HelloSpec(base).remove(0)), -1, HelloStatus::Done, SniState::Absent},
      {"256 bytes", wire(HelloSpec(base).set(serverNameExt(std::string(256, 'a')))),
       SSL_AD_UNRECOGNIZED_NAME, HelloStatus::Done, SniState::Malformed},
      {"ip literal", wire(HelloSpec(base).set(serverNameExt("127.0.0.1"))), -1, HelloStatus::Done,
       SniState::Present},
      // Not in B1: OpenSSL serves an empty host_name (SSL_get_servername() == ""); we refuse it.
      {"empty host_name", wire(HelloSpec(base).set(serverNameExt(""))), -1, HelloStatus::Done,
       SniState::Malformed},
      {"ech", wire(HelloSpec(base).add({0xfe0d, Bytes(32, 1), {}})), -1, HelloStatus::Done,
       SniState::Present},
      {"7-byte records", records(build(base).message, 7), -1, HelloStatus::Done, SniState::Present},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ServerVerdict theirs = OpenSslServer::instance().read(c.wire);
    EXPECT_EQ(theirs.accepted, c.openssl_alert == -1);
    EXPECT_EQ(theirs.alert, c.openssl_alert);
    const HelloResult ours = parse(c.wire);
    EXPECT_EQ(ours.status, c.status);
    EXPECT_EQ(ours.info.sni_state, c.sni);
  }
}

TEST(ClientHelloVsOpenSsl, RefusesExtensionsOpenSslRefusesInAClientHello) {
  // OpenSSL 3.0 refuses an extension it knows outside the messages it belongs to. Probing all
  // 65536 types against 3.0.19 found one for a TLS ClientHello: use_srtp (14), DTLS-only.
  // Types it knows for other messages (0xfde8, a server's) or does not know are ignored.
  const HelloSpec base = specOf(genuine13());
  Bytes w = wire(HelloSpec(base).add({14, {0, 0}, {}}));
  EXPECT_EQ(OpenSslServer::instance().read(w).alert, SSL_AD_ILLEGAL_PARAMETER);
  EXPECT_EQ(parse(w).status, HelloStatus::Malformed);
  for (int type : {0xfde8, 0x7777, 0xfe0d}) {
    SCOPED_TRACE(type);
    w = wire(HelloSpec(base).add({static_cast<std::uint16_t>(type), {0, 0}, {}}));
    EXPECT_TRUE(OpenSslServer::instance().read(w).accepted);
    EXPECT_EQ(parse(w).status, HelloStatus::Done);
  }
}

}  // namespace
}  // namespace sluice::proxy::tls
