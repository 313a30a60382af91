// refusesInBand(): which refused tunnels open to carry their refusal
// (docs/wire.md#refusals-in-band).
// Each row is a tunnel's own facts (target, port, https; an SNI when redirected), decided by the
// real decide() under a policy loaded as users write it.
#include "policy/refusal.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "policy/config_loader.h"

namespace sluice::policy {
namespace {

constexpr char kConfig[] = R"(version: 1
sandboxes:
  - name: sbx
    listen: 127.0.0.2:3128
    policy: test
  - name: early
    listen: 127.0.0.2:3129
    policy: test
    refusal: at_connect
  - name: trial
    listen: 127.0.0.2:3130
    policy: test
    mode: report
policies:
  test:
    rules:
      - name: web
        hosts: [allowed.test]
      - name: plain
        hosts: [plain.test]
        schemes: [http]
      - name: alt-tls
        hosts: [alt.test]
        ports: [8443]
      - name: plain-alt
        hosts: [plain.test]
        schemes: [http]
        ports: [8080]
)";

struct Row {
  const char* name;
  const char* sandbox = "sbx";
  std::string_view host;
  std::uint16_t port = 443;
  bool with_sni = false;  // a redirected connection's facts: the SNI equals H
  Reason reason;          // what decide() says (checked, so a row cannot drift from the policy)
  bool in_band;
};

const Row kRows[] = {
    {.name = "NameNoRuleMatches", .host = "denied.test", .reason = Reason::NotAllowedHost,
     .in_band = true},
    {.name = "NameNoRuleMatchesWithSni", .host = "denied.test", .with_sni = true,
     .reason = Reason::NotAllowedHost, .in_band = true},
    {.name = "RuleForHttpOnly", .host = "plain.test", .reason = Reason::NotAllowedScheme,
     .in_band = true},
    {.name = "PortNotInRule", .host = "allowed.test", .port = 8443,
     .reason = Reason::NotAllowedPort, .in_band = true},
    {.name = "DeniedNameOnAnotherRulesTlsPort", .host = "denied.test", .port = 8443,
     .reason = Reason::NotAllowedHost, .in_band = true},
    // A port no https rule names: perhaps not TLS (ssh, SMTP): refused at the CONNECT.
    {.name = "PortOfNoTlsRule", .host = "denied.test", .port = 22,
     .reason = Reason::NotAllowedHost, .in_band = false},
    {.name = "PortOfAnHttpRuleOnly", .host = "denied.test", .port = 8080,
     .reason = Reason::NotAllowedHost, .in_band = false},
    {.name = "AllowedNameUnknownPort", .host = "allowed.test", .port = 25,
     .reason = Reason::NotAllowedPort, .in_band = false},
    // No name to mint a leaf for.
    {.name = "IpLiteral", .host = "192.0.2.1", .reason = Reason::IpLiteral, .in_band = false},
    {.name = "IpLiteralV6", .host = "[2001:db8::1]", .reason = Reason::IpLiteral,
     .in_band = false},
    {.name = "BadName", .host = "bad_name.test", .reason = Reason::BadHost, .in_band = false},
    {.name = "EmptyName", .host = "", .reason = Reason::BadHost, .in_band = false},
    // The sandbox asked for the old behaviour.
    {.name = "AtConnectSandbox", .sandbox = "early", .host = "denied.test",
     .reason = Reason::NotAllowedHost, .in_band = false},
    // Nothing refused: nothing to carry.
    {.name = "Allowed", .host = "allowed.test", .reason = Reason::None, .in_band = false},
    {.name = "ReportMode", .sandbox = "trial", .host = "denied.test",
     .reason = Reason::NotAllowedHost, .in_band = false},
};

std::shared_ptr<const Config> load() {
  auto loaded = loadConfig({"refusal_test.yaml", kConfig}, {});
  if (!loaded) {
    ADD_FAILURE() << loaded.error().front().toString();
    return nullptr;
  }
  return std::move(loaded).value();
}

class RefusalTest : public testing::TestWithParam<Row> {};

TEST_P(RefusalTest, InBandOrAtConnect) {
  const std::shared_ptr<const Config> config = load();
  ASSERT_NE(config, nullptr);
  const Row& row = GetParam();
  const Sandbox* sandbox = config->findSandbox(row.sandbox);
  ASSERT_NE(sandbox, nullptr);
  RequestFacts facts = RequestFacts::of(row.host, row.port, Scheme::Https);
  if (row.with_sni) {
    facts.sni_state = SniState::Present;
    facts.sni = row.host;
  }
  const Decision d = decide(*sandbox, facts);
  EXPECT_EQ(toString(d.reason), toString(row.reason));
  EXPECT_EQ(refusesInBand(*sandbox, d, row.port), row.in_band);
}

INSTANTIATE_TEST_SUITE_P(Tunnels, RefusalTest, testing::ValuesIn(kRows),
                         [](const testing::TestParamInfo<Row>& p) {
                           return std::string(p.param.name);
                         });

TEST(KnownTlsPort, FourFourThreeAndEveryHttpsRulesPorts) {
  const std::shared_ptr<const Config> config = load();
  ASSERT_NE(config, nullptr);
  const Policy& policy = *config->findSandbox("sbx")->policy;
  EXPECT_TRUE(isKnownTlsPort(policy, 443));
  EXPECT_TRUE(isKnownTlsPort(policy, 8443));
  EXPECT_FALSE(isKnownTlsPort(policy, 8080));  // an http rule's
  EXPECT_FALSE(isKnownTlsPort(policy, 80));
  EXPECT_FALSE(isKnownTlsPort(policy, 22));
}

TEST(RefusalSetting, DefaultsToInBandAndReadsBothWords) {
  const std::shared_ptr<const Config> config = load();
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->findSandbox("sbx")->refusal, Refusal::InBand);
  EXPECT_EQ(config->findSandbox("early")->refusal, Refusal::AtConnect);
}

}  // namespace
}  // namespace sluice::policy
