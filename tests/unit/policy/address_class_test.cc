// Address classification (docs/policy.md#addresses): one row per range edge (the first and
// last address inside, and the neighbours just outside), then the IPv6 forms that carry an
// IPv4 address, each of which must classify like the address it carries.

#include "policy/address_class.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <ostream>
#include <string>

#include "policy/ip_address.h"

namespace sluice::policy {
namespace {

using C = AddressClass;
using M = Embedding;

std::string rowName(std::size_t index, const std::string& text) {
  std::string name = std::to_string(index) + "_";
  for (const char c : text.substr(0, 48)) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    name += alnum ? c : '_';
  }
  return name;
}

struct ClassRow {
  std::string text;
  AddressClass address_class;
  Embedding embedding = Embedding::None;
};
std::ostream& operator<<(std::ostream& os, const ClassRow& r) {
  return os << r.text << " -> " << toString(r.address_class) << "/" << toString(r.embedding);
}

class Classify : public testing::TestWithParam<ClassRow> {};

TEST_P(Classify, GivesTheRegistryClass) {
  const ClassRow& row = GetParam();
  const auto address = IpAddress::parse(row.text);
  ASSERT_TRUE(address.has_value()) << row.text;
  const AddressClassification got = classifyAddress(*address);
  EXPECT_EQ(toString(got.address_class), toString(row.address_class));
  EXPECT_EQ(toString(got.embedding), toString(row.embedding));
  EXPECT_EQ(got.isGlobal(), row.address_class == C::Global);
}

std::string nameOf(const testing::TestParamInfo<ClassRow>& param_info) {
  return rowName(param_info.index, param_info.param.text);
}

INSTANTIATE_TEST_SUITE_P(
    Ipv4, Classify,
    testing::Values(
        // 0.0.0.0/8: Linux connects 0.0.0.0 to local listeners (I3).
        ClassRow{"0.0.0.0", C::Unspecified}, ClassRow{"0.1.2.3", C::Unspecified},
        ClassRow{"0.255.255.255", C::Unspecified}, ClassRow{"1.0.0.0", C::Global},
        // 10.0.0.0/8
        ClassRow{"9.255.255.255", C::Global}, ClassRow{"10.0.0.0", C::Private},
        ClassRow{"10.0.0.1", C::Private}, ClassRow{"10.255.255.255", C::Private},
        ClassRow{"11.0.0.0", C::Global},
        // 100.64.0.0/10 (Alibaba metadata 100.100.100.200)
        ClassRow{"100.63.255.255", C::Global}, ClassRow{"100.64.0.0", C::Cgnat},
        ClassRow{"100.100.100.200", C::Cgnat}, ClassRow{"100.127.255.255", C::Cgnat},
        ClassRow{"100.128.0.0", C::Global},
        // 127.0.0.0/8
        ClassRow{"126.255.255.255", C::Global}, ClassRow{"127.0.0.0", C::Loopback},
        ClassRow{"127.0.0.1", C::Loopback}, ClassRow{"127.0.0.66", C::Loopback},
        ClassRow{"127.255.255.255", C::Loopback}, ClassRow{"128.0.0.0", C::Global},
        // 169.254.0.0/16 (cloud metadata 169.254.169.254)
        ClassRow{"169.253.255.255", C::Global}, ClassRow{"169.254.0.0", C::LinkLocal},
        ClassRow{"169.254.169.254", C::LinkLocal}, ClassRow{"169.254.255.255", C::LinkLocal},
        ClassRow{"169.255.0.0", C::Global},
        // 172.16.0.0/12
        ClassRow{"172.15.255.255", C::Global}, ClassRow{"172.16.0.0", C::Private},
        ClassRow{"172.31.255.255", C::Private}, ClassRow{"172.32.0.0", C::Global},
        // 192.0.0.0/24 (Oracle metadata 192.0.0.192), refused whole: its two global anycast
        // addresses included.
        ClassRow{"191.255.255.255", C::Global}, ClassRow{"192.0.0.0", C::IetfProtocol},
        ClassRow{"192.0.0.9", C::IetfProtocol}, ClassRow{"192.0.0.192", C::IetfProtocol},
        ClassRow{"192.0.0.255", C::IetfProtocol}, ClassRow{"192.0.1.0", C::Global},
        // 192.0.2.0/24
        ClassRow{"192.0.1.255", C::Global}, ClassRow{"192.0.2.0", C::Documentation},
        ClassRow{"192.0.2.255", C::Documentation}, ClassRow{"192.0.3.0", C::Global},
        // 192.88.99.0/24
        ClassRow{"192.88.98.255", C::Global}, ClassRow{"192.88.99.0", C::Relay6to4},
        ClassRow{"192.88.99.255", C::Relay6to4}, ClassRow{"192.88.100.0", C::Global},
        // 192.168.0.0/16
        ClassRow{"192.167.255.255", C::Global}, ClassRow{"192.168.0.0", C::Private},
        ClassRow{"192.168.255.255", C::Private}, ClassRow{"192.169.0.0", C::Global},
        // 198.18.0.0/15
        ClassRow{"198.17.255.255", C::Global}, ClassRow{"198.18.0.0", C::Benchmarking},
        ClassRow{"198.19.255.255", C::Benchmarking}, ClassRow{"198.20.0.0", C::Global},
        // 198.51.100.0/24
        ClassRow{"198.51.99.255", C::Global}, ClassRow{"198.51.100.0", C::Documentation},
        ClassRow{"198.51.100.255", C::Documentation}, ClassRow{"198.51.101.0", C::Global},
        // 203.0.113.0/24
        ClassRow{"203.0.112.255", C::Global}, ClassRow{"203.0.113.0", C::Documentation},
        ClassRow{"203.0.113.66", C::Documentation}, ClassRow{"203.0.113.255", C::Documentation},
        ClassRow{"203.0.114.0", C::Global},
        // 224.0.0.0/4, 240.0.0.0/4, 255.255.255.255
        ClassRow{"223.255.255.255", C::Global}, ClassRow{"224.0.0.0", C::Multicast},
        ClassRow{"239.255.255.255", C::Multicast}, ClassRow{"240.0.0.0", C::Reserved},
        ClassRow{"255.255.255.254", C::Reserved}, ClassRow{"255.255.255.255", C::Broadcast},
        // Ordinary public addresses.
        ClassRow{"1.1.1.1", C::Global}, ClassRow{"8.8.8.8", C::Global},
        ClassRow{"93.184.216.34", C::Global}, ClassRow{"177.0.0.1", C::Global},
        ClassRow{"8.0.0.1", C::Global}),
    nameOf);

INSTANTIATE_TEST_SUITE_P(
    Ipv6, Classify,
    testing::Values(
        // ::/128, ::1/128: their own classes, not the compatible forms of 0.0.0.0 and 0.0.0.1.
        ClassRow{"::", C::Unspecified}, ClassRow{"0:0:0:0:0:0:0:0", C::Unspecified},
        ClassRow{"::1", C::Loopback},
        // ::/96, IPv4-compatible (deprecated; Python calls ::127.0.0.1 global).
        ClassRow{"::2", C::Unspecified, M::Compatible},
        ClassRow{"::127.0.0.1", C::Loopback, M::Compatible},
        ClassRow{"::255.255.255.255", C::Broadcast, M::Compatible},
        ClassRow{"::1:0:0", C::NotGlobalUnicast},
        // ::ffff:0:0/96, IPv4-mapped.
        ClassRow{"::fffe:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"::ffff:0.0.0.0", C::Unspecified, M::Mapped},
        ClassRow{"::ffff:127.0.0.1", C::Loopback, M::Mapped},
        ClassRow{"::ffff:7f00:1", C::Loopback, M::Mapped},
        ClassRow{"0:0:0:0:0:ffff:127.0.0.1", C::Loopback, M::Mapped},
        ClassRow{"::ffff:a9fe:a9fe", C::LinkLocal, M::Mapped},
        ClassRow{"::ffff:255.255.255.255", C::Broadcast, M::Mapped},
        ClassRow{"::1:0:0:0", C::NotGlobalUnicast},
        ClassRow{"::ffff:0:0:0", C::NotGlobalUnicast},  // IPv4-translated (SIIT)
        ClassRow{"0:0:0:1:0:ffff:7f00:1", C::NotGlobalUnicast},
        // 64:ff9b::/96, well-known NAT64.
        ClassRow{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"64:ff9b::", C::Unspecified, M::Nat64},
        ClassRow{"64:ff9b::7f00:1", C::Loopback, M::Nat64},
        ClassRow{"64:ff9b::a9fe:a9fe", C::LinkLocal, M::Nat64},
        ClassRow{"64:ff9b::ffff:ffff", C::Broadcast, M::Nat64},
        ClassRow{"64:ff9b::1:0:0", C::NotGlobalUnicast},
        ClassRow{"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        // 64:ff9b:1::/48, local-use NAT64.
        ClassRow{"64:ff9b:1::", C::Nat64Local}, ClassRow{"64:ff9b:1::1", C::Nat64Local},
        ClassRow{"64:ff9b:1::7f00:1", C::Nat64Local},
        ClassRow{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", C::Nat64Local},
        ClassRow{"64:ff9b:2::", C::NotGlobalUnicast},
        // 100::/64, discard-only.
        ClassRow{"ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"100::", C::Discard}, ClassRow{"100::ffff:ffff:ffff:ffff", C::Discard},
        ClassRow{"100:0:0:1::", C::NotGlobalUnicast},
        // 2000::/3 starts; 2001::/23 with Teredo and benchmarking inside it.
        ClassRow{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"2000::", C::Global},
        ClassRow{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Global},
        ClassRow{"2001::", C::Teredo}, ClassRow{"2001:0:4136:e378:8000:63bf:3fff:fdd2", C::Teredo},
        ClassRow{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", C::Teredo},
        ClassRow{"2001:1::", C::IetfProtocol}, ClassRow{"2001:1::1", C::IetfProtocol},
        ClassRow{"2001:1:ffff:ffff:ffff:ffff:ffff:ffff", C::IetfProtocol},
        ClassRow{"2001:2::", C::Benchmarking},
        ClassRow{"2001:2:0:ffff:ffff:ffff:ffff:ffff", C::Benchmarking},
        ClassRow{"2001:2:1::", C::IetfProtocol}, ClassRow{"2001:3::", C::IetfProtocol},
        ClassRow{"2001:20::", C::IetfProtocol},
        ClassRow{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", C::IetfProtocol},
        ClassRow{"2001:200::", C::Global},
        // 2001:db8::/32
        ClassRow{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", C::Global},
        ClassRow{"2001:db8::", C::Documentation}, ClassRow{"2001:db8::1", C::Documentation},
        ClassRow{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", C::Documentation},
        ClassRow{"2001:db9::", C::Global},
        // 2002::/16, 6to4: the IPv4 address is bits 16..47.
        ClassRow{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Global},
        ClassRow{"2002::", C::Unspecified, M::SixToFour},
        ClassRow{"2002:7f00:1::", C::Loopback, M::SixToFour},
        ClassRow{"2002:a9fe:a9fe::", C::LinkLocal, M::SixToFour},
        ClassRow{"2002:5db8:d822::1", C::Global, M::SixToFour},
        ClassRow{"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Broadcast, M::SixToFour},
        ClassRow{"2003::", C::Global},
        // 3fff::/20
        ClassRow{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Global},
        ClassRow{"3fff::", C::Documentation},
        ClassRow{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", C::Documentation},
        ClassRow{"3fff:1000::", C::Global},
        ClassRow{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Global},
        ClassRow{"4000::", C::NotGlobalUnicast},
        // 5f00::/16, SRv6 SIDs.
        ClassRow{"5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"5f00::", C::Srv6}, ClassRow{"5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Srv6},
        ClassRow{"5f01::", C::NotGlobalUnicast},
        // fc00::/7
        ClassRow{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"fc00::", C::UniqueLocal}, ClassRow{"fd00::1", C::UniqueLocal},
        ClassRow{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::UniqueLocal},
        ClassRow{"fe00::", C::NotGlobalUnicast},
        // fe80::/10
        ClassRow{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::NotGlobalUnicast},
        ClassRow{"fe80::", C::LinkLocal}, ClassRow{"fe80::1", C::LinkLocal},
        ClassRow{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::LinkLocal},
        // fec0::/10
        ClassRow{"fec0::", C::SiteLocal},
        ClassRow{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::SiteLocal},
        // ff00::/8
        ClassRow{"ff00::", C::Multicast}, ClassRow{"ff02::1", C::Multicast},
        ClassRow{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Multicast},
        // Public.
        ClassRow{"2001:4860:4860::8888", C::Global}, ClassRow{"2606:4700::1111", C::Global},
        ClassRow{"2a00:1450:4001:80b::200e", C::Global}),
    nameOf);

// Every IPv6 form that carries an IPv4 address classifies as that address
// (docs/policy.md#ipv4-carried-in-ipv6).
struct EmbeddedRow {
  std::string v4;
  AddressClass address_class;
};
std::ostream& operator<<(std::ostream& os, const EmbeddedRow& r) { return os << r.v4; }

class EmbeddedForms : public testing::TestWithParam<EmbeddedRow> {
 protected:
  static IpAddress form(std::uint32_t v4, const std::array<std::uint8_t, 16>& prefix,
                        std::size_t offset) {
    std::array<std::uint8_t, 16> bytes = prefix;
    bytes[offset] = static_cast<std::uint8_t>(v4 >> 24);
    bytes[offset + 1] = static_cast<std::uint8_t>(v4 >> 16);
    bytes[offset + 2] = static_cast<std::uint8_t>(v4 >> 8);
    bytes[offset + 3] = static_cast<std::uint8_t>(v4);
    return IpAddress::fromV6(bytes);
  }
  static void expectClass(const IpAddress& a, AddressClass c, Embedding e) {
    const AddressClassification got = classifyAddress(a);
    EXPECT_EQ(toString(got.address_class), toString(c)) << a.toString();
    EXPECT_EQ(toString(got.embedding), toString(e)) << a.toString();
  }
};

TEST_P(EmbeddedForms, ClassifyAsTheCarriedAddress) {
  const EmbeddedRow& row = GetParam();
  const auto a = IpAddress::parseV4(row.v4);
  ASSERT_TRUE(a.has_value());
  const std::uint32_t v4 = a->v4();
  expectClass(*a, row.address_class, M::None);
  expectClass(form(v4, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 12), row.address_class,
              M::Mapped);
  expectClass(form(v4, {0, 0x64, 0xff, 0x9b}, 12), row.address_class, M::Nat64);
  expectClass(form(v4, {0x20, 0x02}, 2), row.address_class, M::SixToFour);
  // 6to4 ignores the subnet and interface bits after the /48.
  expectClass(form(v4, {0x20, 0x02, 0, 0, 0, 0, 0xab, 0xcd, 0, 0, 0, 0, 0, 0, 0, 1}, 2),
              row.address_class, M::SixToFour);
  // Compatible, except where the bytes are :: or ::1, which keep their own classes.
  const IpAddress compatible = form(v4, {}, 12);
  if (v4 == 0) {
    expectClass(compatible, C::Unspecified, M::None);
  } else if (v4 == 1) {
    expectClass(compatible, C::Loopback, M::None);
  } else {
    expectClass(compatible, row.address_class, M::Compatible);
  }
  // Local-use NAT64 is refused whatever it carries, and so is Teredo.
  expectClass(form(v4, {0, 0x64, 0xff, 0x9b, 0, 1}, 12), C::Nat64Local, M::None);
  expectClass(form(v4, {0x20, 0x01, 0, 0}, 12), C::Teredo, M::None);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, EmbeddedForms,
    testing::Values(
        EmbeddedRow{"127.0.0.1", C::Loopback}, EmbeddedRow{"169.254.169.254", C::LinkLocal},
        EmbeddedRow{"10.0.0.1", C::Private}, EmbeddedRow{"100.100.100.200", C::Cgnat},
        EmbeddedRow{"0.0.0.0", C::Unspecified}, EmbeddedRow{"0.0.0.1", C::Unspecified},
        EmbeddedRow{"0.0.0.2", C::Unspecified}, EmbeddedRow{"192.0.0.192", C::IetfProtocol},
        EmbeddedRow{"192.168.1.1", C::Private}, EmbeddedRow{"172.16.0.1", C::Private},
        EmbeddedRow{"224.0.0.1", C::Multicast}, EmbeddedRow{"255.255.255.255", C::Broadcast},
        EmbeddedRow{"93.184.216.34", C::Global}, EmbeddedRow{"8.8.8.8", C::Global}),
    [](const testing::TestParamInfo<EmbeddedRow>& param_info) {
      return rowName(param_info.index, param_info.param.v4);
    });

// The spellings of IPv4 carried in IPv6 (docs/threat-model.md#ipv4-inside-ipv6), as they arrive in
// AAAA answers or IP rules.
INSTANTIATE_TEST_SUITE_P(
    Bypasses, Classify,
    testing::Values(ClassRow{"::ffff:127.0.0.1", C::Loopback, M::Mapped},
                    ClassRow{"::ffff:7f00:1", C::Loopback, M::Mapped},
                    ClassRow{"::ffff:a9fe:a9fe", C::LinkLocal, M::Mapped},
                    ClassRow{"::127.0.0.1", C::Loopback, M::Compatible},
                    ClassRow{"0:0:0:0:0:ffff:127.0.0.1", C::Loopback, M::Mapped},
                    ClassRow{"64:ff9b::7f00:1", C::Loopback, M::Nat64},
                    ClassRow{"64:ff9b::a9fe:a9fe", C::LinkLocal, M::Nat64},
                    ClassRow{"64:ff9b::10.0.0.1", C::Private, M::Nat64},
                    ClassRow{"64:ff9b::100.100.100.200", C::Cgnat, M::Nat64},
                    ClassRow{"64:ff9b::93.184.216.34", C::Global, M::Nat64},
                    ClassRow{"2002:7f00:1::", C::Loopback, M::SixToFour},
                    ClassRow{"2002:a9fe:a9fe::", C::LinkLocal, M::SixToFour},
                    ClassRow{"2002:a00:1::", C::Private, M::SixToFour},
                    ClassRow{"2002:6464:64c8::", C::Cgnat, M::SixToFour},
                    ClassRow{"::ffff:93.184.216.34", C::Global, M::Mapped},
                    ClassRow{"::93.184.216.34", C::Global, M::Compatible},
                    ClassRow{"::0.0.0.0", C::Unspecified}, ClassRow{"::0", C::Unspecified}),
    nameOf);

TEST(ClassifyV4Family, AnIpv4AddressHasNoEmbedding) {
  // The same bytes as ::ffff:127.0.0.1, but an IPv4 address: not "mapped".
  const AddressClassification c = classifyAddress(IpAddress::fromV4(0x7f000001));
  EXPECT_EQ(c.address_class, C::Loopback);
  EXPECT_EQ(c.embedding, M::None);
  EXPECT_FALSE(c.isGlobal());
}

TEST(ClassifyDefault, DeniesUntilClassified) {
  // A default AddressClassification is not global: forgetting to classify fails closed.
  EXPECT_FALSE(AddressClassification{}.isGlobal());
}

struct NameRow {
  AddressClass address_class;
  std::string name;
};

TEST(AddressClassNames, AreSnakeCase) {
  const NameRow rows[] = {
      {C::Global, "global"},
      {C::Unspecified, "unspecified"},
      {C::Loopback, "loopback"},
      {C::Private, "private"},
      {C::Cgnat, "cgnat"},
      {C::LinkLocal, "link_local"},
      {C::IetfProtocol, "ietf_protocol"},
      {C::Documentation, "documentation"},
      {C::Benchmarking, "benchmarking"},
      {C::Relay6to4, "relay_6to4"},
      {C::Multicast, "multicast"},
      {C::Reserved, "reserved"},
      {C::Broadcast, "broadcast"},
      {C::UniqueLocal, "unique_local"},
      {C::SiteLocal, "site_local"},
      {C::Discard, "discard"},
      {C::Teredo, "teredo"},
      {C::Nat64Local, "nat64_local"},
      {C::Srv6, "srv6"},
      {C::NotGlobalUnicast, "not_global_unicast"},
  };
  for (const NameRow& row : rows) {
    EXPECT_EQ(toString(row.address_class), row.name);
  }
}

TEST(EmbeddingNames, AreSnakeCase) {
  EXPECT_EQ(toString(M::None), "none");
  EXPECT_EQ(toString(M::Mapped), "mapped");
  EXPECT_EQ(toString(M::Compatible), "compatible");
  EXPECT_EQ(toString(M::Nat64), "nat64");
  EXPECT_EQ(toString(M::SixToFour), "6to4");
}

}  // namespace
}  // namespace sluice::policy
