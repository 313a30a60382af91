// Ports, authorities and absolute URLs, parsed strictly (docs/policy.md#schemes-and-ports,
// docs/wire.md#explicit-proxy).
#include "policy/authority.h"

#include <gtest/gtest.h>

namespace sluice::policy {
namespace {

TEST(ParsePort, AcceptsOnlyPlainDecimal) {
  EXPECT_EQ(parsePort("443"), 443);
  EXPECT_EQ(parsePort("1"), 1);
  EXPECT_EQ(parsePort("65535"), 65535);
  for (std::string_view bad : {"", "0", "0443", "00", "+443", "-1", "0x1bb", "https", "443 ",
                               " 443", "65536", "65979", "100000", "4 43", "443a", "1e3"}) {
    EXPECT_FALSE(parsePort(bad)) << bad;
  }
}

TEST(ParseAuthority, SplitsHostAndPort) {
  auto a = parseAuthority("example.com:443", PortRule::Required);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "example.com");
  EXPECT_EQ(a->port, 443);

  auto b = parseAuthority("[2001:db8::1]:8443", PortRule::Required);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "[2001:db8::1]");
  EXPECT_EQ(b->port, 8443);

  auto c = parseAuthority("example.com", PortRule::Optional);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "example.com");
  EXPECT_FALSE(c->port);

  auto d = parseAuthority("[::1]", PortRule::Optional);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->host, "[::1]");
}

TEST(ParseAuthority, Refuses) {
  struct Row {
    std::string_view text;
    PortRule rule;
    AuthorityError error;
  };
  const Row rows[] = {
      {"", PortRule::Optional, AuthorityError::Empty},
      {":443", PortRule::Required, AuthorityError::Empty},
      {"example.com", PortRule::Required, AuthorityError::MissingPort},
      {"[::1]", PortRule::Required, AuthorityError::MissingPort},
      {"example.com:", PortRule::Optional, AuthorityError::BadPort},
      {"example.com:0443", PortRule::Required, AuthorityError::BadPort},
      {"example.com:65979", PortRule::Required, AuthorityError::BadPort},
      {"example.com:https", PortRule::Required, AuthorityError::BadPort},
      {"example.com:443:443", PortRule::Required, AuthorityError::BadBrackets},
      {"::1:443", PortRule::Required, AuthorityError::BadBrackets},
      {"user@example.com:443", PortRule::Required, AuthorityError::UserInfo},
      {"example.com:443@evil.test:443", PortRule::Required, AuthorityError::UserInfo},
      {"[::1:443", PortRule::Required, AuthorityError::BadBrackets},
      {"::1]:443", PortRule::Required, AuthorityError::BadBrackets},
      {"[::1]x:443", PortRule::Required, AuthorityError::BadBrackets},
  };
  for (const Row& row : rows) {
    auto a = parseAuthority(row.text, row.rule);
    ASSERT_FALSE(a) << row.text;
    EXPECT_EQ(a.error(), row.error) << row.text << ": " << toString(a.error());
  }
}

TEST(ParseAbsoluteUrl, Https) {
  auto url = parseAbsoluteUrl("https://pypi.org/simple/requests/?x=1");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->scheme, UrlScheme::Https);
  EXPECT_EQ(url->authority.host, "pypi.org");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->target, "/simple/requests/?x=1");
}

TEST(ParseAbsoluteUrl, HttpDefaultsAndExplicitPort) {
  auto a = parseAbsoluteUrl("HTTP://deb.debian.org");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->scheme, UrlScheme::Http);
  EXPECT_EQ(a->port, 80);
  EXPECT_EQ(a->target, "/");
  auto b = parseAbsoluteUrl("http://[::1]:8080/x");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->authority.host, "[::1]");
  EXPECT_EQ(b->port, 8080);
  auto c = parseAbsoluteUrl("http://h?q=1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->target, "?q=1");
}

TEST(ParseAbsoluteUrl, OtherSchemesParseAsOther) {
  for (std::string_view text : {"ftp://allowed.test/", "gopher://allowed.test:70/_x",
                                "ws://allowed.test/", "file://allowed.test/etc/passwd"}) {
    auto url = parseAbsoluteUrl(text);
    ASSERT_TRUE(url) << text;
    EXPECT_EQ(url->scheme, UrlScheme::Other) << text;
  }
}

TEST(ParseAbsoluteUrl, Refuses) {
  EXPECT_EQ(parseAbsoluteUrl("/relative").error(), UrlError::NotAbsolute);
  EXPECT_EQ(parseAbsoluteUrl("allowed.test").error(), UrlError::NotAbsolute);
  EXPECT_EQ(parseAbsoluteUrl("https:/x").error(), UrlError::NotAbsolute);
  EXPECT_EQ(parseAbsoluteUrl("://x").error(), UrlError::NotAbsolute);
  EXPECT_EQ(parseAbsoluteUrl("1http://x").error(), UrlError::NotAbsolute);
  EXPECT_EQ(parseAbsoluteUrl("https://a/#frag").error(), UrlError::Fragment);
  EXPECT_EQ(parseAbsoluteUrl("https://user@a/").error(), UrlError::BadAuthority);
  EXPECT_EQ(parseAbsoluteUrl("https://a:0443/").error(), UrlError::BadAuthority);
  EXPECT_EQ(parseAbsoluteUrl("https:///x").error(), UrlError::BadAuthority);
}

}  // namespace
}  // namespace sluice::policy
