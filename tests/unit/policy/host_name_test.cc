// canonicalizeHost(): the one normalisation every name goes through (docs/policy.md#names).
#include "policy/host_name.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::policy {
namespace {

struct Valid {
  std::string_view raw;
  std::string_view canonical;
  HostKind kind;
};

const Valid kValid[] = {
    {"example.com", "example.com", HostKind::Name},
    {"EXAMPLE.COM", "example.com", HostKind::Name},
    {"Example.Com.", "example.com", HostKind::Name},
    {"a", "a", HostKind::Name},
    {"a-b.c-d", "a-b.c-d", HostKind::Name},
    {"xn--bcher-kva.example", "xn--bcher-kva.example", HostKind::Name},
    {"0x7f.example", "0x7f.example", HostKind::Name},
    {"123.example", "123.example", HostKind::Name},
    {"1e100.net", "1e100.net", HostKind::Name},
    {"127.0.0.1", "127.0.0.1", HostKind::Ipv4Literal},
    {"127.0.0.1.", "127.0.0.1", HostKind::Ipv4Literal},
    {"0.0.0.0", "0.0.0.0", HostKind::Ipv4Literal},
    {"255.255.255.255", "255.255.255.255", HostKind::Ipv4Literal},
    {"[::1]", "::1", HostKind::Ipv6Literal},
    {"[2001:DB8::1]", "2001:db8::1", HostKind::Ipv6Literal},
    {"[2001:db8:0:0:0:0:0:1]", "2001:db8::1", HostKind::Ipv6Literal},
    {"[::ffff:127.0.0.1]", "::ffff:127.0.0.1", HostKind::Ipv6Literal},
};

TEST(CanonicalizeHost, AcceptsAndNormalises) {
  for (const Valid& v : kValid) {
    auto host = canonicalizeHost(v.raw);
    ASSERT_TRUE(host) << v.raw << ": " << toString(host.error());
    EXPECT_EQ(host->text(), v.canonical) << v.raw;
    EXPECT_EQ(host->kind(), v.kind) << v.raw;
  }
}

TEST(CanonicalizeHost, IsIdempotent) {
  for (const Valid& v : kValid) {
    auto once = canonicalizeHost(v.raw);
    ASSERT_TRUE(once);
    auto twice = canonicalizeHost(once->authorityText());
    ASSERT_TRUE(twice) << v.raw;
    EXPECT_TRUE(*once == *twice) << v.raw;
  }
}

struct Invalid {
  std::string raw;
  HostError error;
};

const Invalid kInvalid[] = {
    {"", HostError::Empty},
    {".", HostError::EmptyLabel},
    {"..", HostError::EmptyLabel},
    {"a..b", HostError::EmptyLabel},
    {".a", HostError::EmptyLabel},
    {"a.b..", HostError::EmptyLabel},
    {std::string(64, 'a') + ".com", HostError::LabelTooLong},
    {std::string(250, 'a'), HostError::LabelTooLong},
    {std::string(63, 'a') + "." + std::string(63, 'a') + "." + std::string(63, 'a') + "." +
         std::string(62, 'a'),
     HostError::TooLong},
    {"exa_mple.com", HostError::BadCharacter},
    {"a%2eb", HostError::BadCharacter},
    {"a b", HostError::BadCharacter},
    {"a@b", HostError::BadCharacter},
    {"a:443", HostError::BadCharacter},
    {"::1", HostError::BadCharacter},
    {std::string("a\0b", 3), HostError::BadCharacter},
    // A ClientHello's server name reaches canonicalisation raw (tls/client_hello_test): one
    // with a NUL is refused, not cut at the NUL.
    {std::string("allowed.test\0.evil.test", 23), HostError::BadCharacter},
    {"a\tb", HostError::BadCharacter},
    {"*.example.com", HostError::BadCharacter},
    {"b\xc3\xbc" "cher.example", HostError::NonAscii},
    {"\xff", HostError::NonAscii},
    {"-a.com", HostError::HyphenAtEdge},
    {"a-.com", HostError::HyphenAtEdge},
    {"a.com-", HostError::HyphenAtEdge},
    {"-", HostError::HyphenAtEdge},
    {"2130706433", HostError::NumericNotIpv4},
    {"0x7f000001", HostError::NumericNotIpv4},
    {"0x7f.1", HostError::NumericNotIpv4},
    {"0177.0.0.1", HostError::NumericNotIpv4},
    {"010.0.0.1", HostError::NumericNotIpv4},
    {"127.1", HostError::NumericNotIpv4},
    {"127.0.1", HostError::NumericNotIpv4},
    {"1.2.3.4.5", HostError::NumericNotIpv4},
    {"256.1.1.1", HostError::NumericNotIpv4},
    {"example.0x", HostError::NumericNotIpv4},
    {"0", HostError::NumericNotIpv4},
    {"[::1", HostError::BadIpv6},
    {"[]", HostError::BadIpv6},
    {"[fe80::1%eth0]", HostError::BadIpv6},
    {"[fe80::1%25eth0]", HostError::BadIpv6},
    {"[127.0.0.1]", HostError::BadIpv6},
    {"[example.com]", HostError::BadIpv6},
    {"[::1]:443", HostError::BadIpv6},
};

TEST(CanonicalizeHost, RefusesWithTheRightError) {
  for (const Invalid& v : kInvalid) {
    auto host = canonicalizeHost(v.raw);
    ASSERT_FALSE(host) << "accepted: " << v.raw;
    EXPECT_EQ(host.error(), v.error) << v.raw << ": " << toString(host.error());
  }
}

TEST(CanonicalizeHost, LongestValidName) {
  std::string name = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                     std::string(63, 'c') + "." + std::string(61, 'd');
  ASSERT_EQ(name.size(), 253u);
  auto host = canonicalizeHost(name);
  ASSERT_TRUE(host);
  EXPECT_EQ(host->text(), name);
  EXPECT_TRUE(canonicalizeHost(name + "."));  // the root dot does not count
}

TEST(CanonicalizeHost, AuthorityTextBracketsIpv6Only) {
  EXPECT_EQ(canonicalizeHost("[::1]")->authorityText(), "[::1]");
  EXPECT_EQ(canonicalizeHost("10.0.0.1")->authorityText(), "10.0.0.1");
  EXPECT_EQ(canonicalizeHost("A.b")->authorityText(), "a.b");
  std::string url = "https://";
  canonicalizeHost("[2001:DB8::1]")->appendAuthorityText(url);
  EXPECT_EQ(url, "https://[2001:db8::1]");
  url = "http://";
  canonicalizeHost("A.b.")->appendAuthorityText(url);
  EXPECT_EQ(url, "http://a.b");
}

}  // namespace
}  // namespace sluice::policy
