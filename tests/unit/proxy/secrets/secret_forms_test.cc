// maskPatterns: which forms of a secret the response masking looks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "proxy/secrets/secret_forms.h"

namespace sluice::proxy::session {
namespace {

const std::string kAlnum = "sk-real-7f3a9c0e5b1d4a2e8c6f";
const std::string kReserved = "tok/3+Zx~9!q(w)*e=r'T y_u.i-o\?\?\?>>>;&%";

std::string base64(const std::string& data, bool url = false) {
  const char* alphabet = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                             : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < data.size(); i += 3) {
    unsigned word = 0;
    std::size_t n = std::min<std::size_t>(3, data.size() - i);
    for (std::size_t j = 0; j < 3; ++j) {
      word = (word << 8) | (j < n ? static_cast<unsigned char>(data[i + j]) : 0u);
    }
    for (std::size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? alphabet[(word >> (18 - 6 * k)) & 63] : '=');
    }
  }
  return out;
}

const MaskPattern* find(const std::vector<MaskPattern>& forms, const std::string& text) {
  for (const MaskPattern& form : forms) {
    if (form.text == text) {
      return &form;
    }
  }
  return nullptr;
}

TEST(SecretForms, TheExactBytesComeFirst) {
  auto forms = maskPatterns(kAlnum);
  ASSERT_FALSE(forms.empty());
  EXPECT_EQ(forms[0].text, kAlnum);
  EXPECT_TRUE(forms[0].before.empty());
  EXPECT_TRUE(forms[0].after.empty());
}

TEST(SecretForms, EachTextOnce) {
  for (const std::string& secret : {kAlnum, kReserved, std::string("ab")}) {
    auto forms = maskPatterns(secret);
    for (std::size_t i = 0; i < forms.size(); ++i) {
      for (std::size_t j = i + 1; j < forms.size(); ++j) {
        EXPECT_NE(forms[i].text, forms[j].text) << secret;
      }
    }
  }
}

TEST(SecretForms, HexAndPercentEveryByteInBothCases) {
  auto forms = maskPatterns("Ab-/");
  // Too short for derived forms of 8: hex is 8, percent 12.
  EXPECT_NE(find(forms, "41622d2f"), nullptr);
  EXPECT_NE(find(forms, "41622D2F"), nullptr);
  EXPECT_NE(find(forms, "%41%62%2D%2F"), nullptr);
  EXPECT_NE(find(forms, "%41%62%2d%2f"), nullptr);
}

TEST(SecretForms, PercentEncodersThatLeaveSomeBytesAlone) {
  auto forms = maskPatterns("a b/c!d~e*f'g");
  EXPECT_NE(find(forms, "a%20b%2Fc%21d~e%2Af%27g"), nullptr);  // RFC 3986 unreserved
  EXPECT_NE(find(forms, "a%20b%2fc%21d~e%2af%27g"), nullptr);  // the same, lower-case hex
  EXPECT_NE(find(forms, "a%20b%2Fc!d~e*f'g"), nullptr);        // encodeURIComponent
  EXPECT_NE(find(forms, "a%20b/c%21d~e%2Af%27g"), nullptr);    // Python's quote()
  EXPECT_NE(find(forms, "a+b%2Fc%21d~e%2Af%27g"), nullptr);    // quote_plus(), QueryEscape()
  EXPECT_NE(find(forms, "a+b%2Fc%21d%7Ee*f%27g"), nullptr);    // HTML form encoding
}

TEST(SecretForms, AnAlnumSecretHasNoSeparateReservedOnlyForms) {
  // Its RFC 3986 and kindred forms are the exact bytes: one pattern, not five.
  auto forms = maskPatterns(kAlnum);
  std::size_t percent = std::count_if(forms.begin(), forms.end(), [](const MaskPattern& f) {
    return f.text.find('%') != std::string::npos;
  });
  EXPECT_EQ(percent, 2u);  // every byte, upper and lower
}

