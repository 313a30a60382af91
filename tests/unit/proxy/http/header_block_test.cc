// The header block and `http::ascii`: the character classes and tokens are base/ascii.h's (one
// definition for policy/, proxy/http/ and the commands; the session's code names them as
// `http::ascii::...`), the rules of field values are HTTP's own.
#include "proxy/http/header_block.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "base/ascii.h"

namespace sluice::proxy::http {
namespace {

TEST(HttpAscii, NamesTheOneDefinition) {
  // The same functions, not copies that could drift apart.
  EXPECT_EQ(&ascii::iequals, &sluice::ascii::iequals);
  EXPECT_EQ(&ascii::isToken, &sluice::ascii::isToken);
  EXPECT_EQ(&ascii::isTokenChar, &sluice::ascii::isTokenChar);
  EXPECT_EQ(&ascii::toLower, &sluice::ascii::toLower);
  EXPECT_EQ(&ascii::isAlpha, &sluice::ascii::isAlpha);
  EXPECT_EQ(&ascii::isDigit, &sluice::ascii::isDigit);
  EXPECT_EQ(&ascii::isUpper, &sluice::ascii::isUpper);
  EXPECT_EQ(&ascii::isHexDigit, &sluice::ascii::isHexDigit);
}

TEST(HttpAscii, OwsIsSpaceAndTab) {
  for (int c = 0; c < 256; ++c) {
    EXPECT_EQ(ascii::isOws(static_cast<char>(c)), c == ' ' || c == '\t') << c;
  }
  EXPECT_EQ(ascii::trimOws(" \t a b \t "), "a b");
  EXPECT_EQ(ascii::trimOws(" \t "), "");
  EXPECT_EQ(ascii::trimOws("\r\nx\r\n"), "\r\nx\r\n");  // CR and LF are not OWS
}

TEST(HttpAscii, FieldValueRefusesControlCharacters) {
  EXPECT_TRUE(ascii::isFieldValue(""));
  EXPECT_TRUE(ascii::isFieldValue("text/html; q=0.9\t, */*"));
  EXPECT_TRUE(ascii::isFieldValue("caf\xc3\xa9"));  // obs-text
  for (int c = 0; c < 0x20; ++c) {
    const std::string value = "a" + std::string(1, static_cast<char>(c)) + "b";
    EXPECT_EQ(ascii::isFieldValue(value), c == '\t') << c;
  }
  EXPECT_FALSE(ascii::isFieldValue("a\x7f"));
}

TEST(HttpAscii, ListContainsComparesTrimmedElementsCaseInsensitively) {
  EXPECT_TRUE(ascii::listContains("close", "close"));
  EXPECT_TRUE(ascii::listContains("Keep-Alive, Upgrade", "upgrade"));
  EXPECT_TRUE(ascii::listContains(" foo ,\tCLOSE\t", "close"));
  EXPECT_FALSE(ascii::listContains("closed", "close"));
  EXPECT_FALSE(ascii::listContains("", "close"));
  EXPECT_FALSE(ascii::listContains("clo se", "close"));
}

TEST(HeaderBlock, LooksNamesUpCaseInsensitively) {
  HeaderBlock block;
  block.add("Host", "a.test");
  block.add("X-Thing", "  one ");
  block.add("x-thing", "two");
  EXPECT_EQ(block.count("HOST"), 1u);
  EXPECT_EQ(block.count("X-THING"), 2u);
  EXPECT_EQ(block.find("x-Thing"), std::optional<std::string_view>("one"));
  EXPECT_EQ(block.find("Hosts"), std::nullopt);
  EXPECT_EQ(block.name(1), "X-Thing");  // the case it arrived in
}

}  // namespace
}  // namespace sluice::proxy::http
