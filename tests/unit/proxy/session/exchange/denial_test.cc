// sluice's own answers (docs/wire.md#denials), for every reason that has one: the status line
// names the reason (clients such as apt, npm and Python print only that line), Sluice-Reason,
// Proxy-Status, a one-line body no hostile detail can break, and Connection: close.
#include "proxy/session/exchange/denial.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "proxy/session/exchange/request_record.h"

namespace sluice::proxy::session {
namespace {

std::string statusLine(std::string_view answer) {
  return std::string(answer.substr(0, answer.find("\r\n")));
}

TEST(Denial, TheStatusLineNamesTheReasonForEveryReasonWithAnAnswer) {
  int answered = 0;
  for (int i = 1; i < policy::kReasonCount; ++i) {
    const auto reason = static_cast<policy::Reason>(i);
    const policy::ReasonInfo& info = policy::reasonInfo(reason);
    if (info.http_status == 0) {
      continue;  // (an alert or a close: no HTTP to answer with)
    }
    ++answered;
    std::string answer;
    appendDenial(answer, reason, "why");
    const std::string want = "HTTP/1.1 " + std::to_string(info.http_status) + " " +
                             std::string(reasonPhrase(info.http_status)) +
                             " by sluice: " + std::string(info.token);
    EXPECT_EQ(statusLine(answer), want);
    EXPECT_NE(reasonPhrase(info.http_status), "Error") << info.token;  // a standard phrase
    EXPECT_NE(answer.find("\r\nSluice-Reason: " + std::string(info.token) + "\r\n"),
              std::string::npos);
    EXPECT_NE(answer.find("\r\nProxy-Status: sluice; error=" + std::string(info.proxy_status) +
                          "; details=\"" + std::string(info.token) + "\"\r\n"),
              std::string::npos);
    EXPECT_NE(
        answer.find("\r\nConnection: close\r\n\r\nsluice: " + std::string(info.token) + ": why\n"),
        std::string::npos);
  }
  EXPECT_GE(answered, 20);
}

TEST(Denial, Examples) {
  EXPECT_EQ(denialPhrase(403, policy::Reason::NotAllowedHost),
            "Forbidden by sluice: not_allowed_host");
  EXPECT_EQ(denialPhrase(502, policy::Reason::UpstreamConnect),
            "Bad Gateway by sluice: upstream_connect");
  EXPECT_EQ(denialPhrase(429, policy::Reason::RateLimited),
            "Too Many Requests by sluice: rate_limited");
}

// The detail says what would allow it, where one key would (issue 34, item 7).
TEST(Denial, AnUpgradeNotAllowedNamesTheKeyItsRuleLacks) {
  EXPECT_EQ(explainDenial(policy::Reason::UpgradeNotAllowed,
                          {.sandbox = "agent-1", .host = "ws.test", .method = "GET",
                           .target = "/feed"}),
            "a WebSocket to ws.test needs a rule with websocket: true");
}

// Every reason a rule's key could lift names the host, the sandbox and that key (issue 34:
// a refusal read in the client's own error says what to ask the operator for).
TEST(Denial, EachRuleReasonNamesTheKeyThatWouldAllowIt) {
  const DeniedRequest asked{.sandbox = "agent-1", .host = "files.test", .port = 8443,
                            .scheme = policy::Scheme::Https, .method = "PUT",
                            .target = "/up/load?x=1"};
  const struct {
    policy::Reason reason;
    const char* text;
  } rows[] = {
      {policy::Reason::NotAllowedHost,
       "files.test is not in the policy of sandbox agent-1; a rule would need hosts: "
       "[files.test]"},
      {policy::Reason::NotAllowedScheme,
       "https is not allowed for files.test in sandbox agent-1; a rule would need schemes: "
       "[https]"},
      {policy::Reason::NotAllowedPort,
       "port 8443 is not allowed for files.test in sandbox agent-1; a rule would need ports: "
       "[8443]"},
      {policy::Reason::NotAllowedMethod,
       "PUT is not allowed for files.test in sandbox agent-1; a rule would need methods: [PUT]"},
      {policy::Reason::NotAllowedPath,
       "/up/load?x=1 is not allowed for files.test in sandbox agent-1; a rule would need "
       "paths: [/up/load] or a prefix of it"},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(explainDenial(row.reason, asked), row.text) << policy::toString(row.reason);
  }
}

TEST(Denial, AHostileDetailCannotBreakTheAnswer) {
  std::string answer;
  appendDenial(answer, policy::Reason::NotAllowedPath, "/a\r\nSet-Cookie: x=1\r\n\r\n\x7f\xff");
  const std::size_t body = answer.find("\r\n\r\n") + 4;
  EXPECT_EQ(answer.substr(body), "sluice: not_allowed_path: /a??Set-Cookie: x=1??????\n");
  EXPECT_EQ(answer.find("\r\nSet-Cookie"), std::string::npos);
  const std::string length = "Content-Length: " + std::to_string(answer.size() - body) + "\r\n";
  EXPECT_NE(answer.find(length), std::string::npos);
}

// ip_denied says what the resolver answered: each refused address with its class and why, the
// first four, then how many more (docs/wire.md#denials).
TEST(Denial, IpDeniedNamesTheAddressesTheirClassAndWhy) {
  policy::Rule rule;
  rule.name = "cdn";
  std::vector<audit::DeniedAddress> denied = {
      {*policy::IpAddress::parse("192.0.2.7"), policy::AddressRefusal::NotGlobal},
      {*policy::IpAddress::parse("64:ff9b::a9fe:a9fe"), policy::AddressRefusal::NotGlobal},
      {*policy::IpAddress::parse("93.184.216.34"), policy::AddressRefusal::OutsideRuleIps},
      {*policy::IpAddress::parse("127.0.0.2"), policy::AddressRefusal::SluiceListener}};
  EXPECT_EQ(explainIpDenied("files.test", denied, &rule),
            "files.test resolves only to addresses sluice does not connect to: 192.0.2.7 "
            "(documentation, not globally reachable), 64:ff9b::a9fe:a9fe (nat64:link_local, not "
            "globally reachable), 93.184.216.34 (global, outside the ips of rule cdn), 127.0.0.2 "
            "(loopback, sluice's own listener)");
  denied.insert(denied.end(), 3, denied[0]);
  EXPECT_TRUE(explainIpDenied("files.test", denied, &rule).ends_with("listener) and 3 more"));
  // The body it goes into is one line whatever the text.
  EXPECT_EQ(denialBody(policy::Reason::IpDenied, "a\r\nb"), "sluice: ip_denied: a??b\n");
}

// A url has one form whatever built it: never the scheme's default port (docs/audit.md#the-fields).
TEST(Denial, AUrlNeverCarriesItsDefaultPort) {
  const struct {
    std::string_view in;
    std::string_view out;
  } rows[] = {
      {"https://h.test:443/p?q", "https://h.test/p?q"},
      {"https://h.test:443", "https://h.test"},
      {"https://h.test:443?q", "https://h.test?q"},
      {"https://h.test:443#f", "https://h.test#f"},  // '#' ends the authority too
      {"https://h.test:443?a/b:443", "https://h.test?a/b:443"},
      {"http://h.test:80/", "http://h.test/"},
      {"https://[::1]:443/x", "https://[::1]/x"},
      {"https://h.test:8443/", "https://h.test:8443/"},
      {"https://h.test:4430/", "https://h.test:4430/"},
      {"http://h.test:443/", "http://h.test:443/"},  // another scheme's default is a port
      {"https://h.test:80/", "https://h.test:80/"},
      {"http://::1:80/", "http://::1:80/"},  // no port to take off a bare IPv6
      {"https://:443/", "https://:443/"},    // nothing before it: left as read
      {"https://h.test/a:443", "https://h.test/a:443"},
      {"ftp://h.test:21/", "ftp://h.test:21/"},
      {"", ""},
  };
  for (const auto& row : rows) {
    std::string url(row.in);
    normaliseUrl(url);
    EXPECT_EQ(url, row.out) << row.in;
    normaliseUrl(url);
    EXPECT_EQ(url, row.out) << row.in << " (again)";
  }
}

}  // namespace
}  // namespace sluice::proxy::session
