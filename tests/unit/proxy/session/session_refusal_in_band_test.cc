// Refusals in band (docs/wire.md#refusals-in-band): a tunnel to a name the policy refuses opens
// with a leaf for that name, and each request inside gets the refusal as its answer (HTTP/1.1 and
// HTTP/2 403, gRPC PERMISSION_DENIED), so the client shows sluice's reason; nothing is resolved
// and nothing dialled. The tunnel has its record, each request its own. And where the refusal
// stays on the CONNECT: a client or sandbox that asks, a port that is no known TLS port, an IP
// literal, the rate.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/http2_client.h"
#include "tests/unit/proxy/session/session_test_requests.h"

namespace sluice::test_support {
namespace {

constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
constexpr std::string_view kRefusalBody =
    "sluice: not_allowed_host: elsewhere.test is not in the policy of sandbox sb; a rule would "
    "need hosts: [elsewhere.test]\n";

class SessionRefusalInBandTest : public ::testing::Test {
 protected:
  // CONNECT `authority` (with `fields`); what sluice answered, once a whole head came.
  std::string connect(LoopPeer& client, const std::string& authority,
                      const std::string& fields = "") {
    client.write("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n" + fields +
                 "\r\n");
    bed_.runUntil([&] {
      return client.received().find("\r\n\r\n") != std::string::npos ||
             client.end() != LoopPeer::End::Open;
    });
    std::string answer = client.received();
    client.received().clear();
    return answer;
  }

  // TLS with SNI `sni`, verifying sluice's leaf for it against the sandbox's CA.
  bool handshake(LoopPeer& client, const std::string& sni) {
    client.startTlsClient(bed_.sandboxCaFile(), sni);
    bed_.runUntil([&] {
      return client.tls()->handshakeDone() || client.tls()->failed() ||
             client.end() != LoopPeer::End::Open;
    });
    return client.tls()->handshakeDone();
  }

  // The whole refusal as every test here expects it over HTTP/1.1.
  static void expectRefusal(const std::optional<HttpMessage>& response) {
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 403);
    EXPECT_EQ(response->start_line, "HTTP/1.1 403 Forbidden by sluice: not_allowed_host");
    EXPECT_EQ(response->header("sluice-reason"), "not_allowed_host");
    EXPECT_EQ(response->header("proxy-status"),
              "sluice; error=http_request_denied; details=\"not_allowed_host\"");
    EXPECT_EQ(response->header("connection"), "close");
    EXPECT_EQ(response->body, kRefusalBody);
  }

  // Nothing of the refused name left sluice: no query, no connection to any origin.
  void expectNothingLeft() {
    EXPECT_EQ(bed_.dns().queries(), 0);
    EXPECT_EQ(bed_.tlsOrigin().accepted(), 0u);
    EXPECT_EQ(bed_.origin().accepted(), 0u);
  }

  SessionBed bed_;
};

TEST_F(SessionRefusalInBandTest, TheTunnelOpensAndItsRequestGetsTheRefusal) {
  bed_.configure();
  LoopPeer& client = bed_.connectClient();
  ASSERT_EQ(connect(client, "elsewhere.test:443"), kEstablished);
  ASSERT_TRUE(handshake(client, "elsewhere.test")) << client.tls()->error();
  client.write("GET /x?y=1 HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n");
  expectRefusal(awaitResponse(bed_, client));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.end(), LoopPeer::End::Eof) << "an answer then a FIN, as for any denial";
  expectNothingLeft();

  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  // The tunnel's own, written before its 200; then the request's.
  EXPECT_TRUE(isOneRecord({lines[0]}, {{"method", "CONNECT"},
                                       {"url", "https://elsewhere.test"},
                                       {"sni", "null"},
                                       {"decision", "deny"},
                                       {"reason", "not_allowed_host"},
                                       {"status", "200"},
                                       {"proto", "http/1.1"}}));
  EXPECT_TRUE(isOneRecord({lines[1]}, {{"method", "GET"},
                                       {"url", "https://elsewhere.test/x?y=1"},
                                       {"sni", "elsewhere.test"},
                                       {"decision", "deny"},
                                       {"reason", "not_allowed_host"},
                                       {"status", "403"},
                                       {"upstream", "null"}}));
}

