// The ClientHello reader against genuine OpenSSL hellos, hand-built hostile ones, and OpenSSL
// itself as the server that later reads the same bytes: two parsers that disagree on the name are
// a bypass (docs/threat-model.md#tls-parser-disagreement).
#include "proxy/tls/client_hello.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "certs/openssl_ptr.h"

namespace sluice::proxy::tls {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes bytesOf(std::string_view s) { return Bytes(s.begin(), s.end()); }

HelloResult parse(const Bytes& b, std::size_t n) {
  return parseClientHello(std::span<const std::uint8_t>(b.data(), n));
}
HelloResult parse(const Bytes& b) { return parse(b, b.size()); }

// ---------------------------------------------------------------------------------------------
// A ClientHello builder that remembers where its length fields are, so tests can break them.

struct LengthField {
  std::size_t offset = 0;
  std::size_t width = 0;
};

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) {
    u8(static_cast<std::uint8_t>(v >> 8));
    u8(static_cast<std::uint8_t>(v));
  }
  void append(const Bytes& b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void append(const Bytes& b, const std::vector<LengthField>& inner) {
    for (const LengthField& f : inner) {
      lengths_.push_back({out_.size() + f.offset, f.width});
    }
    append(b);
  }
  void open(std::size_t width) {
    open_.push_back({out_.size(), width});
    out_.resize(out_.size() + width);
  }
  void close() {
    const LengthField f = open_.back();
    open_.pop_back();
    const std::size_t n = out_.size() - f.offset - f.width;
    for (std::size_t i = 0; i < f.width; ++i) {
      out_[f.offset + i] = static_cast<std::uint8_t>(n >> (8 * (f.width - 1 - i)));
    }
    lengths_.push_back(f);
  }
  void block(std::size_t width, const Bytes& b) {
    open(width);
    append(b);
    close();
  }
  Bytes& out() { return out_; }
  std::vector<LengthField>& lengths() { return lengths_; }

 private:
  Bytes out_;
  std::vector<LengthField> lengths_;
  std::vector<LengthField> open_;
};

struct Ext {
  std::uint16_t type = 0;
  Bytes body;
  std::vector<LengthField> lengths;  // inside body
};

Ext serverNameExt(const std::vector<std::pair<std::uint8_t, std::string>>& names) {
  Writer w;
  w.open(2);
  for (const auto& [type, name] : names) {
    w.u8(type);
    w.block(2, bytesOf(name));
  }
  w.close();
  return {0, w.out(), w.lengths()};
}
Ext serverNameExt(std::string_view host) { return serverNameExt({{0, std::string(host)}}); }

Ext alpnExt(const std::vector<std::string>& protocols) {
  Writer w;
  w.open(2);
  for (const std::string& p : protocols) {
    w.block(1, bytesOf(p));
  }
  w.close();
  return {16, w.out(), w.lengths()};
}

Ext versionsExt(const std::vector<std::uint16_t>& versions) {
  Writer w;
  w.open(1);
  for (std::uint16_t v : versions) {
    w.u16(v);
  }
  w.close();
  return {43, w.out(), w.lengths()};
}

struct HelloSpec {
  std::uint16_t version = 0x0303;
  Bytes random = Bytes(32, 0xaa);
  Bytes session_id = Bytes(32, 0xbb);
  Bytes cipher_suites = {0x13, 0x01, 0x13, 0x02, 0xc0, 0x2b, 0xc0, 0x2f};
  Bytes compressions = {0};
  bool has_extensions = true;
  std::vector<Ext> extensions = {serverNameExt("allowed.test"), alpnExt({"h2", "http/1.1"}),
                                 versionsExt({0x0304, 0x0303})};
  Bytes trailing;  // inside the message, after the extensions

  HelloSpec& set(Ext e) {
    for (Ext& have : extensions) {
      if (have.type == e.type) {
        have = std::move(e);
        return *this;
      }
    }
    extensions.push_back(std::move(e));
    return *this;
  }
  HelloSpec& add(Ext e) {
    extensions.push_back(std::move(e));
    return *this;
  }
  HelloSpec& remove(std::uint16_t type) {
    std::erase_if(extensions, [type](const Ext& e) { return e.type == type; });
    return *this;
  }
};

struct Built {
  Bytes message;                     // the handshake message, header included
  std::vector<LengthField> lengths;  // every length field but the handshake header's
};

Built build(const HelloSpec& s) {
  Writer w;
  w.u8(1);
  w.open(3);
  w.u16(s.version);
  w.append(s.random);
  w.block(1, s.session_id);
  w.block(2, s.cipher_suites);
  w.block(1, s.compressions);
  if (s.has_extensions) {
    w.open(2);
    for (const Ext& e : s.extensions) {
      w.u16(e.type);
      w.open(2);
      w.append(e.body, e.lengths);
      w.close();
    }
    w.close();
  }
  w.append(s.trailing);
  w.close();
  w.lengths().pop_back();  // the handshake header: framing, tested on its own
  return {w.out(), w.lengths()};
}

