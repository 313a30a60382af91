// Host patterns of a rule (docs/policy.md#host-patterns).
#include "policy/host_pattern.h"

#include <gtest/gtest.h>

namespace sluice::policy {
namespace {

bool matches(std::string_view pattern, std::string_view host) {
  auto p = HostPattern::parse(pattern);
  EXPECT_TRUE(p) << pattern << ": " << (p ? "" : p.error());
  auto h = canonicalizeHost(host);
  return p && h && p->matches(*h);
}

TEST(HostPattern, ExactMatchesOnlyItself) {
  EXPECT_TRUE(matches("example.com", "example.com"));
  EXPECT_TRUE(matches("Example.COM.", "EXAMPLE.com"));
  EXPECT_FALSE(matches("example.com", "www.example.com"));
  EXPECT_FALSE(matches("example.com", "evilexample.com"));
  EXPECT_FALSE(matches("example.com", "example.com.evil"));
  EXPECT_FALSE(matches("example.com", "com"));
}

TEST(HostPattern, WildcardMatchesLabelsBelowNotTheApex) {
  EXPECT_TRUE(matches("*.example.com", "a.example.com"));
  EXPECT_TRUE(matches("*.example.com", "a.b.c.example.com"));
  EXPECT_TRUE(matches("*.EXAMPLE.com", "A.example.COM."));
  EXPECT_FALSE(matches("*.example.com", "example.com"));
  EXPECT_FALSE(matches("*.example.com", "aexample.com"));
  EXPECT_FALSE(matches("*.example.com", "a.example.com.evil"));
  EXPECT_FALSE(matches("*.example.com", "a.example.co"));
}

TEST(HostPattern, AddressesMatchAsAddresses) {
  EXPECT_TRUE(matches("10.0.0.1", "10.0.0.1"));
  EXPECT_FALSE(matches("10.0.0.1", "10.0.0.2"));
  EXPECT_TRUE(matches("2001:db8::1", "[2001:DB8:0::1]"));
  EXPECT_TRUE(matches("[2001:db8::1]", "[2001:db8::1]"));
  EXPECT_FALSE(matches("::ffff:10.0.0.1", "10.0.0.1"));  // another family, another literal
  EXPECT_FALSE(matches("10.0.0.1", "a.10.0.0.1.example"));
}

TEST(HostPattern, TextIsCanonical) {
  EXPECT_EQ(HostPattern::parse("*.Example.COM.")->text(), "*.example.com");
  EXPECT_EQ(HostPattern::parse("[2001:DB8:0:0::1]")->text(), "2001:db8::1");
  EXPECT_EQ(HostPattern::parse("2001:db8::1")->kind(), HostPattern::Kind::Address);
  EXPECT_EQ(HostPattern::parse("*.a.b")->kind(), HostPattern::Kind::Wildcard);
  EXPECT_EQ(HostPattern::parse("a.b")->kind(), HostPattern::Kind::Exact);
}

TEST(HostPattern, Refuses) {
  for (std::string_view bad :
       {"", "*", "*.", "**.example.com", "*example.com", "ex*ample.com", "example.*",
        "a.*.example.com", "*.*.example.com", "example..com", "exa_mple.com", "-a.com",
        "*.com", "*.test", "*.co.uk", "*.github.io", "*.s3.amazonaws.com",
        "*.ngrok-free.app", "*.10.0.0.1", "*.[::1]", "2130706433", "0x7f.1", "[::1",
        "1:2:3", "b\xc3\xbc" "cher.de", "example.com:443", "example.com/x", "user@example.com"}) {
    auto p = HostPattern::parse(bad);
    EXPECT_FALSE(p) << "accepted: " << bad;
  }
}

TEST(HostPattern, ErrorsSayWhy) {
  EXPECT_NE(HostPattern::parse("*.com").error().find("top-level"), std::string::npos);
  EXPECT_NE(HostPattern::parse("*.github.io").error().find("public suffix"), std::string::npos);
  EXPECT_NE(HostPattern::parse("a.*.com").error().find("first label"), std::string::npos);
}

TEST(IsPublicSuffix, KnownSuffixes) {
  EXPECT_TRUE(isPublicSuffix("co.uk"));
  EXPECT_TRUE(isPublicSuffix("github.io"));
  EXPECT_FALSE(isPublicSuffix("example.co.uk"));
  EXPECT_FALSE(isPublicSuffix("archive.ubuntu.com"));
}

}  // namespace
}  // namespace sluice::policy
