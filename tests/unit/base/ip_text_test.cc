// The one writer of IP address text: policy/ prints addresses with it and certs/ accepts a
// certificate host only in the spelling it writes, so every edge of RFC 5952 is pinned here.
#include "base/ip_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {
namespace {

std::string text(std::vector<std::uint8_t> octets) {
  char out[kMaxIpTextLength + 1];
  std::fill(std::begin(out), std::end(out), 'x');
  const std::size_t length = writeIpText(octets, out);
  EXPECT_EQ(out[length], '\0') << "NUL-terminated";
  EXPECT_EQ(std::string_view(out).size(), length);
  return std::string(out, length);
}

std::vector<std::uint8_t> v6(std::array<std::uint16_t, 8> groups) {
  std::vector<std::uint8_t> octets;
  for (std::uint16_t g : groups) {
    octets.push_back(static_cast<std::uint8_t>(g >> 8));
    octets.push_back(static_cast<std::uint8_t>(g & 0xff));
  }
  return octets;
}

struct Row {
  const char* name;
  std::vector<std::uint8_t> octets;
  const char* want;
};

class IpTextTest : public ::testing::TestWithParam<Row> {};

TEST_P(IpTextTest, WritesTheCanonicalSpelling) {
  EXPECT_EQ(text(GetParam().octets), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, IpTextTest,
    ::testing::Values(
        Row{"V4Zero", {0, 0, 0, 0}, "0.0.0.0"},
        Row{"V4NoLeadingZeros", {10, 0, 7, 1}, "10.0.7.1"},
        Row{"V4Widest", {255, 255, 255, 255}, "255.255.255.255"},
        Row{"V6Unspecified", v6({0, 0, 0, 0, 0, 0, 0, 0}), "::"},
        Row{"V6Loopback", v6({0, 0, 0, 0, 0, 0, 0, 1}), "::1"},
        Row{"V6TrailingRun", v6({1, 0, 0, 0, 0, 0, 0, 0}), "1::"},
        Row{"V6LowerCaseNoLeadingZeros", v6({0x2001, 0xdb8, 0, 0, 0, 0, 0xABC, 1}),
            "2001:db8::abc:1"},
        // RFC 5952 §4.2.2: a single zero group is not compressed.
        Row{"V6SingleZeroGroupStays", v6({0x2001, 0xdb8, 0, 1, 1, 1, 1, 1}),
            "2001:db8:0:1:1:1:1:1"},
        // §4.2.3: the longest run, the first of equal ones.
        Row{"V6LongestRunWins", v6({1, 0, 0, 2, 0, 0, 0, 3}), "1:0:0:2::3"},
        Row{"V6FirstOfEqualRuns", v6({1, 0, 0, 2, 3, 0, 0, 4}), "1::2:3:0:0:4"},
        Row{"V6NoZeros", v6({0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff}),
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
        // §5: the mapped block with a dotted quad; the deprecated compatible block in hex.
        Row{"V6MappedAsQuad", v6({0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304}), "::ffff:1.2.3.4"},
        Row{"V6MappedZero", v6({0, 0, 0, 0, 0, 0xffff, 0, 0}), "::ffff:0.0.0.0"},
        Row{"V6CompatibleInHex", v6({0, 0, 0, 0, 0, 0, 0x0102, 0x0304}), "::102:304"},
        Row{"OtherSizesWriteNothing", {1, 2, 3}, ""},
        Row{"EmptyWritesNothing", {}, ""}),
    [](const ::testing::TestParamInfo<Row>& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace sluice
