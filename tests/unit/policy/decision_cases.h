#pragma once
// The table-driven harness for decide(): each row is one request's facts and the verdict,
// reason and rule docs/policy.md requires. The rows (decision_*_test.cc) follow
// docs/threat-model.md (addresses and policy matching); the policy is loaded through the real
// loader, as users write it. Included by exactly one file per test executable.
#include "policy/decision.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/config_loader.h"

namespace sluice::policy {
namespace {

constexpr char kPolicy[] = R"(version: 1
sandboxes:
  - name: sbx
    listen: 127.0.0.2:3128
    policy: test
  - name: trial
    listen: 127.0.0.2:3129
    policy: test
    mode: report
  - name: closed
    listen: 127.0.0.2:3130
    policy: nothing
policies:
  nothing:
    rules: []
  test:
    rules:
      - name: allowed
        hosts: [allowed.test]
        schemes: [https, http]
        ports: [443, 80]
      - name: api
        hosts: [api.allowed.test]
        methods: [GET]
        paths: ["/v1/public/"]
      - name: wild
        hosts: ["*.wild.test"]
      - name: cdn
        hosts: [cdn.test]
        ips: [127.0.0.20/32]
      - name: pypi
        hosts: [pypi.test]
        methods: [GET, HEAD]
        paths: [/simple/, /packages]
      - name: npm-myorg
        hosts: [npm.test]
        methods: [GET, HEAD]
        paths: ["/@myorg%2f", "/@myorg/"]
      - name: literal
        hosts: ["93.184.216.34", "[2606:2800:220:1::]"]
        schemes: [http]
      - name: private-net
        hosts: [internal.test]
        ips: [10.0.0.0/8, "fd00::/8"]
      - name: upload-post
        hosts: [upload.test]
        methods: [POST]
      - name: upload-put
        hosts: [upload.test]
        methods: [PUT]
        paths: [/put/]
      - name: self
        hosts: [self.test]
        ips: [127.0.0.0/8]
        ports: [3128, 443]
      - name: v6-wide
        hosts: [v6.test]
        ips: ["::/0", "2000::/3"]
      - name: live-feed
        hosts: [live.test]
        paths: [/feed/]
        websocket: true
      - name: live-rest
        hosts: [live.test]
)";

// Sentinels for the string facts of a row.
constexpr char kSame[] = "<same as H>";  // the SNI or Host equals H as written
constexpr char kNone[] = "<absent>";     // the ClientHello had no SNI

struct Case {
  const char* name;
  std::string_view host;
  std::uint16_t port = 443;
  Scheme scheme = Scheme::Https;
  const char* sandbox = "sbx";
  // Compared by address with the sentinels, so they may hold NUL bytes.
  std::string_view sni = {};  // empty default: not read yet (CONNECT stage)
  bool request = false;       // a request head is present
  std::string_view method = "GET";
  std::string_view target = "/";
  int host_count = 1;
  std::string_view host_header = kSame;
  std::string_view uri_authority = {};  // absolute-form target's authority, if any
  bool websocket = false;               // the request asks for a WebSocket upgrade
  std::vector<std::string_view> addresses = {};
  bool resolved = false;
  Verdict verdict = Verdict::Deny;
  Reason reason = Reason::None;
  const char* rule = nullptr;
  // ip_denied: why the first address was refused (addressRefusal), when the row says.
  const char* refused = nullptr;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

std::string caseName(const testing::TestParamInfo<Case>& param) {
  return std::string(param.param.name);
}

class DecisionTest : public testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    auto loaded = loadConfig({"decision_test.yaml", kPolicy}, {});
    if (!loaded) {
      for (const auto& e : loaded.error()) {
        ADD_FAILURE() << e.toString();
      }
      return;
    }
    config_ = new std::shared_ptr<const Config>(std::move(loaded).value());
  }
  static void TearDownTestSuite() {
    delete config_;
    config_ = nullptr;
  }
  static std::shared_ptr<const Config>* config_;
};
std::shared_ptr<const Config>* DecisionTest::config_ = nullptr;

std::string_view sameOr(std::string_view value, std::string_view host) {
  return value.data() == kSame ? host : value;
}

// A row's facts: `head` and `addresses` hold what `facts` points into.
struct RowFacts {
  RequestFacts facts;
  RequestHead head;
  std::vector<IpAddress> addresses;
};

void factsOf(const Case& c, RowFacts& row) {
  RequestFacts& facts = row.facts;
  facts.target_host = c.host;
  facts.port = c.port;
  facts.scheme = c.scheme;
  if (c.sni.data() == kNone) {
    facts.sni_state = SniState::Absent;
  } else if (c.sni.data() != nullptr) {
    facts.sni_state = SniState::Present;
    facts.sni = sameOr(c.sni, c.host);
  }
  if (c.request) {
    RequestHead& head = row.head;
    head.method = c.method;
    head.target = c.target;
    head.host_count = c.host_count;
    head.host = c.host_count == 1 ? sameOr(c.host_header, c.host) : "";
    head.absolute_form = c.uri_authority.data() != nullptr;
    if (head.absolute_form) {
      head.uri_authority = sameOr(c.uri_authority, c.host);
    }
    head.websocket = c.websocket;
    facts.request = &head;
  }
  for (std::string_view text : c.addresses) {
    auto address = IpAddress::parse(text);
    ASSERT_TRUE(address) << "bad address in table: " << text;
    row.addresses.push_back(*address);
  }
  facts.resolved = c.resolved || !row.addresses.empty();
  facts.addresses = row.addresses;
}

