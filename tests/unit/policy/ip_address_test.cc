// The strict IP-literal parser, RFC 5952 formatting, CIDR blocks and endpoints. The invalid rows
// are the spellings of docs/threat-model.md#ip-literals-and-ports: every one of them is read as an
// address by some library, so every one must be refused here, not reinterpreted.

#include "policy/ip_address.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace sluice::policy {
namespace {

// gtest names from the row text ("0177.0.0.1" -> "3_0177_0_0_1"), so a failure names its input.
std::string rowName(std::size_t index, const std::string& text) {
  std::string name = std::to_string(index) + "_";
  for (const char c : text.substr(0, 40)) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    name += alnum ? c : '_';
  }
  return name;
}

template <class Row>
std::string nameOf(const testing::TestParamInfo<Row>& param_info) {
  return rowName(param_info.index, param_info.param.text);
}

std::array<std::uint8_t, 16> bytesOf(const std::array<std::uint16_t, 8>& groups) {
  std::array<std::uint8_t, 16> bytes{};
  for (std::size_t g = 0; g < 8; ++g) {
    bytes[2 * g] = static_cast<std::uint8_t>(groups[g] >> 8);
    bytes[2 * g + 1] = static_cast<std::uint8_t>(groups[g] & 0xff);
  }
  return bytes;
}

IpAddress addr(const std::string& text) {
  const auto a = IpAddress::parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress{});
}

// ---- IPv4 ---------------------------------------------------------------------------------

struct V4Row {
  std::string text;
  std::uint32_t value;
};
std::ostream& operator<<(std::ostream& os, const V4Row& r) { return os << '"' << r.text << '"'; }

class ValidV4 : public testing::TestWithParam<V4Row> {};

TEST_P(ValidV4, ParsesToTheValueAndFormatsBackToTheSameText) {
  const V4Row& row = GetParam();
  const auto a = IpAddress::parseV4(row.text);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->isV4());
  EXPECT_EQ(a->v4(), row.value);
  EXPECT_EQ(a, IpAddress::parse(row.text));
  EXPECT_EQ(a, IpAddress::fromV4(row.value));
  EXPECT_EQ(a->toString(), row.text);  // every accepted IPv4 text is already canonical
  // Stored in the IPv4-mapped form, ::ffff:a.b.c.d.
  std::array<std::uint8_t, 16> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  mapped[12] = static_cast<std::uint8_t>(row.value >> 24);
  mapped[13] = static_cast<std::uint8_t>(row.value >> 16);
  mapped[14] = static_cast<std::uint8_t>(row.value >> 8);
  mapped[15] = static_cast<std::uint8_t>(row.value);
  EXPECT_EQ(a->bytes(), mapped);
  EXPECT_FALSE(IpAddress::parseV6(row.text).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ValidV4,
    testing::Values(V4Row{"0.0.0.0", 0x00000000}, V4Row{"0.0.0.1", 0x00000001},
                    V4Row{"1.2.3.4", 0x01020304}, V4Row{"127.0.0.1", 0x7f000001},
                    V4Row{"10.0.0.1", 0x0a000001}, V4Row{"8.0.0.1", 0x08000001},
                    V4Row{"177.0.0.1", 0xb1000001}, V4Row{"169.254.169.254", 0xa9fea9fe},
                    V4Row{"100.100.100.200", 0x646464c8}, V4Row{"199.99.9.0", 0xc7630900},
                    V4Row{"200.250.255.100", 0xc8faff64}, V4Row{"255.255.255.255", 0xffffffff}),
    nameOf<V4Row>);

struct InvalidRow {
  std::string text;
};
std::ostream& operator<<(std::ostream& os, const InvalidRow& r) {
  return os << '"' << r.text << '"';
}

class InvalidV4 : public testing::TestWithParam<InvalidRow> {};

