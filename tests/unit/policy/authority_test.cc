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

// Two authorities (HTTP/2's :authority and a host field beside it) name the same place when
// their hosts canonicalise alike and their ports agree once an absent one is the scheme's; what
// does not parse names nothing, so it is the same as nothing, not even itself.
TEST(SameAuthority, ComparesCanonicalHostsAndPortsWithTheDefaultApplied) {
  struct Row {
    std::string_view a;
    std::string_view b;
    bool same;
  };
  const Row rows[] = {
      // the same place
      {"allowed.test", "allowed.test", true},
      {"allowed.test:443", "allowed.test:443", true},
      {"ALLOWED.test", "allowed.test", true},      // letter case
      {"allowed.test:443", "allowed.test", true},  // the default port
      {"allowed.test", "allowed.test:443", true},
      {"allowed.test.", "allowed.test", true},            // one trailing dot
      {"ALLOWED.test.:443", "allowed.test", true},        // all three
      {"allowed.test:8443", "Allowed.Test.:8443", true},  // another port, on both
      {"127.0.0.1:443", "127.0.0.1", true},
      {"[::1]", "[0:0::1]:443", true},  // one IPv6 address, two spellings
      {"[2001:DB8::1]:443", "[2001:db8::1]", true},
      // another host
      {"allowed.test", "evil.test", false},
      {"allowed.test", "api.allowed.test", false},
      {"allowed.test", "allowed.test.evil.test", false},
      {"127.0.0.1", "127.0.0.2", false},
      // another port
      {"allowed.test:8443", "allowed.test", false},  // absent is 443, not the other's port
      {"allowed.test", "allowed.test:8443", false},
      {"allowed.test:443", "allowed.test:80", false},
      // what does not parse, or does not canonicalise
      {"allowed.test", "allowed.test..", false},
      {"allowed.test", "allowed.test:", false},
      {"allowed.test", "allowed.test:0443", false},
      {"allowed.test", "allowed.test:65979", false},  // glibc would read 443
      {"allowed.test", "user@allowed.test", false},
      {"allowed.test", "allowed_test", false},
      {"127.0.0.1", "2130706433", false},
      {"[::1]", "::1", false},
      {"a b", "a b", false},  // even itself
      {"allowed.test..", "allowed.test..", false},
      {"", "", false},
      {"allowed.test", "", false},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(sameAuthority(row.a, row.b, 443), row.same) << row.a << " | " << row.b;
    EXPECT_EQ(sameAuthority(row.b, row.a, 443), row.same) << row.b << " | " << row.a;
  }
  // The default is the caller's: plain http's 80.
  EXPECT_TRUE(sameAuthority("allowed.test:80", "allowed.test", 80));
  EXPECT_FALSE(sameAuthority("allowed.test:443", "allowed.test", 80));
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
