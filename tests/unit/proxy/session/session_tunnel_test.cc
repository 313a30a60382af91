// The session's tunnel on a real loop: CONNECT decided on its target, the ClientHello read and
// decided on its SNI, TLS terminated with a leaf from the sandbox's CA (the client verifies it),
// requests inside forwarded over TLS verified against upstream.ca_file; and each tunnel state's
// ending: a refused or missing ClientHello, a handshake that stalls, an
// upstream handshake that stalls or presents the wrong name, an idle tunnel.
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

constexpr auto kHandshake = 400ms;
constexpr auto kClockSlack = 20ms;
constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";

class SessionTunnelTest : public ::testing::Test {
 protected:
  // Generous limits, so that a handshake under a sanitizer on a busy machine is never cut.
  void configure() { bed_.configure(); }
  // Small ones, for the tests of the deadlines.
  void configureFast() {
    BedConfig config;
    config.limits = "{handshake_timeout: 400ms, idle_timeout: 800ms}";
    config.upstream = "{connect_timeout: 300ms}";
    bed_.configure(config);
  }

  // connect_timeout small, the others far: a 504 within them can only be connect_timeout's.
  void configureConnectTimeout() {
    BedConfig config;
    config.limits = "{handshake_timeout: 5s, idle_timeout: 10s}";
    config.upstream = "{connect_timeout: 300ms}";
    bed_.configure(config);
  }

  std::string tlsOrigin() { return "origin.test:" + std::to_string(bed_.tlsOrigin().port()); }

  // CONNECT `authority`; true once sluice said the tunnel is established (taken out).
  bool connect(LoopPeer& client, const std::string& authority) {
    client.write("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
    bed_.runUntil([&] {
      return client.received().size() >= kEstablished.size() ||
             client.end() != LoopPeer::End::Open;
    });
    if (!client.received().starts_with(kEstablished)) {
      ADD_FAILURE() << "CONNECT " << authority << " answered: " << client.received();
      return false;
    }
    client.received().erase(0, kEstablished.size());
    return true;
  }

  // CONNECT, then a TLS handshake offering `sni` and verifying it against the sandbox's CA.
  // True once it completed.
  bool openTunnel(LoopPeer& client, const std::string& authority, const std::string& sni) {
    if (!connect(client, authority)) {
      return false;
    }
    client.startTlsClient(bed_.sandboxCaFile(), sni);
    bed_.runUntil([&] {
      return client.tls()->handshakeDone() || client.tls()->failed() ||
             client.end() != LoopPeer::End::Open;
    });
    EXPECT_TRUE(client.tls()->handshakeDone()) << client.tls()->error();
    return client.tls()->handshakeDone();
  }

  static std::string originRequest(std::string_view authority, std::string_view path) {
    return "GET " + std::string(path) + " HTTP/1.1\r\nHost: " + std::string(authority) +
           "\r\n\r\n";
  }

  SessionBed bed_;
};

TEST_F(SessionTunnelTest, ConnectThenTlsGetIsForwardedOverVerifiedUpstreamTls) {
  configure();
  bed_.tlsOrigin().on_request = answerEach("secure");
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(openTunnel(client, tlsOrigin(), "origin.test"));
  EXPECT_TRUE(bed_.auditLines().empty()) << "an allowed CONNECT is no request of its own";

  for (const char* path : {"/inside", "/again"}) {
    client.write(originRequest(tlsOrigin(), path));
    std::optional<HttpMessage> response = awaitResponse(bed_, client);
    ASSERT_TRUE(response) << client.received();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "secure");
  }
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 1u) << "the second request reused the upstream";
  ASSERT_EQ(bed_.tlsOrigin().requests().size(), 2u);
  EXPECT_EQ(bed_.tlsOrigin().requests()[0].message.start_line, "GET /inside HTTP/1.1");
  EXPECT_EQ(bed_.tlsOrigin().requests()[0].message.header("host"), tlsOrigin());

  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  const AuditLine& r = lines[0];
  EXPECT_EQ(r["mode"], "connect");
  EXPECT_EQ(r["sni"], "origin.test");
  EXPECT_EQ(r["host"], tlsOrigin());
  EXPECT_EQ(r["method"], "GET");
  EXPECT_EQ(r["url"], "https://" + tlsOrigin() + "/inside");
  EXPECT_EQ(r["decision"], "allow");
  EXPECT_EQ(r["rule"], "tls");
  EXPECT_EQ(r["status"], "200");
  EXPECT_EQ(r["upstream"], "127.0.0.1:" + std::to_string(bed_.tlsOrigin().port()));

  // The client ends the tunnel politely: sluice answers close_notify, then FIN.
  client.closeNotify();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(client.tls()->closeNotifyReceived());
  EXPECT_EQ(client.end(), LoopPeer::End::Eof);
}

