// The one set of ASCII classes and token rules (base/ascii.h): every byte against the sets as
// RFC 9110 and the C locale's "C" spell them out, so that a parser of hostile bytes gets the
// same answer from policy/, proxy/http/ and the commands, whatever locale the process runs in.
#include "base/ascii.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace sluice::ascii {
namespace {

constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kLower = "abcdefghijklmnopqrstuvwxyz";
constexpr std::string_view kUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
// tchar of RFC 9110 §5.6.2, besides DIGIT and ALPHA.
constexpr std::string_view kTcharPunctuation = "!#$%&'*+-.^_`|~";

bool in(std::string_view set, int c) {
  return c != 0 && set.find(static_cast<char>(c)) != std::string_view::npos;
}

TEST(Ascii, ClassesOfEveryByte) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const char ch = static_cast<char>(c);
    EXPECT_EQ(isDigit(ch), in(kDigits, c));
    EXPECT_EQ(isLower(ch), in(kLower, c));
    EXPECT_EQ(isUpper(ch), in(kUpper, c));
    EXPECT_EQ(isAlpha(ch), in(kLower, c) || in(kUpper, c));
    EXPECT_EQ(isAlnum(ch), in(kLower, c) || in(kUpper, c) || in(kDigits, c));
    EXPECT_EQ(isHexDigit(ch), in(kDigits, c) || in("abcdefABCDEF", c));
  }
}

TEST(Ascii, ToLowerFoldsOnlyAsciiCapitals) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const char ch = static_cast<char>(c);
    const char want = in(kUpper, c) ? kLower[kUpper.find(ch)] : ch;
    EXPECT_EQ(toLower(ch), want);
  }
  // Latin-1 and UTF-8 capitals are bytes like any other: 'À' (0xc0) stays.
  EXPECT_EQ(toLower('\xc0'), '\xc0');
}

TEST(Ascii, HexValueOfEveryByte) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const char ch = static_cast<char>(c);
    int want = -1;
    if (in(kDigits, c)) {
      want = c - '0';
    } else if (in("abcdef", c)) {
      want = c - 'a' + 10;
    } else if (in("ABCDEF", c)) {
      want = c - 'A' + 10;
    }
    EXPECT_EQ(hexValue(ch), want);
  }
}

TEST(Ascii, TokenCharIsRfc9110Tchar) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const bool tchar = in(kDigits, c) || in(kLower, c) || in(kUpper, c) || in(kTcharPunctuation, c);
    EXPECT_EQ(isTokenChar(static_cast<char>(c)), tchar);
  }
  // The separators of RFC 9110 §5.6.2, none of them tchar.
  for (char c : std::string_view("\"(),/:;<=>?@[\\]{} \t\x7f")) {
    EXPECT_FALSE(isTokenChar(c)) << static_cast<int>(c);
  }
}

TEST(Ascii, TokenIsOneOrMoreTchar) {
  EXPECT_TRUE(isToken("GET"));
  EXPECT_TRUE(isToken("x-api-key"));
  EXPECT_TRUE(isToken("!#$%&'*+-.^_`|~09azAZ"));
  EXPECT_TRUE(isToken("a"));
  EXPECT_FALSE(isToken(""));
  EXPECT_FALSE(isToken("G T"));
  EXPECT_FALSE(isToken("x-api-key:"));
  EXPECT_FALSE(isToken("name\r\n"));
  EXPECT_FALSE(isToken(std::string_view("a\0b", 3)));
  EXPECT_FALSE(isToken("\xd0\xba"));
  static_assert(isToken("PATCH") && !isToken("(x)"));
}

TEST(Ascii, IequalsFoldsAsciiLettersOnly) {
  // Every pair of bytes: equal, or the two cases of one letter. Not '@' and '`', '[' and '{'
  // (0x20 apart like the cases), nor 0xc0 and 0xe0 (Latin-1's 'À' and 'à').
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string x(1, static_cast<char>(a));
      const std::string y(1, static_cast<char>(b));
      const bool letters = (in(kUpper, a) && in(kLower, b) && a - 'A' == b - 'a') ||
                           (in(kLower, a) && in(kUpper, b) && a - 'a' == b - 'A');
      ASSERT_EQ(iequals(x, y), a == b || letters) << a << " " << b;
    }
  }
  EXPECT_TRUE(iequals("", ""));
  EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
  EXPECT_FALSE(iequals("host", "hosts"));
  static_assert(iequals("Upgrade", "UPGRADE") && !iequals("Upgrade", "Upgrade "));
}

TEST(Ascii, EqualFoldedComparesByteByByteAfterTheFold) {
  constexpr auto dashes = [](char c) { return c == '_' ? '-' : toLower(c); };
  EXPECT_TRUE(equalFolded("X_Api_Key", "x-api-key", dashes));
  EXPECT_FALSE(equalFolded("X_Api_Key", "x-api-key", toLower));
  EXPECT_FALSE(equalFolded("x_api", "x-api-", dashes));
  static_assert(equalFolded("A_B", "a-b", dashes));
}

}  // namespace
}  // namespace sluice::ascii
