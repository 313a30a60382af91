#include "policy/config_scalars.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sluice::policy {
namespace {

using std::chrono::milliseconds;

struct DecimalCase {
  std::string text;
  std::uint64_t value;  // when error is empty
  std::string error;
};

TEST(ParseDecimal, Table) {
  const std::vector<DecimalCase> cases = {
      {"0", 0, ""},
      {"1", 1, ""},
      {"443", 443, ""},
      {"65535", 65535, ""},
      {"18446744073709551615", 18446744073709551615ULL, ""},
      {"18446744073709551616", 0, "'18446744073709551616' is too large"},
      {"99999999999999999999999", 0, "'99999999999999999999999' is too large"},
      {"0443", 0,
       "'0443' is not a plain decimal number (a leading 0 or 0x would be read as octal or hex)"},
      {"0x1bb", 0,
       "'0x1bb' is not a plain decimal number (a leading 0 or 0x would be read as octal or hex)"},
      {"00", 0,
       "'00' is not a plain decimal number (a leading 0 or 0x would be read as octal or hex)"},
      {"+443", 0, "'+443' is not a plain decimal number"},
      {"-1", 0, "'-1' is not a plain decimal number"},
      {"", 0, "'' is not a plain decimal number"},
      {" 443", 0, "' 443' is not a plain decimal number"},
      {"443 ", 0, "'443 ' is not a plain decimal number"},
      {"443abc", 0, "'443abc' is not a plain decimal number"},
      {"4.0", 0, "'4.0' is not a plain decimal number"},
      {"1e3", 0, "'1e3' is not a plain decimal number"},
      {"١٢", 0, "'\\xd9\\xa1\\xd9\\xa2' is not a plain decimal number"},
  };
  for (const DecimalCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parseDecimal(c.text);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.error();
      EXPECT_EQ(r.value(), c.value);
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

struct DurationCase {
  std::string text;
  milliseconds value;
  std::string error;
};

TEST(ParseDuration, Table) {
  const std::string kNotDuration =
      " is not a duration: write a whole number and ms, s or m, e.g. 500ms, 2s or 1m";
  const std::vector<DurationCase> cases = {
      {"0ms", milliseconds(0), ""},
      {"0s", milliseconds(0), ""},
      {"0m", milliseconds(0), ""},
      {"500ms", milliseconds(500), ""},
      {"2s", milliseconds(2000), ""},
      {"10s", milliseconds(10000), ""},
      {"1m", milliseconds(60000), ""},
      {"90m", milliseconds(5400000), ""},
      {"9223372036854775807ms", milliseconds(9223372036854775807LL), ""},
      {"9223372036854775808ms", milliseconds(0), "'9223372036854775808ms' is too large"},
      {"153722867280912931m", milliseconds(0), "'153722867280912931m' is too large"},
      {"99999999999999999999s", milliseconds(0), "'99999999999999999999s' is too large"},
      {"2", milliseconds(0), "'2' needs a unit: ms, s or m"},
      {"0", milliseconds(0), "'0' needs a unit: ms, s or m"},
      {"2h", milliseconds(0), "'2h'" + kNotDuration},
      {"-1s", milliseconds(0), "'-1s'" + kNotDuration},
      {"+1s", milliseconds(0), "'+1s'" + kNotDuration},
      {"1.5s", milliseconds(0), "'1.5s'" + kNotDuration},
      {"02s", milliseconds(0), "'02s'" + kNotDuration},
      {"2 s", milliseconds(0), "'2 s'" + kNotDuration},
      {"2S", milliseconds(0), "'2S'" + kNotDuration},
      {"2sec", milliseconds(0), "'2sec'" + kNotDuration},
      {"2us", milliseconds(0), "'2us'" + kNotDuration},
      {"s", milliseconds(0), "'s'" + kNotDuration},
      {"", milliseconds(0), "''" + kNotDuration},
      {"1m30s", milliseconds(0), "'1m30s'" + kNotDuration},
  };
  for (const DurationCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parseDuration(c.text);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.error();
      EXPECT_EQ(r.value(), c.value);
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

// Ages (packages.min_age, docs/packages.md#the-age-rule): parseDuration's units and hours and
// days. Zero parses (the loader refuses it); every refusal, a too-large one too, says what an
// age is.
TEST(ParseAge, Table) {
  const std::string kNotAge =
      " is not an age: write a whole number and ms, s, m, h or d, e.g. 12h or 7d";
  constexpr std::int64_t kHour = 60LL * 60 * 1000;
  constexpr std::int64_t kDay = 24 * kHour;
  const std::vector<DurationCase> cases = {
      {"7d", milliseconds(7 * kDay), ""},
      {"12h", milliseconds(12 * kHour), ""},
      {"90m", milliseconds(90LL * 60 * 1000), ""},
      {"30s", milliseconds(30000), ""},
      {"500ms", milliseconds(500), ""},
      {"0d", milliseconds(0), ""},
      {"0h", milliseconds(0), ""},
      {"3650d", milliseconds(3650 * kDay), ""},
      // The largest whole number of days in milliseconds' range, and one more.
      {"106751991167d", milliseconds(106751991167LL * kDay), ""},
      {"106751991168d", milliseconds(0), "'106751991168d'" + kNotAge},
      {"99999999999999999d", milliseconds(0), "'99999999999999999d'" + kNotAge},
      {"99999999999999999999h", milliseconds(0), "'99999999999999999999h'" + kNotAge},
      {"9223372036854775808ms", milliseconds(0), "'9223372036854775808ms'" + kNotAge},
      {"1.5d", milliseconds(0), "'1.5d'" + kNotAge},
      {"7D", milliseconds(0), "'7D'" + kNotAge},
      {"7H", milliseconds(0), "'7H'" + kNotAge},
      {"d", milliseconds(0), "'d'" + kNotAge},
      {"h", milliseconds(0), "'h'" + kNotAge},
      {"", milliseconds(0), "''" + kNotAge},
      {"-1d", milliseconds(0), "'-1d'" + kNotAge},
      {"+1d", milliseconds(0), "'+1d'" + kNotAge},
      {"07d", milliseconds(0), "'07d'" + kNotAge},
      {"7 d", milliseconds(0), "'7 d'" + kNotAge},
      {" 7d", milliseconds(0), "' 7d'" + kNotAge},
      {"7d ", milliseconds(0), "'7d '" + kNotAge},
      {"7days", milliseconds(0), "'7days'" + kNotAge},
      {"1w", milliseconds(0), "'1w'" + kNotAge},
      {"1d12h", milliseconds(0), "'1d12h'" + kNotAge},
      {"7", milliseconds(0), "'7'" + kNotAge},
      {"0", milliseconds(0), "'0'" + kNotAge},
  };
  for (const DurationCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parseAge(c.text);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.error();
      EXPECT_EQ(r.value(), c.value);
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

TEST(ParseSize, Table) {
  const std::string kNotSize =
      " is not a size: write a whole number of bytes, or one with KiB, MiB or GiB, e.g. 65536 or "
      "64KiB";
  const std::vector<DecimalCase> cases = {
      {"0", 0, ""},
      {"65536", 65536, ""},
      {"100B", 100, ""},
      {"64KiB", 65536, ""},
      {"1MiB", 1048576, ""},
      {"16MiB", 16777216, ""},
      {"2GiB", 2147483648ULL, ""},
      {"17179869183GiB", 17179869183ULL << 30, ""},
      {"17179869184GiB", 0, "'17179869184GiB' is too large"},
      {"18446744073709551616", 0, "'18446744073709551616' is too large"},
      {"64kb", 0, "'64kb'" + kNotSize},
      {"64KB", 0, "'64KB'" + kNotSize},
      {"64K", 0, "'64K'" + kNotSize},
      {"64kib", 0, "'64kib'" + kNotSize},
      {"1.5KiB", 0, "'1.5KiB'" + kNotSize},
      {"-1", 0, "'-1'" + kNotSize},
      {"064KiB", 0, "'064KiB'" + kNotSize},
      {"0x100", 0, "'0x100'" + kNotSize},
      {"64 KiB", 0, "'64 KiB'" + kNotSize},
      {"KiB", 0, "'KiB'" + kNotSize},
      {"", 0, "''" + kNotSize},
      {"1TiB", 0, "'1TiB'" + kNotSize},
  };
  for (const DecimalCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parseSize(c.text);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.error();
      EXPECT_EQ(r.value(), c.value);
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

struct TextCase {
  std::string text;
  std::string error;  // empty: accepted
};

TEST(CheckName, Table) {
  const std::string kBad = " is not a valid name: use 1 to 64 of a-z, 0-9, '.', '_' and '-'";
  const std::vector<TextCase> cases = {
      {"agent-1", ""},
      {"a", ""},
      {"mirrors.v2_x", ""},
      {"0", ""},
      {"...", ""},
      {std::string(64, 'a'), ""},
      {std::string(65, 'a'), "'" + std::string(64, 'a') + "...'" + kBad},
      {"", "''" + kBad},
      {"Agent", "'Agent'" + kBad},
      {"agent 1", "'agent 1'" + kBad},
      {"agent/1", "'agent/1'" + kBad},
      {"agent\n", "'agent\\x0a'" + kBad},
      {std::string("a\0b", 3), "'a\\x00b'" + kBad},
      {"é", "'\\xc3\\xa9'" + kBad},
      {".", "'.' is not a valid name: it names a directory"},
      {"..", "'..' is not a valid name: it names a directory"},
  };
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = checkName(c.text);
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << r.error();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

TEST(CheckMethod, Table) {
  const std::vector<TextCase> cases = {
      {"GET", ""},
      {"HEAD", ""},
      {"POST", ""},
      {"M-SEARCH", ""},
      {"PROPFIND", ""},
      {"X_1!#$%&'*+-.^_`|~", ""},
      {"get", "'get': methods are case-sensitive; write GET"},
      {"Post", "'Post': methods are case-sensitive; write POST"},
      {"m-search", "'m-search': methods are case-sensitive; write M-SEARCH"},
      {"", "'' is not an HTTP method"},
      {"GE T", "'GE T' is not an HTTP method"},
      {"GET\r\n", "'GET\\x0d\\x0a' is not an HTTP method"},
      {"GET/", "'GET/' is not an HTTP method"},
      {"G(ET", "'G(ET' is not an HTTP method"},
      {"get me", "'get me' is not an HTTP method"},
  };
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = checkMethod(c.text);
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << r.error();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
}

TEST(ParseHeaderName, LowerCasesTokens) {
  auto r = parseHeaderName("X-Api-Key");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), "x-api-key");
  EXPECT_EQ(parseHeaderName("authorization").value(), "authorization");
  EXPECT_EQ(parseHeaderName("A1!#$%&'*+-.^_`|~").value(), "a1!#$%&'*+-.^_`|~");
}

TEST(ParseHeaderName, RefusesNonTokens) {
  const std::string kBad = " is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)";
  for (const TextCase& c : std::vector<TextCase>{
           {"", "''" + kBad},
           {"x-api-key:", "'x-api-key:'" + kBad},
           {"x api", "'x api'" + kBad},
           {"x-api\r\nevil", "'x-api\\x0d\\x0aevil'" + kBad},
           {"(x)", "'(x)'" + kBad},
           {"ключ", "'\\xd0\\xba\\xd0\\xbb\\xd1\\x8e\\xd1\\x87'" + kBad},
       }) {
    SCOPED_TRACE(c.text);
    auto r = parseHeaderName(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), c.error);
  }
}

// Methods and header names are RFC 9110 tokens, read by base/ascii.h's one tchar set: each byte
// alone, and as the last of a longer name.
TEST(ConfigTokens, MethodAndHeaderNameAcceptExactlyTchar) {
  const std::string tchars =
      "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const char ch = static_cast<char>(c);
    const bool tchar = c != 0 && tchars.find(ch) != std::string::npos;
    const bool lower = ch >= 'a' && ch <= 'z';
    EXPECT_EQ(parseHeaderName(std::string(1, ch)).ok(), tchar);
    EXPECT_EQ(parseHeaderName("x-" + std::string(1, ch)).ok(), tchar);
    EXPECT_EQ(checkMethod(std::string(1, ch)).ok(), tchar && !lower);
    EXPECT_EQ(checkMethod("GET" + std::string(1, ch)).ok(), tchar && !lower);
  }
}

TEST(QuoteForMessage, EscapesAndShortens) {
  EXPECT_EQ(quoteForMessage("abc"), "'abc'");
  EXPECT_EQ(quoteForMessage(""), "''");
  EXPECT_EQ(quoteForMessage("a'b"), "'a'b'");
  EXPECT_EQ(quoteForMessage("a\tb\x7f"), "'a\\x09b\\x7f'");
  EXPECT_EQ(quoteForMessage(std::string(70, 'x')), "'" + std::string(64, 'x') + "...'");
  EXPECT_EQ(quoteForMessage(std::string(64, 'x')), "'" + std::string(64, 'x') + "'");
}

}  // namespace
}  // namespace sluice::policy