// A refused CONNECT: session_refusal_in_band_test.cc (in band by default, or at the CONNECT).

struct RefusedHello {
  const char* edge;
  const char* sni;  // "" for none
  const char* reason;
};

void PrintTo(const RefusedHello& row, std::ostream* out) { *out << row.edge; }

class SessionRefusedHelloTest : public SessionTunnelTest,
                                public ::testing::WithParamInterface<RefusedHello> {};

// The tunnel is open, but its ClientHello does not name H: an alert (never a ServerHello), a
// record with no status, and the connection closes.
TEST_P(SessionRefusedHelloTest, GetsAnAlertAndARecord) {
  configure();
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(connect(client, tlsOrigin()));
  client.startTlsClient(bed_.sandboxCaFile(), GetParam().sni);
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(client.tls()->failed());
  EXPECT_FALSE(client.tls()->handshakeDone());
  EXPECT_EQ(client.tls()->peerAlert(), "unrecognized name");
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"decision", "deny"},
                                  {"reason", GetParam().reason},
                                  {"status", "null"},
                                  {"url", "https://" + tlsOrigin()}}));
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Hellos, SessionRefusedHelloTest,
    ::testing::Values(RefusedHello{"AnotherAllowedName", "wrongname.test", "sni_mismatch"},
                      RefusedHello{"NoServerName", "", "sni_missing"}),
    [](const ::testing::TestParamInfo<RefusedHello>& row) { return row.param.edge; });

TEST_F(SessionTunnelTest, TunnelThatDoesNotStartWithAClientHelloIsClosedWithARecord) {
  configure();
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(connect(client, tlsOrigin()));
  client.write(originRequest(tlsOrigin(), "/plain"));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.received(), "") << "no alert: nothing said it was TLS";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"reason", "not_tls"}, {"status", "null"}}));
}

TEST_F(SessionTunnelTest, RequestInsideForAnotherHostIsDeniedOverTls) {
  configure();
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(openTunnel(client, tlsOrigin(), "origin.test"));
  client.write(originRequest("elsewhere.test", "/x"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 403);
  EXPECT_EQ(response->header("sluice-reason"), "host_mismatch");
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_TRUE(client.tls()->closeNotifyReceived()) << "the denial ends with close_notify";
  EXPECT_EQ(bed_.tlsOrigin().accepted(), 0u);
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(
      lines, {{"reason", "host_mismatch"}, {"sni", "origin.test"}, {"host", "elsewhere.test"}}));
}

TEST_F(SessionTunnelTest, UpstreamCertificateForAnotherNameIs502UpstreamCert) {
  configure();
  bed_.tlsOrigin().on_request = answerEach("never");
  LoopPeer& client = bed_.connectClient();
  const std::string authority = "wrongname.test:" + std::to_string(bed_.tlsOrigin().port());
  ASSERT_TRUE(openTunnel(client, authority, "wrongname.test"));
  client.write(originRequest(authority, "/x"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 502);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_cert");
  EXPECT_TRUE(bed_.tlsOrigin().requests().empty()) << "a request went to an unverified origin";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"reason", "upstream_cert"}, {"status", "502"}}));
}

