// sluice's own answers (docs/wire.md#denials), for every reason that has one: the status line
// names the reason (clients such as apt, npm and Python print only that line), Sluice-Reason,
// Proxy-Status, a one-line body no hostile detail can break, and Connection: close.
#include "proxy/session/denial.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

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

TEST(Denial, AHostileDetailCannotBreakTheAnswer) {
  std::string answer;
  appendDenial(answer, policy::Reason::NotAllowedPath, "/a\r\nSet-Cookie: x=1\r\n\r\n\x7f\xff");
  const std::size_t body = answer.find("\r\n\r\n") + 4;
  EXPECT_EQ(answer.substr(body), "sluice: not_allowed_path: /a??Set-Cookie: x=1??????\n");
  EXPECT_EQ(answer.find("\r\nSet-Cookie"), std::string::npos);
  const std::string length = "Content-Length: " + std::to_string(answer.size() - body) + "\r\n";
  EXPECT_NE(answer.find(length), std::string::npos);
}

}  // namespace
}  // namespace sluice::proxy::session