// Frames a handshake message as records of at most `fragment` bytes.
Bytes records(const Bytes& message, std::size_t fragment = 16384, std::uint8_t minor = 1) {
  Bytes out;
  for (std::size_t at = 0; at < message.size(); at += fragment) {
    const std::size_t n = std::min(fragment, message.size() - at);
    out.insert(out.end(),
               {22, 3, minor, static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)});
    out.insert(out.end(), message.begin() + static_cast<std::ptrdiff_t>(at),
               message.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  return out;
}

Bytes wire(const HelloSpec& s) { return records(build(s).message); }

// The handshake bytes carried by well-formed records (the test trusts its own inputs).
Bytes payloadOf(const Bytes& w) {
  Bytes m;
  for (std::size_t at = 0; at + 5 <= w.size();) {
    const std::size_t n = static_cast<std::size_t>(w[at + 3] << 8 | w[at + 4]);
    m.insert(m.end(), w.begin() + static_cast<std::ptrdiff_t>(at + 5),
             w.begin() + static_cast<std::ptrdiff_t>(at + 5 + n));
    at += 5 + n;
  }
  return m;
}

// A genuine hello taken apart, so tests can change one extension and keep the rest real.
HelloSpec specOf(const Bytes& genuine) {
  const Bytes m = payloadOf(genuine);
  std::size_t p = 4;
  auto take = [&](std::size_t n) {
    Bytes b(m.begin() + static_cast<std::ptrdiff_t>(p),
            m.begin() + static_cast<std::ptrdiff_t>(p + n));
    p += n;
    return b;
  };
  auto len = [&](std::size_t width) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < width; ++i) {
      n = n << 8 | m[p++];
    }
    return n;
  };
  HelloSpec s;
  s.version = static_cast<std::uint16_t>(len(2));
  s.random = take(32);
  s.session_id = take(len(1));
  s.cipher_suites = take(len(2));
  s.compressions = take(len(1));
  s.extensions.clear();
  const std::size_t end = p + len(2);
  while (p < end) {
    const auto type = static_cast<std::uint16_t>(len(2));
    s.extensions.push_back({type, take(len(2)), {}});
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// OpenSSL on both ends, on memory BIOs.

using certs::SslCtxPtr;
using certs::SslPtr;

Bytes drain(BIO* b) {
  Bytes out(BIO_ctrl_pending(b));
  if (!out.empty() && BIO_read(b, out.data(), static_cast<int>(out.size())) <= 0) {
    out.clear();
  }
  return out;
}

struct ClientOptions {
  const char* sni = nullptr;
  int max_version = TLS1_3_VERSION;
  Bytes alpn;  // wire format
};

// The first flight of an OpenSSL client: a genuine ClientHello in one record.
Bytes genuineHello(const ClientOptions& o) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  EXPECT_EQ(SSL_CTX_set_max_proto_version(ctx.get(), o.max_version), 1);
  SslPtr ssl(SSL_new(ctx.get()));
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), BIO_new(BIO_s_mem()), out);
  if (o.sni != nullptr) {
    EXPECT_EQ(SSL_set_tlsext_host_name(ssl.get(), o.sni), 1);
  }
  if (!o.alpn.empty()) {
    EXPECT_EQ(SSL_set_alpn_protos(ssl.get(), o.alpn.data(), static_cast<unsigned>(o.alpn.size())),
              0);
  }
  const int rc = SSL_connect(ssl.get());
  EXPECT_EQ(SSL_get_error(ssl.get(), rc), SSL_ERROR_WANT_READ);
  return drain(out);
}

const Bytes kAlpnBoth = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

Bytes genuine13() { return genuineHello({"allowed.test", TLS1_3_VERSION, kAlpnBoth}); }

// What OpenSSL 3.0, as the server sluice runs, makes of a hello.
struct ServerVerdict {
  bool accepted = false;                  // it answered with a ServerHello
  std::optional<std::string> servername;  // SSL_get_servername() in the servername callback
  int alert = -1;                         // the fatal alert it sent instead
  std::string error_func;                 // the OpenSSL function that refused it
};

class OpenSslServer {
 public:
  static OpenSslServer& instance() {
    static OpenSslServer server;
    return server;
  }

  ServerVerdict read(const Bytes& w) {
    ERR_clear_error();
    ServerVerdict v;
    SslPtr ssl(SSL_new(ctx_.get()));
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    BIO_write(in, w.data(), static_cast<int>(w.size()));
    BIO_set_mem_eof_return(in, -1);  // no more bytes: "want read", not EOF
    SSL_set_bio(ssl.get(), in, out);
    SSL_set_app_data(ssl.get(), &v);
    (void)SSL_accept(ssl.get());
    const Bytes sent = drain(out);
    v.accepted = sent.size() >= 6 && sent[0] == 22 && sent[5] == 2;
    if (sent.size() >= 7 && sent[0] == 21) {
      v.alert = sent[6];
    }
    const char* func = nullptr;
    if (ERR_peek_error_all(nullptr, nullptr, &func, nullptr, nullptr) != 0 && func != nullptr) {
      v.error_func = func;
    }
    ERR_clear_error();
    return v;
  }

 private:
  OpenSslServer() : ctx_(SSL_CTX_new(TLS_server_method())) {
    // A throwaway self-signed EC certificate: enough for OpenSSL to answer any hello.
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    X509_set_version(cert, X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("allowed.test"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_set_pubkey(cert, key);
    EXPECT_GT(X509_sign(cert, key, EVP_sha256()), 0);
    EXPECT_EQ(SSL_CTX_use_certificate(ctx_.get(), cert), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey(ctx_.get(), key), 1);
    X509_free(cert);
    EVP_PKEY_free(key);
    SSL_CTX_set_tlsext_servername_callback(ctx_.get(), &OpenSslServer::onServerName);
  }

  static int onServerName(SSL* ssl, int* /*alert*/, void* /*arg*/) {
    auto* v = static_cast<ServerVerdict*>(SSL_get_app_data(ssl));
    if (const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)) {
      v->servername = name;
    }
    return SSL_TLSEXT_ERR_OK;
  }

  SslCtxPtr ctx_;
};

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