TEST_F(SessionRefusalInBandTest, OverHttp2EachStreamAndEachGrpcCallGetsTheRefusal) {
  bed_.configure();
  // On the TLS origin's port: a port the policy names for https.
  Http2Client::Options options;
  options.host = "elsewhere.test";
  Http2Client h2(bed_, options);
  ASSERT_TRUE(h2.open());
  const std::int32_t get = h2.request("GET", "/a");
  const std::int32_t call = h2.request(
      "POST", "/pkg.Service/Method", {{"content-type", "application/grpc"}, {"te", "trailers"}},
      /*end_stream=*/false);
  h2.data(call, std::string("\0\0\0\0\0", 5), /*end_stream=*/true);
  ASSERT_TRUE(h2.awaitStream(get)) << h2.describe();
  ASSERT_TRUE(h2.awaitStream(call)) << h2.describe();

  const Http2Client::Stream& refused = h2.stream(get);
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.header("sluice-reason"), "not_allowed_host");
  EXPECT_EQ(refused.body, kRefusalBody);
  // gRPC reads a trailers-only answer: PERMISSION_DENIED, the reason in grpc-message.
  const Http2Client::Stream& grpc = h2.stream(call);
  EXPECT_EQ(grpc.status, 200);
  EXPECT_EQ(grpc.header("grpc-status"), "7");
  ASSERT_TRUE(grpc.header("grpc-message"));
  EXPECT_NE(grpc.header("grpc-message")->find("not_allowed_host"), std::string::npos)
      << *grpc.header("grpc-message");
  EXPECT_FALSE(h2.ended()) << "a refused stream is no reason to end the connection";
  expectNothingLeft();

  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(recordsWith(lines, {{"method", "CONNECT"}, {"status", "200"}}).size(), 1u);
  EXPECT_EQ(recordsWith(lines, {{"proto", "h2"}, {"decision", "deny"},
                                {"reason", "not_allowed_host"}})
                .size(),
            2u);
}

// A ClientHello for another name than the refused CONNECT's: refused as any such, with an
// alert; the tunnel's record is the one it has.
TEST_F(SessionRefusalInBandTest, AClientHelloForAnotherNameGetsAnAlert) {
  bed_.configure();
  LoopPeer& client = bed_.connectClient();
  ASSERT_EQ(connect(client, "elsewhere.test:443"), kEstablished);
  EXPECT_FALSE(handshake(client, "origin.test"));
  ASSERT_TRUE(awaitEnd(bed_, client));
  EXPECT_EQ(client.tls()->peerAlert(), "unrecognized name");
  expectNothingLeft();
  EXPECT_TRUE(isOneRecord(bed_.auditLines(),
                          {{"method", "CONNECT"}, {"reason", "not_allowed_host"},
                           {"status", "200"}}));
}

// A reload that allows the name since: the tunnel was refused, and stays so.
TEST_F(SessionRefusalInBandTest, AReloadThatAllowsTheNameLeavesTheTunnelRefused) {
  bed_.configure();
  LoopPeer& client = bed_.connectClient();
  ASSERT_EQ(connect(client, "elsewhere.test:443"), kEstablished);
  ASSERT_TRUE(handshake(client, "elsewhere.test")) << client.tls()->error();
  BedConfig allowing;
  allowing.extra_rules =
      "      - {name: later, hosts: [elsewhere.test], ips: [127.0.0.1/32]}\n";
  bed_.reload(allowing);
  client.write("GET /x?y=1 HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n");
  expectRefusal(awaitResponse(bed_, client));
  expectNothingLeft();
}