TEST(SecretForms, FormsShorterThanEightAreLeftOut) {
  auto forms = maskPatterns("ab");  // hex "6162", percent "%61%62": too short to look for
  ASSERT_EQ(forms.size(), 1u);
  EXPECT_EQ(forms[0].text, "ab");
  forms = maskPatterns("abc");  // "%61%62%63" is long enough (and the same in both cases)
  ASSERT_EQ(forms.size(), 2u);
  EXPECT_EQ(forms[1].text, "%61%62%63");
  EXPECT_TRUE(maskPatterns("").empty());
  // From 7 bytes on, every form is long enough: exact, hex and percent-encoding in both cases,
  // base64 at 3 alignments (base64url's are the same texts here: no '+' or '/' in them).
  EXPECT_EQ(maskPatterns("q7Zk2Wp").size(), 8u);
  // At 6 bytes, base64 at alignments 1 and 2 keeps only 7 characters of the secret's own.
  EXPECT_EQ(maskPatterns("q7Zk2W").size(), 6u);
}

// The secret `align` bytes into a base64 block, with any neighbour bytes: the characters that
// depend on the secret alone are a pattern, and the characters it shares with a neighbour are
// in the pattern's before/after sets whatever the neighbour is.
TEST(SecretForms, Base64AtEveryAlignmentWithAnyNeighbours) {
  for (const std::string& secret :
       {kAlnum, kReserved, std::string("\xff\xfe\xfd\xfc\xfb\xfa\xf9")}) {
    auto forms = maskPatterns(secret);
    for (bool url : {false, true}) {
      for (std::size_t align = 0; align < 3; ++align) {
        const std::size_t bit_begin = 8 * align;
        const std::size_t bit_end = bit_begin + 8 * secret.size();
        const std::size_t first = (bit_begin + 5) / 6;
        const std::size_t last = bit_end / 6;
        for (int neighbour = 0; neighbour < 256; ++neighbour) {
          const std::string around(3, static_cast<char>(neighbour));
          const std::string encoded = base64(around.substr(0, align) + secret + around, url);
          const MaskPattern* form = find(forms, encoded.substr(first, last - first));
          ASSERT_NE(form, nullptr) << secret << " align " << align << " url " << url;
          if (bit_begin % 6 != 0) {
            EXPECT_TRUE(form->before.contains(static_cast<unsigned char>(encoded[first - 1])));
          }
          if (bit_end % 6 != 0) {
            EXPECT_TRUE(form->after.contains(static_cast<unsigned char>(encoded[last])));
          }
        }
      }
    }
  }
}

TEST(SecretForms, Base64SharedCharacterSetsAreNoWiderThanTheSecretAllows) {
  // At alignment 1 the shared leading character carries 4 bits of the secret: 4 of the 64
  // characters fit; at alignment 2 it carries 2 bits: 16 fit.
  auto forms = maskPatterns(kAlnum);
  const std::string padded1 = base64(std::string(1, '\0') + kAlnum);
  const std::string padded2 = base64(std::string(2, '\0') + kAlnum);
  const MaskPattern* at1 = find(forms, padded1.substr(2, (8 + 8 * kAlnum.size()) / 6 - 2));
  const MaskPattern* at2 = find(forms, padded2.substr(3, (16 + 8 * kAlnum.size()) / 6 - 3));
  ASSERT_NE(at1, nullptr);
  ASSERT_NE(at2, nullptr);
  auto count = [](const ByteSet& set) {
    int n = 0;
    for (int c = 0; c < 256; ++c) {
      n += set.contains(static_cast<unsigned char>(c));
    }
    return n;
  };
  // Merged with base64url's identical text (no '+' or '/' in it): at most twice as many.
  EXPECT_GE(count(at1->before), 4);
  EXPECT_LE(count(at1->before), 8);
  EXPECT_GE(count(at2->before), 16);
  EXPECT_LE(count(at2->before), 32);
}

}  // namespace
}  // namespace sluice::proxy::session