TEST_P(DecisionTest, Decides) {
  ASSERT_NE(config_, nullptr);
  const Case& c = GetParam();
  const Sandbox* sandbox = (*config_)->findSandbox(c.sandbox);
  ASSERT_NE(sandbox, nullptr);
  RowFacts row;
  ASSERT_NO_FATAL_FAILURE(factsOf(c, row));
  const RequestFacts& facts = row.facts;
  const std::vector<IpAddress>& addresses = row.addresses;

  Decision d = decide(*sandbox, facts);
  EXPECT_EQ(toString(d.verdict), toString(c.verdict));
  EXPECT_EQ(toString(d.reason), toString(c.reason));
  EXPECT_EQ(d.rule == nullptr ? std::string("<none>") : d.rule->name,
            c.rule == nullptr ? std::string("<none>") : std::string(c.rule));
  if (d.verdict != Verdict::Deny && facts.resolved) {
    EXPECT_NE(d.usable_addresses, 0u);
  }
  if (c.refused != nullptr) {
    ASSERT_FALSE(addresses.empty());
    EXPECT_EQ(toString(addressRefusal(*sandbox, d.rule, addresses[0], c.port)), c.refused);
  }
}

testing::AssertionResult sameDecision(const Decision& a, const Decision& b) {
  if (a.verdict == b.verdict && a.reason == b.reason && a.rule == b.rule && a.host == b.host &&
      a.ip_checked == b.ip_checked && a.usable_addresses == b.usable_addresses) {
    return testing::AssertionSuccess();
  }
  auto text = [](const Decision& d) {
    return std::string(toString(d.verdict)) + " " + std::string(toString(d.reason)) + " rule " +
           (d.rule != nullptr ? d.rule->name : std::string("<none>")) + " host " +
           std::string(d.host.text()) + " ip_checked " + (d.ip_checked ? "1" : "0") + " usable " +
           std::to_string(d.usable_addresses);
  };
  return testing::AssertionFailure() << text(a) << " vs " << text(b);
}

// The addresses an upstream may come with, whatever the row's H: an address inside a rule's
// `ips` (cdn.test's, self.test's, private-net's), a public one, private and loopback ones,
// sluice's own listener, IPv6, an IP literal H's own, none, and mixes.
const std::vector<std::vector<std::string_view>> kAddressSets = {
    {},
    {"127.0.0.20"},
    {"93.184.216.34"},
    {"10.1.2.3"},
    {"127.0.0.2"},
    {"::1"},
    {"fd00::1"},
    {"2606:2800:220:1::"},
    {"169.254.169.254", "93.184.216.34"},
    {"127.0.0.20", "10.1.2.3", "2001:db8::1", "8.8.8.8"},
};

// decideAddresses() on the row's decision without addresses is decide() with them, field for
// field: for the row's own addresses, and for each set above (the address of a reused
// connection, of a shared HTTP/2 session, or an answer).
TEST_P(DecisionTest, DecidingOnlyTheAddressesIsDecidingAgain) {
  ASSERT_NE(config_, nullptr);
  const Case& c = GetParam();
  const Sandbox* sandbox = (*config_)->findSandbox(c.sandbox);
  ASSERT_NE(sandbox, nullptr);
  RowFacts row;
  ASSERT_NO_FATAL_FAILURE(factsOf(c, row));
  RequestFacts unresolved_facts = row.facts;
  unresolved_facts.resolved = false;
  unresolved_facts.addresses = {};
  const Decision unresolved = decide(*sandbox, unresolved_facts);

  std::vector<std::vector<IpAddress>> sets = {row.addresses};
  for (const auto& texts : kAddressSets) {
    sets.emplace_back();
    for (std::string_view text : texts) {
      sets.back().push_back(*IpAddress::parse(text));
    }
  }
  for (const std::vector<IpAddress>& addresses : sets) {
    RequestFacts resolved = row.facts;
    resolved.resolved = true;
    resolved.addresses = addresses;
    const Decision full = decide(*sandbox, resolved);
    const Decision alone = decideAddresses(*sandbox, unresolved, addresses, row.facts.port);
    EXPECT_TRUE(sameDecision(alone, full)) << addresses.size() << " addresses";
  }
}

constexpr Verdict kAllow = Verdict::Allow;
constexpr Verdict kDeny = Verdict::Deny;
constexpr Verdict kReport = Verdict::Report;

// A 63-character label, a 64-character one, and names of 253 and 254 characters.
const std::string kLabel63(63, 'a');
const std::string kLabel64(64, 'a');
const std::string kName253 = kLabel63 + "." + kLabel63 + "." + kLabel63 + "." +
                             std::string(61, 'b');
const std::string kName254 = kName253 + "b";
const std::string kLabel63Wild = kLabel63 + ".wild.test";
const std::string kLabel64Wild = kLabel64 + ".wild.test";
const std::string kNulSni("allowed.test\0.evil.test", 23);
const std::string kNulHost("allowed.test\0", 13);

}  // namespace
}  // namespace sluice::policy