TEST_P(InvalidV4, IsRefusedByBothParsers) {
  EXPECT_FALSE(IpAddress::parseV4(GetParam().text).has_value());
  EXPECT_FALSE(IpAddress::parse(GetParam().text).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Rows, InvalidV4,
    testing::Values(
        // glibc reads all of these as 127.0.0.1 (or 0.0.0.0, 0.0.0.1), c-ares reads
        // 0177.0.0.1 as 177.0.0.1 and 010.0.0.1 as 10.0.0.1.
        InvalidRow{"2130706433"}, InvalidRow{"0x7f000001"}, InvalidRow{"017700000001"},
        InvalidRow{"0177.0.0.1"}, InvalidRow{"010.0.0.1"}, InvalidRow{"127.1"},
        InvalidRow{"0x7f.1"}, InvalidRow{"0x7f.0.0.1"}, InvalidRow{"0X7F.0.0.1"}, InvalidRow{"0"},
        InvalidRow{"1"}, InvalidRow{"127.0.1"}, InvalidRow{"127.000.000.001"},
        InvalidRow{"00.0.0.0"}, InvalidRow{"1.2.3.04"}, InvalidRow{"1.2.3.00"},
        InvalidRow{"4294967296"}, InvalidRow{"4294967297"}, InvalidRow{"1.2.3.99999999999"},
        InvalidRow{"1.2.3.4294967297"}, InvalidRow{"1e2.0.0.1"},
        // Range.
        InvalidRow{"1.2.3.256"}, InvalidRow{"256.0.0.0"}, InvalidRow{"1.2.3.1000"},
        InvalidRow{"999.999.999.999"},
        // Shape.
        InvalidRow{""}, InvalidRow{"."}, InvalidRow{"..."}, InvalidRow{"1.2.3"},
        InvalidRow{"1.2.3.4.5"}, InvalidRow{"1..2.3"}, InvalidRow{".1.2.3.4"},
        InvalidRow{"1.2.3.4."}, InvalidRow{"1.2.3."}, InvalidRow{"1,2,3,4"}, InvalidRow{"1.2.3.a"},
        InvalidRow{"a.b.c.d"},
        // Signs, spaces, control characters, suffixes.
        InvalidRow{"+1.2.3.4"}, InvalidRow{"-1.2.3.4"}, InvalidRow{"1.2.3.-0"},
        InvalidRow{"1.2.+3.4"}, InvalidRow{" 1.2.3.4"}, InvalidRow{"1.2.3.4 "},
        InvalidRow{"1.2. 3.4"}, InvalidRow{"1.2.3.4\n"}, InvalidRow{"\t1.2.3.4"},
        InvalidRow{std::string("1.2.3.4\0", 8)}, InvalidRow{std::string("1.2\0.3.4", 8)},
        InvalidRow{"1.2.3.4/8"}, InvalidRow{"1.2.3.4:80"}, InvalidRow{"1.2.3.4%eth0"},
        InvalidRow{"[1.2.3.4]"}, InvalidRow{"1.2.3.4x"},
        // Non-ASCII digits (Arabic-Indic, fullwidth) that Unicode-aware code may fold to ASCII.
        InvalidRow{"\xd9\xa1.\xd9\xa2.\xd9\xa3.\xd9\xa4"}, InvalidRow{"\xef\xbc\x91.2.3.4"},
        InvalidRow{"\xff.2.3.4"}),
    nameOf<InvalidRow>);

TEST(IpAddressV4, ParseV4RefusesIpv6Text) {
  EXPECT_FALSE(IpAddress::parseV4("::1").has_value());
  EXPECT_FALSE(IpAddress::parseV4("::ffff:1.2.3.4").has_value());
}

TEST(IpAddressV4, DefaultIsTheUnspecifiedIpv4Address) {
  EXPECT_EQ(IpAddress{}, addr("0.0.0.0"));
  EXPECT_TRUE(IpAddress{}.isV4());
  EXPECT_EQ(IpAddress{}.toString(), "0.0.0.0");
}

// ---- IPv6 ---------------------------------------------------------------------------------

struct V6Row {
  std::string text;
  std::array<std::uint16_t, 8> groups;
  std::string canonical;  // RFC 5952
};
std::ostream& operator<<(std::ostream& os, const V6Row& r) { return os << '"' << r.text << '"'; }

class ValidV6 : public testing::TestWithParam<V6Row> {};

TEST_P(ValidV6, ParsesToTheBytesAndFormatsPerRfc5952) {
  const V6Row& row = GetParam();
  const auto a = IpAddress::parseV6(row.text);
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->isV4());  // even "::ffff:1.2.3.4": same bytes as 1.2.3.4, different family
  EXPECT_EQ(a->bytes(), bytesOf(row.groups));
  EXPECT_EQ(a, IpAddress::parse(row.text));
  EXPECT_EQ(a, IpAddress::fromV6(bytesOf(row.groups)));
  EXPECT_FALSE(IpAddress::parseV4(row.text).has_value());

  char buf[IpAddress::kMaxTextLength + 1];
  const std::size_t length = a->format(buf);
  EXPECT_EQ(std::string(buf, length), row.canonical);
  EXPECT_EQ(buf[length], '\0');
  EXPECT_EQ(a->toString(), row.canonical);
  // The canonical text is itself accepted, as the same address, and is a fixed point.
  const auto again = IpAddress::parse(row.canonical);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *a);
  EXPECT_EQ(again->toString(), row.canonical);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ValidV6,
    testing::Values(
        V6Row{"::", {0, 0, 0, 0, 0, 0, 0, 0}, "::"}, V6Row{"::0", {0, 0, 0, 0, 0, 0, 0, 0}, "::"},
        V6Row{"::0:0", {0, 0, 0, 0, 0, 0, 0, 0}, "::"},
        V6Row{"0:0:0:0:0:0:0:0", {0, 0, 0, 0, 0, 0, 0, 0}, "::"},
        V6Row{"0000:0000:0000:0000:0000:0000:0000:0000", {0, 0, 0, 0, 0, 0, 0, 0}, "::"},
        V6Row{"::1", {0, 0, 0, 0, 0, 0, 0, 1}, "::1"},
        V6Row{"0:0:0:0:0:0:0:1", {0, 0, 0, 0, 0, 0, 0, 1}, "::1"},
        V6Row{"1::", {1, 0, 0, 0, 0, 0, 0, 0}, "1::"},
        V6Row{"1:0:0:0:0:0:0:0", {1, 0, 0, 0, 0, 0, 0, 0}, "1::"},
        V6Row{"2001:db8::1", {0x2001, 0xdb8, 0, 0, 0, 0, 0, 1}, "2001:db8::1"},
        V6Row{"2001:DB8::1", {0x2001, 0xdb8, 0, 0, 0, 0, 0, 1}, "2001:db8::1"},
        V6Row{"2001:0db8:0000:0000:0000:0000:0000:0001",
              {0x2001, 0xdb8, 0, 0, 0, 0, 0, 1},
              "2001:db8::1"},
        V6Row{"1:2:3:4:5:6:7:8", {1, 2, 3, 4, 5, 6, 7, 8}, "1:2:3:4:5:6:7:8"},
        V6Row{"abcd:EF01:2345:6789:ABCD:ef01:2345:6789",
              {0xabcd, 0xef01, 0x2345, 0x6789, 0xabcd, 0xef01, 0x2345, 0x6789},
              "abcd:ef01:2345:6789:abcd:ef01:2345:6789"},
        V6Row{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
              {0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff},
              "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
        // "::" standing for exactly one group; RFC 5952 §4.2.2 then writes the single 0.
        V6Row{"1:2:3:4:5:6:7::", {1, 2, 3, 4, 5, 6, 7, 0}, "1:2:3:4:5:6:7:0"},
        V6Row{"::2:3:4:5:6:7:8", {0, 2, 3, 4, 5, 6, 7, 8}, "0:2:3:4:5:6:7:8"},
        V6Row{"1:2:3::5:6:7:8", {1, 2, 3, 0, 5, 6, 7, 8}, "1:2:3:0:5:6:7:8"},
        V6Row{"2001:db8:0:1:1:1:1:1", {0x2001, 0xdb8, 0, 1, 1, 1, 1, 1}, "2001:db8:0:1:1:1:1:1"},
        // Longest run wins; the first on a tie (RFC 5952 §4.2.3).
        V6Row{"1:0:0:2:0:0:0:3", {1, 0, 0, 2, 0, 0, 0, 3}, "1:0:0:2::3"},
        V6Row{"1:0:0:2:0:0:3:4", {1, 0, 0, 2, 0, 0, 3, 4}, "1::2:0:0:3:4"},
        V6Row{"2001:db8:0:0:1:0:0:1", {0x2001, 0xdb8, 0, 0, 1, 0, 0, 1}, "2001:db8::1:0:0:1"},
        V6Row{"1:0:0:0:1:0:0:0", {1, 0, 0, 0, 1, 0, 0, 0}, "1::1:0:0:0"},
        V6Row{"0:0:1:0:0:0:0:0", {0, 0, 1, 0, 0, 0, 0, 0}, "0:0:1::"},
        V6Row{"0:0:1:0:0:1:0:0", {0, 0, 1, 0, 0, 1, 0, 0}, "::1:0:0:1:0:0"},
        V6Row{"0:1:0:1:0:1:0:1", {0, 1, 0, 1, 0, 1, 0, 1}, "0:1:0:1:0:1:0:1"},
        V6Row{"2001:db8::0:1", {0x2001, 0xdb8, 0, 0, 0, 0, 0, 1}, "2001:db8::1"},
        V6Row{"0001:0002::000a", {1, 2, 0, 0, 0, 0, 0, 0xa}, "1:2::a"},
        V6Row{"fe80::1", {0xfe80, 0, 0, 0, 0, 0, 0, 1}, "fe80::1"},
        // Trailing dotted quad: the last 32 bits. Only the mapped block is formatted with it.
        V6Row{"::ffff:1.2.3.4", {0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304}, "::ffff:1.2.3.4"},
        V6Row{"::FFFF:7f00:1", {0, 0, 0, 0, 0, 0xffff, 0x7f00, 1}, "::ffff:127.0.0.1"},
        V6Row{"0:0:0:0:0:ffff:127.0.0.1", {0, 0, 0, 0, 0, 0xffff, 0x7f00, 1}, "::ffff:127.0.0.1"},
        V6Row{"::ffff:0:0", {0, 0, 0, 0, 0, 0xffff, 0, 0}, "::ffff:0.0.0.0"},
        V6Row{"::ffff:255.255.255.255",
              {0, 0, 0, 0, 0, 0xffff, 0xffff, 0xffff},
              "::ffff:255.255.255.255"},
        V6Row{
            "::ffff:a9fe:a9fe", {0, 0, 0, 0, 0, 0xffff, 0xa9fe, 0xa9fe}, "::ffff:169.254.169.254"},
        V6Row{"::127.0.0.1", {0, 0, 0, 0, 0, 0, 0x7f00, 1}, "::7f00:1"},
        V6Row{"::0.0.0.0", {0, 0, 0, 0, 0, 0, 0, 0}, "::"},
        V6Row{"::0.0.0.1", {0, 0, 0, 0, 0, 0, 0, 1}, "::1"},
        V6Row{"::1.2.3.4", {0, 0, 0, 0, 0, 0, 0x0102, 0x0304}, "::102:304"},
        V6Row{
            "64:ff9b::192.0.2.33", {0x64, 0xff9b, 0, 0, 0, 0, 0xc000, 0x221}, "64:ff9b::c000:221"},
        V6Row{"1:2:3:4:5:6:1.2.3.4", {1, 2, 3, 4, 5, 6, 0x0102, 0x0304}, "1:2:3:4:5:6:102:304"},
        V6Row{"1::1.2.3.4", {1, 0, 0, 0, 0, 0, 0x0102, 0x0304}, "1::102:304"},
        V6Row{"1:2:3:4:5::1.2.3.4", {1, 2, 3, 4, 5, 0, 0x0102, 0x0304}, "1:2:3:4:5:0:102:304"},
        V6Row{"::ffff:ffff", {0, 0, 0, 0, 0, 0, 0xffff, 0xffff}, "::ffff:ffff"},
        // The longest texts the parser accepts, kMaxTextLength characters.
        V6Row{"FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:255.255.255.255",
              {0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff},
              "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
        V6Row{"0000:0000:0000:0000:0000:ffff:255.255.255.255",
              {0, 0, 0, 0, 0, 0xffff, 0xffff, 0xffff},
              "::ffff:255.255.255.255"}),
    nameOf<V6Row>);

class InvalidV6 : public testing::TestWithParam<InvalidRow> {};

TEST_P(InvalidV6, IsRefusedByBothParsers) {
  EXPECT_FALSE(IpAddress::parseV6(GetParam().text).has_value());
  EXPECT_FALSE(IpAddress::parse(GetParam().text).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Rows, InvalidV6,
    testing::Values(
        // Colons.
        InvalidRow{":"}, InvalidRow{":::"}, InvalidRow{"::::"}, InvalidRow{"1::2::3"},
        InvalidRow{"::1::"}, InvalidRow{"1:::2"}, InvalidRow{"1:::"}, InvalidRow{":1::2"},
        InvalidRow{":1:2:3:4:5:6:7:8"}, InvalidRow{"1:2:3:4:5:6:7:8:"}, InvalidRow{"1::2:"},
        InvalidRow{"1:"}, InvalidRow{":1"}, InvalidRow{"1:2"},
        // Group count: nine groups, seven without "::", eight plus a "::" that stands for none.
        InvalidRow{"1:2:3:4:5:6:7:8:9"}, InvalidRow{"1:2:3:4:5:6:7"},
        InvalidRow{"1:2:3:4:5:6:7:8::"}, InvalidRow{"::1:2:3:4:5:6:7:8"},
        InvalidRow{"1:2:3:4::5:6:7:8"},
        // Group size.
        InvalidRow{"12345::"}, InvalidRow{"::12345"}, InvalidRow{"00000::1"}, InvalidRow{"::fffff"},
        InvalidRow{"0000:0000:0000:0000:0000:0000:0000:00000"},
        // Brackets and zones belong to the authority, not the address.
        InvalidRow{"[::1]"}, InvalidRow{"[::1]:80"}, InvalidRow{"[::1"}, InvalidRow{"::1]"},
        InvalidRow{"::1%eth0"}, InvalidRow{"fe80::1%25eth0"}, InvalidRow{"fe80::1%1"},
        InvalidRow{"::1%"}, InvalidRow{"::ffff:1.2.3.4%eth0"},
        // Embedded dotted quads: canonical, complete, last, and within eight groups.
        InvalidRow{"::ffff:0177.0.0.1"}, InvalidRow{"::ffff:01.2.3.4"}, InvalidRow{"::ffff:127.1"},
        InvalidRow{"::ffff:2130706433"}, InvalidRow{"::ffff:1.2.3"}, InvalidRow{"::ffff:1.2.3.4.5"},
        InvalidRow{"::ffff:256.0.0.0"}, InvalidRow{"::ffff:1.2.3.4."}, InvalidRow{"::ffff:.1.2.3"},
        InvalidRow{"::ffff:a.b.c.d"}, InvalidRow{"::ffff:0x7f.0.0.1"}, InvalidRow{"::1.2.3.4:5"},
        InvalidRow{"::1.2.3.4::"}, InvalidRow{"1.2.3.4::"}, InvalidRow{"1.2.3.4::1"},
        InvalidRow{"1:2:3:4:5:6:7:1.2.3.4"}, InvalidRow{"1:2:3:4:5:6:7:8:1.2.3.4"},
        InvalidRow{"::1:2:3:4:5:6:1.2.3.4"}, InvalidRow{"1:2:3:4:5:1.2.3.4"},
        InvalidRow{"::ffff:1.2.3.4/96"},
        // Characters.
        InvalidRow{"g::1"}, InvalidRow{"::g"}, InvalidRow{" ::1"}, InvalidRow{"::1 "},
        InvalidRow{"::1\n"}, InvalidRow{"::-1"}, InvalidRow{"::+1"}, InvalidRow{"0x1::"},
        InvalidRow{"2001:db8::1/64"}, InvalidRow{std::string("::1\0", 4)},
        InvalidRow{std::string(":\0:1", 4)}, InvalidRow{"::\xef\xbc\x91"}, InvalidRow{"::\x80"},
        InvalidRow{"1;2::"}, InvalidRow{"1.2::"},
        // Longer than any literal.
        InvalidRow{"FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:255.255.255.255 "},
        InvalidRow{"0000:0000:0000:0000:0000:0000:0000:0000:"}),
    nameOf<InvalidRow>);

TEST(IpAddressV6, ParseV6RefusesIpv4Text) {
  EXPECT_FALSE(IpAddress::parseV6("1.2.3.4").has_value());
  EXPECT_FALSE(IpAddress::parseV6("").has_value());
}

TEST(IpAddressFamilies, MappedIpv6AndIpv4ShareBytesButDifferAsAddresses) {
  const IpAddress v4 = addr("127.0.0.1");
  const IpAddress v6 = addr("::ffff:127.0.0.1");
  EXPECT_TRUE(v4.isV4());
  EXPECT_FALSE(v6.isV4());
  EXPECT_EQ(v4.bytes(), v6.bytes());
  EXPECT_NE(v4, v6);
  EXPECT_EQ(v4.toString(), "127.0.0.1");
  EXPECT_EQ(v6.toString(), "::ffff:127.0.0.1");
}

TEST(IpAddressFamilies, OrdersByFamilyThenBytes) {
  EXPECT_LT(addr("1.2.3.4"), addr("1.2.3.5"));
  EXPECT_LT(addr("::1"), addr("::2"));
  EXPECT_NE(addr("1.2.3.4") <=> addr("::ffff:1.2.3.4"), std::strong_ordering::equal);
}

TEST(IpAddressFormat, RoundTripsEveryZeroRunPattern) {
  // Every combination of zero and 0xffff groups: covers every zero-run position and length.
  for (unsigned pattern = 0; pattern < 256; ++pattern) {
    std::array<std::uint8_t, 16> bytes{};
    for (std::size_t g = 0; g < 8; ++g) {
      if ((pattern >> g) & 1) {
        bytes[2 * g] = 0xff;
        bytes[2 * g + 1] = 0xff;
      }
    }
    const IpAddress a = IpAddress::fromV6(bytes);
    char buf[IpAddress::kMaxTextLength + 1];
    const std::size_t length = a.format(buf);
    ASSERT_LE(length, IpAddress::kMaxTextLength);
    const auto again = IpAddress::parse(std::string(buf, length));
    ASSERT_TRUE(again.has_value()) << buf;
    EXPECT_EQ(*again, a) << buf;
    // RFC 5952 never leaves a run of two or more zero groups uncompressed beside a "::" that
    // compresses a shorter one; a cheap proxy for that: no ":0:0:" once "::" is absent.
    if (std::string(buf).find("::") == std::string::npos) {
      EXPECT_EQ(std::string(buf).find(":0:0"), std::string::npos) << buf;
      EXPECT_NE(std::string(buf).rfind("0:0:", 0), 0u) << buf;
    }
  }
}

// ---- CIDR ---------------------------------------------------------------------------------

struct CidrRow {
  std::string text;
  std::string canonical;
  int prefix_length;
  bool v4;
};
std::ostream& operator<<(std::ostream& os, const CidrRow& r) { return os << '"' << r.text << '"'; }

class ValidCidr : public testing::TestWithParam<CidrRow> {};

TEST_P(ValidCidr, ParsesAndPrintsCanonically) {
  const CidrRow& row = GetParam();
  Cidr::ParseError why = Cidr::ParseError::BadAddress;
  const auto cidr = Cidr::parse(row.text, &why);
  ASSERT_TRUE(cidr.has_value());
  EXPECT_EQ(cidr->prefixLength(), row.prefix_length);
  EXPECT_EQ(cidr->base().isV4(), row.v4);
  EXPECT_EQ(cidr->toString(), row.canonical);
  // A block contains its own base, except a block wider than an IPv4-carrying prefix whose
  // base lies in it: ::/0 does not open :: (unspecified) through ::/96.
  bool wide_over_embedding = !row.v4 && row.prefix_length < 96 &&
                             cidr->base() == *IpAddress::parse("::");
  EXPECT_EQ(cidr->contains(cidr->base()), !wide_over_embedding);
  EXPECT_EQ(Cidr::parse(row.canonical), cidr);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ValidCidr,
    testing::Values(
        CidrRow{"10.0.0.0/8", "10.0.0.0/8", 8, true}, CidrRow{"0.0.0.0/0", "0.0.0.0/0", 0, true},
        CidrRow{"1.2.3.4", "1.2.3.4/32", 32, true}, CidrRow{"1.2.3.4/32", "1.2.3.4/32", 32, true},
        CidrRow{"172.16.0.0/12", "172.16.0.0/12", 12, true},
        CidrRow{"128.0.0.0/1", "128.0.0.0/1", 1, true},
        CidrRow{"169.254.169.254/32", "169.254.169.254/32", 32, true},
        CidrRow{"fd00::/8", "fd00::/8", 8, false}, CidrRow{"FD00:0::/8", "fd00::/8", 8, false},
        CidrRow{"::/0", "::/0", 0, false}, CidrRow{"::1", "::1/128", 128, false},
        CidrRow{"2001:DB8::/32", "2001:db8::/32", 32, false},
        CidrRow{"2001:db8::1/128", "2001:db8::1/128", 128, false},
        CidrRow{"8000::/1", "8000::/1", 1, false}, CidrRow{"fe80::/10", "fe80::/10", 10, false},
        CidrRow{"::ffff:0:0/96", "::ffff:0.0.0.0/96", 96, false},
        CidrRow{"::ffff:10.0.0.0/104", "::ffff:10.0.0.0/104", 104, false}),
    nameOf<CidrRow>);

struct BadCidrRow {
  std::string text;
  Cidr::ParseError why;
};
std::ostream& operator<<(std::ostream& os, const BadCidrRow& r) {
  return os << '"' << r.text << '"';
}

class InvalidCidr : public testing::TestWithParam<BadCidrRow> {};

TEST_P(InvalidCidr, IsRefusedWithTheReason) {
  const BadCidrRow& row = GetParam();
  Cidr::ParseError why = row.why == Cidr::ParseError::BadAddress ? Cidr::ParseError::BadPrefix
                                                                 : Cidr::ParseError::BadAddress;
  EXPECT_FALSE(Cidr::parse(row.text, &why).has_value());
  EXPECT_EQ(why, row.why);
  EXPECT_FALSE(Cidr::parse(row.text).has_value());  // `why` is optional
}

using E = Cidr::ParseError;
INSTANTIATE_TEST_SUITE_P(
    Rows, InvalidCidr,
    testing::Values(
        // Host bits: the operator must write the network they mean.
        BadCidrRow{"10.0.0.1/8", E::HostBitsSet}, BadCidrRow{"1.2.3.5/31", E::HostBitsSet},
        BadCidrRow{"0.0.0.1/0", E::HostBitsSet}, BadCidrRow{"fd00::1/8", E::HostBitsSet},
        BadCidrRow{"::1/127", E::HostBitsSet}, BadCidrRow{"2001:db8:8000::/32", E::HostBitsSet},
        BadCidrRow{"::ffff:10.0.0.1/104", E::HostBitsSet},
        // Prefix spelling and range.
        BadCidrRow{"10.0.0.0/33", E::BadPrefix}, BadCidrRow{"::/129", E::BadPrefix},
        BadCidrRow{"10.0.0.0/08", E::BadPrefix}, BadCidrRow{"10.0.0.0/00", E::BadPrefix},
        BadCidrRow{"10.0.0.0/", E::BadPrefix}, BadCidrRow{"10.0.0.0/-1", E::BadPrefix},
        BadCidrRow{"10.0.0.0/+8", E::BadPrefix}, BadCidrRow{"10.0.0.0/8/8", E::BadPrefix},
        BadCidrRow{"10.0.0.0/ 8", E::BadPrefix}, BadCidrRow{"10.0.0.0/8 ", E::BadPrefix},
        BadCidrRow{"10.0.0.0/0x8", E::BadPrefix}, BadCidrRow{"10.0.0.0/1000", E::BadPrefix},
        BadCidrRow{"10.0.0.0/4294967304", E::BadPrefix},  // 2^32 + 8: no wrap to /8
        BadCidrRow{"::/1280", E::BadPrefix}, BadCidrRow{"10.0.0.0/255.0.0.0", E::BadPrefix},
        // Address.
        BadCidrRow{"010.0.0.0/8", E::BadAddress}, BadCidrRow{"10/8", E::BadAddress},
        BadCidrRow{"10.0.0/8", E::BadAddress}, BadCidrRow{"/8", E::BadAddress},
        BadCidrRow{"", E::BadAddress}, BadCidrRow{"/", E::BadAddress},
        BadCidrRow{"[::1]/128", E::BadAddress}, BadCidrRow{"fe80::%eth0/10", E::BadAddress},
        BadCidrRow{" 10.0.0.0/8", E::BadAddress}, BadCidrRow{"example.com/8", E::BadAddress}),
    [](const testing::TestParamInfo<BadCidrRow>& param_info) {
      return rowName(param_info.index, param_info.param.text);
    });

struct ContainsRow {
  std::string cidr;
  std::string address;
  bool contains;
};
std::ostream& operator<<(std::ostream& os, const ContainsRow& r) {
  return os << r.cidr << " contains " << r.address;
}

class CidrContains : public testing::TestWithParam<ContainsRow> {};

TEST_P(CidrContains, ComparesTheSixteenByteForms) {
  const ContainsRow& row = GetParam();
  const auto cidr = Cidr::parse(row.cidr);
  ASSERT_TRUE(cidr.has_value());
  EXPECT_EQ(cidr->contains(addr(row.address)), row.contains);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, CidrContains,
    testing::Values(
        ContainsRow{"127.0.0.0/8", "127.0.0.1", true},
        ContainsRow{"127.0.0.0/8", "127.0.0.0", true},
        ContainsRow{"127.0.0.0/8", "127.255.255.255", true},
        ContainsRow{"127.0.0.0/8", "126.255.255.255", false},
        ContainsRow{"127.0.0.0/8", "128.0.0.0", false},
        // A v4 block covers the mapped AAAA form of its addresses ...
        ContainsRow{"127.0.0.0/8", "::ffff:127.0.0.1", true},
        ContainsRow{"0.0.0.0/0", "::ffff:1.2.3.4", true}, ContainsRow{"0.0.0.0/0", "1.2.3.4", true},
        // ... but not other IPv6 forms: those are classification's business.
        ContainsRow{"127.0.0.0/8", "::127.0.0.1", false},
        ContainsRow{"127.0.0.0/8", "64:ff9b::7f00:1", false},
        ContainsRow{"127.0.0.0/8", "2002:7f00:1::", false}, ContainsRow{"0.0.0.0/0", "::1", false},
        ContainsRow{"0.0.0.0/0", "::", false}, ContainsRow{"0.0.0.0/0", "::fffe:0:0", false},
        // A v6 block covers IPv4 only when it is written inside the mapped space: opening
        // "all IPv6" (::/0) does not open IPv4, mapped or not.
        ContainsRow{"::ffff:0:0/96", "10.0.0.1", true},
        ContainsRow{"::ffff:0:0/96", "::ffff:1.2.3.4", true},
        ContainsRow{"::ffff:10.0.0.0/104", "10.1.2.3", true},
        ContainsRow{"::ffff:10.0.0.0/104", "11.1.2.3", false},
        ContainsRow{"::/0", "1.2.3.4", false}, ContainsRow{"::/0", "::ffff:10.0.0.1", false},
        ContainsRow{"::/0", "2606:4700::1111", true},
        ContainsRow{"::/1", "1.2.3.4", false}, ContainsRow{"::/95", "1.2.3.4", false},
        ContainsRow{"8000::/1", "1.2.3.4", false},
        // Nor NAT64, 6to4, compatible or Teredo forms: only a block inside their own prefix.
        ContainsRow{"::/0", "64:ff9b::a9fe:a9fe", false},
        ContainsRow{"::/0", "64:ff9b::7f00:1", false},
        ContainsRow{"::/0", "::7f00:1", false}, ContainsRow{"::/0", "::1", false},
        ContainsRow{"2000::/3", "2002:7f00:1::", false},
        ContainsRow{"2000::/3", "2002:a9fe:a9fe::", false},
        ContainsRow{"2000::/3", "2001::1", false},
        ContainsRow{"::/0", "64:ff9b:1::a00:1", false},
        ContainsRow{"2000::/3", "2606:4700::1111", true},
        ContainsRow{"64:ff9b::/96", "64:ff9b::a9fe:a9fe", true},
        ContainsRow{"64:ff9b::a9fe:a9fe/128", "64:ff9b::a9fe:a9fe", true},
        ContainsRow{"64:ff9b::/64", "64:ff9b::a9fe:a9fe", false},
        ContainsRow{"2002::/16", "2002:7f00:1::", true},
        ContainsRow{"2002:7f00::/24", "2002:7f00:1::", true},
        ContainsRow{"::/96", "::7f00:1", true},
        ContainsRow{"::1/128", "::1", true},
        ContainsRow{"169.254.0.0/16", "64:ff9b::a9fe:a9fe", false},
        ContainsRow{"10.0.0.1", "10.0.0.1", true}, ContainsRow{"10.0.0.1", "10.0.0.2", false},
        ContainsRow{"10.0.0.1", "::ffff:10.0.0.1", true},
        ContainsRow{"172.16.0.0/12", "172.31.255.255", true},
        ContainsRow{"172.16.0.0/12", "172.32.0.0", false},
        ContainsRow{"172.16.0.0/12", "172.15.255.255", false},
        ContainsRow{"1.2.3.4/30", "1.2.3.7", true}, ContainsRow{"1.2.3.4/30", "1.2.3.8", false},
        ContainsRow{"1.2.3.4/30", "1.2.3.3", false},
        ContainsRow{"2001:db8::/32", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true},
        ContainsRow{"2001:db8::/32", "2001:db9::", false},
        ContainsRow{"2001:db8::/32", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", false},
        ContainsRow{"2001:db8::/33", "2001:db8:7fff::", true},
        ContainsRow{"2001:db8::/33", "2001:db8:8000::", false},
        ContainsRow{"fc00::/7", "fdff::1", true}, ContainsRow{"fc00::/7", "fe00::", false},
        ContainsRow{"fc00::/7", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false},
        ContainsRow{"::1", "::1", true}, ContainsRow{"::1", "::", false},
        ContainsRow{"::1", "0.0.0.1", false}, ContainsRow{"2001:db8::1/128", "2001:db8::1", true},
        ContainsRow{"2001:db8::1/128", "2001:db8::", false}),
    [](const testing::TestParamInfo<ContainsRow>& param_info) {
      return rowName(param_info.index, param_info.param.cidr + "_" + param_info.param.address);
    });

TEST(CidrEquality, FamilyIsPartOfTheBlock) {
  // Same bits, different family: written differently, so different blocks.
  EXPECT_NE(Cidr::parse("10.0.0.0/8"), Cidr::parse("::ffff:10.0.0.0/104"));
  EXPECT_EQ(Cidr::parse("10.0.0.0/8"), Cidr::parse("10.0.0.0/8"));
  EXPECT_NE(Cidr::parse("10.0.0.0/8"), Cidr::parse("10.0.0.0/9"));
}

// ---- Endpoint -----------------------------------------------------------------------------

struct EndpointRow {
  std::string text;
  bool port_required;
  std::uint16_t default_port;
  std::optional<std::string> expected;  // toString(), or nullopt when refused
};
std::ostream& operator<<(std::ostream& os, const EndpointRow& r) {
  return os << '"' << r.text << "\" port_required=" << r.port_required;
}

class EndpointParse : public testing::TestWithParam<EndpointRow> {};

TEST_P(EndpointParse, AcceptsOnlyIpLiteralsWithStrictPorts) {
  const EndpointRow& row = GetParam();
  const auto endpoint = Endpoint::parse(row.text, row.port_required, row.default_port);
  if (!row.expected) {
    EXPECT_FALSE(endpoint.has_value()) << endpoint->toString();
    return;
  }
  ASSERT_TRUE(endpoint.has_value());
  EXPECT_EQ(endpoint->toString(), *row.expected);
  EXPECT_EQ(Endpoint::parse(*row.expected), endpoint);
}

const std::optional<std::string> kRefused;

INSTANTIATE_TEST_SUITE_P(
    Rows, EndpointParse,
    testing::Values(
        EndpointRow{"1.2.3.4:80", true, 0, "1.2.3.4:80"},
        EndpointRow{"127.0.0.1:3128", true, 0, "127.0.0.1:3128"},
        EndpointRow{"0.0.0.0:1", true, 0, "0.0.0.0:1"},
        EndpointRow{"255.255.255.255:65535", true, 0, "255.255.255.255:65535"},
        EndpointRow{"[::1]:53", true, 0, "[::1]:53"}, EndpointRow{"[::]:443", true, 0, "[::]:443"},
        EndpointRow{"[0:0:0:0:0:0:0:1]:53", true, 0, "[::1]:53"},
        EndpointRow{"[2001:DB8::1]:8080", true, 0, "[2001:db8::1]:8080"},
        EndpointRow{"[::FFFF:1.2.3.4]:443", true, 0, "[::ffff:1.2.3.4]:443"},
        // Optional port.
        EndpointRow{"1.2.3.4", false, 3128, "1.2.3.4:3128"},
        EndpointRow{"::1", false, 53, "[::1]:53"}, EndpointRow{"[::1]", false, 53, "[::1]:53"},
        EndpointRow{"1.2.3.4:80", false, 3128, "1.2.3.4:80"},
        EndpointRow{"[::1]:80", false, 3128, "[::1]:80"},
        // Unbracketed IPv6 never carries a port: "::1:80" is the address ::1:80.
        EndpointRow{"::1:80", false, 3128, "[::1:80]:3128"},
        // Port required.
        EndpointRow{"1.2.3.4", true, 3128, kRefused}, EndpointRow{"::1", true, 53, kRefused},
        EndpointRow{"[::1]", true, 53, kRefused}, EndpointRow{"::1:80", true, 0, kRefused},
        // Port spellings: glibc truncates 65979 to 443; c-ares reads 0x1bb as
        // 443 and 0443 as 291.
        EndpointRow{"1.2.3.4:0", true, 0, kRefused}, EndpointRow{"1.2.3.4:00", true, 0, kRefused},
        EndpointRow{"1.2.3.4:080", true, 0, kRefused},
        EndpointRow{"1.2.3.4:0443", true, 0, kRefused},
        EndpointRow{"1.2.3.4:+443", true, 0, kRefused},
        EndpointRow{"1.2.3.4:-1", true, 0, kRefused},
        EndpointRow{"1.2.3.4:0x1bb", true, 0, kRefused},
        EndpointRow{"1.2.3.4:https", true, 0, kRefused},
        EndpointRow{"1.2.3.4:443 ", true, 0, kRefused},
        EndpointRow{"1.2.3.4: 443", true, 0, kRefused},
        EndpointRow{"1.2.3.4:65536", true, 0, kRefused},
        EndpointRow{"1.2.3.4:65979", true, 0, kRefused},
        EndpointRow{"1.2.3.4:100000", true, 0, kRefused},
        EndpointRow{"1.2.3.4:4295032832", true, 0, kRefused},
        EndpointRow{"1.2.3.4:", true, 0, kRefused}, EndpointRow{"1.2.3.4:", false, 1, kRefused},
        EndpointRow{"1.2.3.4:80:80", true, 0, kRefused},
        EndpointRow{"1.2.3.4:80/", true, 0, kRefused},
        EndpointRow{std::string("1.2.3.4:80\0", 11), true, 0, kRefused},
        EndpointRow{"1.2.3.4:\xd9\xa8\xd9\xa0", true, 0, kRefused},
        EndpointRow{"[::1]:0", false, 1, kRefused}, EndpointRow{"[::1]:", false, 1, kRefused},
        // Brackets.
        EndpointRow{"[::1]80", true, 0, kRefused}, EndpointRow{"[::1", false, 1, kRefused},
        EndpointRow{"::1]", false, 1, kRefused}, EndpointRow{"[::1]]:80", true, 0, kRefused},
        EndpointRow{"[[::1]]:80", true, 0, kRefused}, EndpointRow{"[]:80", true, 0, kRefused},
        EndpointRow{"[1.2.3.4]:80", true, 0, kRefused},
        EndpointRow{"[1.2.3.4]", false, 1, kRefused},
        EndpointRow{"[::1%eth0]:80", true, 0, kRefused},
        EndpointRow{"[fe80::1%25eth0]:80", true, 0, kRefused},
        EndpointRow{"[::1]:53x", true, 0, kRefused},
        // Only literals: never names, never other spellings of addresses.
        EndpointRow{"localhost:80", true, 0, kRefused},
        EndpointRow{"example.com:443", true, 0, kRefused},
        EndpointRow{"0177.0.0.1:80", true, 0, kRefused}, EndpointRow{"127.1:80", true, 0, kRefused},
        EndpointRow{"2130706433:80", true, 0, kRefused},
        EndpointRow{" 1.2.3.4:80", true, 0, kRefused}, EndpointRow{":80", true, 0, kRefused},
        EndpointRow{"", true, 0, kRefused}, EndpointRow{"", false, 1, kRefused}),
    [](const testing::TestParamInfo<EndpointRow>& param_info) {
      return rowName(param_info.index, param_info.param.text);
    });

struct OverlapRow {
  std::string a;
  std::string b;
  bool overlaps;
};
std::ostream& operator<<(std::ostream& os, const OverlapRow& r) {
  return os << r.a << " vs " << r.b;
}

class EndpointOverlaps : public testing::TestWithParam<OverlapRow> {};

TEST_P(EndpointOverlaps, IsSymmetricAndFollowsWildcardBinds) {
  const OverlapRow& row = GetParam();
  const auto a = Endpoint::parse(row.a);
  const auto b = Endpoint::parse(row.b);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(Endpoint::overlaps(*a, *b), row.overlaps);
  EXPECT_EQ(Endpoint::overlaps(*b, *a), row.overlaps);
  EXPECT_TRUE(Endpoint::overlaps(*a, *a));
}

INSTANTIATE_TEST_SUITE_P(
    Rows, EndpointOverlaps,
    testing::Values(
        OverlapRow{"1.2.3.4:80", "1.2.3.4:80", true}, OverlapRow{"1.2.3.4:80", "1.2.3.4:81", false},
        OverlapRow{"1.2.3.4:80", "1.2.3.5:80", false}, OverlapRow{"0.0.0.0:80", "1.2.3.4:80", true},
        OverlapRow{"0.0.0.0:80", "1.2.3.4:81", false}, OverlapRow{"0.0.0.0:80", "0.0.0.0:80", true},
        OverlapRow{"0.0.0.0:80", "[::1]:80", false},
        OverlapRow{"0.0.0.0:80", "[2001:db8::1]:80", false},
        // Linux dual-stack: [::] takes the port on IPv4 addresses too.
        OverlapRow{"[::]:80", "1.2.3.4:80", true}, OverlapRow{"[::]:80", "0.0.0.0:80", true},
        OverlapRow{"[::]:80", "[::1]:80", true}, OverlapRow{"[::]:80", "[::]:80", true},
        OverlapRow{"[::]:80", "[::]:81", false}, OverlapRow{"[::]:80", "1.2.3.4:81", false},
        OverlapRow{"[::1]:80", "127.0.0.1:80", false}, OverlapRow{"[::1]:80", "[::2]:80", false},
        // An AF_INET6 socket bound to ::ffff:a.b.c.d is bound to a.b.c.d.
        OverlapRow{"[::ffff:1.2.3.4]:80", "1.2.3.4:80", true},
        OverlapRow{"[::ffff:0.0.0.0]:80", "1.2.3.4:80", true},
        OverlapRow{"0.0.0.0:80", "[::ffff:1.2.3.4]:80", true},
        OverlapRow{"[::ffff:1.2.3.4]:80", "1.2.3.5:80", false},
        // The compatible form is an ordinary IPv6 address to the kernel.
        OverlapRow{"0.0.0.0:80", "[::1.2.3.4]:80", false}),
    [](const testing::TestParamInfo<OverlapRow>& param_info) {
      return rowName(param_info.index, param_info.param.a + "_" + param_info.param.b);
    });

TEST(EndpointWildcard, IsTheUnspecifiedAddressOfEitherFamily) {
  EXPECT_TRUE(Endpoint::parse("0.0.0.0:1")->isWildcard());
  EXPECT_TRUE(Endpoint::parse("[::]:1")->isWildcard());
  EXPECT_TRUE(Endpoint::parse("[::0.0.0.0]:1")->isWildcard());
  // Linux binds ::ffff:0.0.0.0 as INADDR_ANY.
  EXPECT_TRUE(Endpoint::parse("[::ffff:0.0.0.0]:1")->isWildcard());
  EXPECT_FALSE(Endpoint::parse("0.0.0.1:1")->isWildcard());
  EXPECT_FALSE(Endpoint::parse("[::1]:1")->isWildcard());
  EXPECT_FALSE(Endpoint::parse("127.0.0.1:1")->isWildcard());
}

TEST(EndpointEquality, FamilyCounts) {
  EXPECT_NE(Endpoint::parse("[::ffff:1.2.3.4]:80"), Endpoint::parse("1.2.3.4:80"));
  EXPECT_EQ(Endpoint::parse("[::1]:80"), Endpoint::parse("[0::1]:80"));
}

}  // namespace
}  // namespace sluice::policy