TEST_F(SessionRefusalInBandTest, ARedirectedClientHelloIsRefusedInBandToo) {
  BedConfig config;
  config.sandbox_fields = "    transparent: 127.0.0.1:15001\n";
  bed_.configure(config);
  LoopPeer& client = bed_.connectClient(Entry::Transparent);
  ASSERT_TRUE(handshake(client, "elsewhere.test")) << client.tls()->error();
  client.write("GET /x?y=1 HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n");
  expectRefusal(awaitResponse(bed_, client));
  ASSERT_TRUE(awaitEnd(bed_, client));
  expectNothingLeft();
  std::vector<AuditLine> lines = bed_.auditLines();
  ASSERT_EQ(lines.size(), 2u);
  // The tunnel's: no HTTP yet, nothing answered.
  EXPECT_TRUE(isOneRecord({lines[0]}, {{"mode", "transparent"},
                                       {"method", "null"},
                                       {"url", "https://elsewhere.test"},
                                       {"sni", "elsewhere.test"},
                                       {"decision", "deny"},
                                       {"reason", "not_allowed_host"},
                                       {"status", "null"},
                                       {"proto", "null"}}));
  EXPECT_TRUE(isOneRecord({lines[1]}, {{"mode", "transparent"},
                                       {"method", "GET"},
                                       {"status", "403"},
                                       {"reason", "not_allowed_host"}}));
}

// --- where the refusal stays on the CONNECT

struct AtConnect {
  const char* name;
  std::string authority;
  std::string fields;          // of the CONNECT
  std::string sandbox_fields;  // of the sandbox
  const char* reason;
};

void PrintTo(const AtConnect& row, std::ostream* out) { *out << row.name; }

class SessionRefusalAtConnectTest : public SessionRefusalInBandTest,
                                    public ::testing::WithParamInterface<AtConnect> {};

TEST_P(SessionRefusalAtConnectTest, IsTheConnectsAnswer) {
  const AtConnect& row = GetParam();
  BedConfig config;
  config.sandbox_fields = row.sandbox_fields;
  bed_.configure(config);
  LoopPeer& client = bed_.connectClient();
  client.write("CONNECT " + row.authority + " HTTP/1.1\r\nHost: " + row.authority + "\r\n" +
               row.fields + "\r\n");
  std::optional<HttpMessage> response = awaitResponse(bed_, client);
  ASSERT_TRUE(response) << client.received();
  EXPECT_EQ(response->status, 403);
  EXPECT_EQ(response->header("sluice-reason"), row.reason);
  ASSERT_TRUE(awaitEnd(bed_, client));
  expectNothingLeft();
  EXPECT_TRUE(isOneRecord(bed_.auditLines(), {{"method", "CONNECT"},
                                              {"decision", "deny"},
                                              {"reason", row.reason},
                                              {"status", "403"}}));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SessionRefusalAtConnectTest,
    ::testing::Values(
        AtConnect{"TheClientAsks", "elsewhere.test:443", "Sluice-Refusal: at_connect\r\n", "",
                  "not_allowed_host"},
        AtConnect{"TheSandboxSaysSo", "elsewhere.test:443", "", "    refusal: at_connect\n",
                  "not_allowed_host"},
        // ssh over CONNECT would wait for a greeting, not read a refusal.
        AtConnect{"APortNoHttpsRuleNames", "elsewhere.test:22", "", "", "not_allowed_host"},
        AtConnect{"AnIpLiteral", "192.0.2.1:443", "", "", "ip_literal"},
        AtConnect{"ANameThatIsNotValid", "bad_name.test:443", "", "", "bad_host"}),
    [](const ::testing::TestParamInfo<AtConnect>& p) { return std::string(p.param.name); });

// A limit is never carried in band: over the rate, the CONNECT gets its 429.
TEST_F(SessionRefusalInBandTest, OverTheRateTheConnectGetsItsAnswer) {
  BedConfig config;
  config.sandbox_limits = "{requests_per_second: 1, request_burst: 1}";
  bed_.configure(config);
  LoopPeer& first = bed_.connectClient();
  ASSERT_EQ(connect(first, "elsewhere.test:443"), kEstablished);
  LoopPeer& second = bed_.connectClient();
  std::optional<HttpMessage> response;
  second.write("CONNECT elsewhere.test:443 HTTP/1.1\r\nHost: elsewhere.test:443\r\n\r\n");
  response = awaitResponse(bed_, second);
  ASSERT_TRUE(response) << second.received();
  EXPECT_EQ(response->status, 429);
  EXPECT_EQ(response->header("sluice-reason"), "rate_limited");
  EXPECT_EQ(recordsWith(bed_.auditLines(), {{"reason", "rate_limited"}, {"status", "429"}}).size(),
            1u);
}

}  // namespace
}  // namespace sluice::test_support