// --- the tunnel's deadlines -------------------------------------------------------------------

// The CONNECT was answered, so the tunnel that carried nothing is on record: timeout
// (docs/audit.md#errors).
TEST_F(SessionTunnelTest, NoClientHelloWithinHandshakeTimeoutIsClosedWithATunnelRecord) {
  configureFast();
  auto start = std::chrono::steady_clock::now();
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(connect(client, tlsOrigin()));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kHandshake - kClockSlack);
  EXPECT_EQ(client.received(), "");
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_TRUE(isOneRecord(bed_.auditLines(), {{"method", "CONNECT"},
                                              {"decision", "allow"},
                                              {"status", "200"},
                                              {"error", "timeout"},
                                              {"proto", "null"}}));
}

// A ClientHello, then nothing: sluice's handshake flight goes out and the client never
// finishes. The deadline runs from the accept.
TEST_F(SessionTunnelTest, StalledTlsHandshakeIsCutAtHandshakeTimeout) {
  configureFast();
  auto start = std::chrono::steady_clock::now();
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(connect(client, tlsOrigin()));
  std::unique_ptr<MemoryTls> hello = MemoryTls::client(bed_.sandboxCaFile(), "origin.test");
  hello->start();
  client.writeRaw(hello->takeOutput());
  ASSERT_TRUE(bed_.runUntil([&] { return client.rawBytesReceived() > kEstablished.size(); }))
      << "no ServerHello";
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), kHandshake - kClockSlack);
  ASSERT_TRUE(bed_.allSessionsFinished());
  ASSERT_TRUE(isOneRecord(
      bed_.auditLines(),
      {{"method", "CONNECT"}, {"status", "200"}, {"error", "timeout"}, {"proto", "null"}}));
}

// The origin accepts the connection and never answers sluice's ClientHello: the upstream
// handshake is bounded by connect_timeout, and the client gets its 504 inside the tunnel.
TEST_F(SessionTunnelTest, StalledUpstreamTlsHandshakeIs504) {
  configureConnectTimeout();
  LoopPeer& client = bed_.connectClient();
  const std::string authority = "tls-stall.test:" + std::to_string(bed_.origin().port());
  ASSERT_TRUE(openTunnel(client, authority, "tls-stall.test"));
  auto start = std::chrono::steady_clock::now();
  client.write(originRequest(authority, "/x"));
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_GE(since(start), 300ms - kClockSlack);
  EXPECT_EQ(response->status, 504);
  EXPECT_EQ(response->header("sluice-reason"), "upstream_timeout");
  ASSERT_EQ(bed_.origin().accepted(), 1u);
  EXPECT_GT(bed_.origin().connection(0).rawBytesReceived(), 0u) << "no ClientHello upstream";
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_TRUE(isOneRecord(lines, {{"reason", "upstream_timeout"}, {"status", "504"}}));
}

// Idle between requests inside the tunnel: closed at idle_timeout, without close_notify.
TEST_F(SessionTunnelTest, IdleTunnelIsClosedAtIdleTimeout) {
  configureFast();
  bed_.tlsOrigin().on_request = answerEach("once");
  LoopPeer& client = bed_.connectClient();
  ASSERT_TRUE(openTunnel(client, tlsOrigin(), "origin.test"));
  client.write(originRequest(tlsOrigin(), "/once"));
  ASSERT_TRUE(awaitResponse(bed_, client));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_GE(since(start), 800ms - kClockSlack);
  EXPECT_FALSE(client.tls()->closeNotifyReceived());
  ASSERT_TRUE(bed_.allSessionsFinished());
  EXPECT_EQ(bed_.auditLines().size(), 1u);
}

}  // namespace
}  // namespace sluice::test_support
