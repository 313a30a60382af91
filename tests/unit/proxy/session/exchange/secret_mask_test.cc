// SecretMask over SecretPatterns: every form of a secret is masked, exactly the characters that
// carry its bits and nothing else, however the text is cut into pieces.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "proxy/session/exchange/secret_mask.h"
#include "proxy/secrets/secret_patterns.h"

namespace sluice::proxy::session {
namespace {

const std::string kAlnum = "sk-real-7f3a9c0e5b1d4a2e8c6f";
// Reserved characters (percent-encoders differ on them), a space (form encoding), and bytes
// whose base64 holds '+' and '/'.
const std::string kReserved = "tok/3+Zx~9!q(w)*e=r'T y_u.i-o\?\?\?>>>;&%";

SecretPatterns patternsOf(std::vector<std::string> secrets) {
  std::vector<std::string_view> views(secrets.begin(), secrets.end());
  return SecretPatterns::build(views);
}

// Feeds `text` in pieces that end at each of `cuts` (ascending), then finishes.
std::string run(const SecretPatterns& patterns, const std::string& text,
                const std::vector<std::size_t>& cuts) {
  SecretMask mask;
  mask.reset(&patterns);
  std::string out;
  std::size_t at = 0;
  for (std::size_t cut : cuts) {
    mask.feed(std::span<const char>(text.data() + at, cut - at), out);
    at = cut;
  }
  mask.feed(std::span<const char>(text.data() + at, text.size() - at), out);
  mask.finish(out);
  return out;
}

// Every way of cutting `text` we try: whole; in two at every point; in pieces of 1, 2, 3, 7.
std::vector<std::vector<std::size_t>> cutsOf(std::size_t size) {
  std::vector<std::vector<std::size_t>> all{{}};
  for (std::size_t at = 0; at <= size; ++at) {
    all.push_back({at});
  }
  for (std::size_t piece : {1, 2, 3, 7}) {
    std::vector<std::size_t> cuts;
    for (std::size_t at = piece; at < size; at += piece) {
      cuts.push_back(at);
    }
    all.push_back(cuts);
  }
  return all;
}

void expectMasked(const SecretPatterns& patterns, const std::string& text, const std::string& want,
                  const std::string& what) {
  for (const auto& cuts : cutsOf(text.size())) {
    const std::string got = run(patterns, text, cuts);
    ASSERT_EQ(got, want) << what << ", cut at " << ::testing::PrintToString(cuts);
  }
}

// --- the encodings, written here independently of secret_forms.cc ------------------------------

std::string hexOf(const std::string& data, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : data) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string percentOf(const std::string& data, const std::string& literal, bool upper, bool plus) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : data) {
    if (plus && c == ' ') {
      out += '+';
    } else if (literal.find(static_cast<char>(c)) != std::string::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string base64Of(const std::string& data, bool url, bool pad) {
  const char* alphabet = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                             : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < data.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, data.size() - i);
    unsigned word = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      word = (word << 8) | (j < n ? static_cast<unsigned char>(data[i + j]) : 0u);
    }
    for (std::size_t k = 0; k <= n; ++k) {
      out += alphabet[(word >> (18 - 6 * k)) & 63];
    }
    if (pad) {
      out.append(3 - n, '=');
    }
  }
  return out;
}

const std::string kAlnumChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

struct Encoding {
  std::string name;
  std::function<std::string(const std::string&)> encode;
  // Where the encoding of data[from, from + length) lies in encode(data), as [begin, end):
  // a byte-wise encoding maps each byte to its own characters; base64 to every character
  // that carries one of its bits.
  bool base64 = false;
};

std::vector<Encoding> encodings() {
  const std::string unreserved = kAlnumChars + "-._~";
  return {
      {"exact", [](const std::string& d) { return d; }},
      {"hex", [](const std::string& d) { return hexOf(d, false); }},
      {"HEX", [](const std::string& d) { return hexOf(d, true); }},
      {"percent-every", [](const std::string& d) { return percentOf(d, "", true, false); }},
      {"percent-every-lower", [](const std::string& d) { return percentOf(d, "", false, false); }},
      {"percent-rfc3986",
       [=](const std::string& d) { return percentOf(d, unreserved, true, false); }},
      {"percent-rfc3986-lower",
       [=](const std::string& d) { return percentOf(d, unreserved, false, false); }},
      {"percent-js",
       [=](const std::string& d) { return percentOf(d, unreserved + "!'()*", true, false); }},
      {"percent-python",
       [=](const std::string& d) { return percentOf(d, unreserved + "/", true, false); }},
      {"form", [=](const std::string& d) { return percentOf(d, unreserved, true, true); }},
      {"form-html",
       [=](const std::string& d) { return percentOf(d, kAlnumChars + "*-._", true, true); }},
      {"base64", [](const std::string& d) { return base64Of(d, false, true); }, true},
      {"base64-nopad", [](const std::string& d) { return base64Of(d, false, false); }, true},
      {"base64url", [](const std::string& d) { return base64Of(d, true, true); }, true},
      {"base64url-nopad", [](const std::string& d) { return base64Of(d, true, false); }, true},
  };
}

// "<<" + encode(before + secret + after) + ">>", with the characters that carry the secret's
// bytes replaced by '*'.
std::string maskedForm(const Encoding& e, const std::string& before, const std::string& secret,
                       const std::string& after, std::string* text) {
  const std::string encoded = e.encode(before + secret + after);
  std::size_t begin = 0;
  std::size_t end = 0;
  if (e.base64) {
    begin = 8 * before.size() / 6;
    end = (8 * (before.size() + secret.size()) + 5) / 6;
  } else {
    begin = e.encode(before).size();
    end = begin + e.encode(secret).size();
  }
  *text = "<<" + encoded + ">>";
  std::string want = *text;
  std::fill(want.begin() + 2 + static_cast<std::ptrdiff_t>(begin),
            want.begin() + 2 + static_cast<std::ptrdiff_t>(end), '*');
  return want;
}

TEST(SecretMask, EveryFormAtEveryAlignmentForEveryCut) {
  const SecretPatterns patterns = patternsOf({kAlnum, kReserved});
  for (const std::string& secret : {kAlnum, kReserved}) {
    for (const Encoding& e : encodings()) {
      for (std::size_t pre = 0; pre < 3; ++pre) {
        for (std::size_t post = 0; post < 3; ++post) {
          std::string text;
          const std::string want =
              maskedForm(e, std::string(pre, 'p'), secret, std::string(post, 's'), &text);
          expectMasked(patterns, text, want,
                       e.name + " of " + secret + " pre " + std::to_string(pre) + " post " +
                           std::to_string(post));
        }
      }
    }
  }
}

TEST(SecretMask, Base64WithAnyNeighbourBytes) {
  // The characters a secret shares with its neighbours are masked whatever the neighbours are.
  const SecretPatterns patterns = patternsOf({kAlnum});
  const Encoding e = encodings()[11];  // base64
  ASSERT_EQ(e.name, "base64");
  for (int n = 0; n < 256; ++n) {
    for (std::size_t pre = 1; pre < 3; ++pre) {
      std::string text;
      const std::string want = maskedForm(e, std::string(pre, static_cast<char>(n)), kAlnum,
                                          std::string(2, static_cast<char>(255 - n)), &text);
      ASSERT_EQ(run(patterns, text, {}), want) << "neighbour " << n << " pre " << pre;
    }
  }
}

TEST(SecretMask, TwoSecretsInTwoFormsInOneText) {
  const SecretPatterns patterns = patternsOf({kAlnum, kReserved});
  const std::string b64 = base64Of(kReserved, false, true);
  const std::string text = "a=" + hexOf(kAlnum, false) + "&b=" + b64 + "&c=" + kAlnum + ".";
  const std::string want = "a=" + std::string(2 * kAlnum.size(), '*') +
                           "&b=" + std::string((8 * kReserved.size() + 5) / 6, '*') +
                           b64.substr((8 * kReserved.size() + 5) / 6) +
                           "&c=" + std::string(kAlnum.size(), '*') + ".";
  expectMasked(patterns, text, want, "two secrets");
}

TEST(SecretMask, ASecretInsideAnotherIsMaskedAloneAndWithin) {
  const std::string outer = "sk-real-0123456789abcdef";
  const std::string inner = "real-0123456789";
  const SecretPatterns patterns = patternsOf({outer, inner});
  expectMasked(patterns, "[" + outer + "]", "[" + std::string(outer.size(), '*') + "]", "outer");
  expectMasked(patterns, "[sk-" + inner + "xyz]", "[sk-" + std::string(inner.size(), '*') + "xyz]",
               "inner alone");
  expectMasked(patterns, hexOf(outer, true), std::string(2 * outer.size(), '*'), "outer in hex");
  expectMasked(patterns, "x" + hexOf(inner, false) + "x",
               "x" + std::string(2 * inner.size(), '*') + "x", "inner in hex");
}

TEST(SecretMask, OverlappingOccurrences) {
  const std::string secret = "abcabcabcabd";
  const SecretPatterns patterns = patternsOf({secret});
  // A false start that shares a prefix with the secret, then the secret.
  expectMasked(patterns, "abcabcabcabcabd!", "abc" + std::string(12, '*') + "!", "false start");
  // Two occurrences that share bytes.
  const std::string repeated = "aaaaaaaaaa";
  const SecretPatterns runs = patternsOf({repeated});
  expectMasked(runs, "b" + std::string(25, 'a') + "b", "b" + std::string(25, '*') + "b",
               "overlapping runs");
  expectMasked(runs, std::string(9, 'a') + "b", std::string(9, 'a') + "b", "one short");
}

TEST(SecretMask, TwoSecretsThatOverlapInTheText) {
  const std::string first = "first-secret-XYZ";
  const std::string second = "XYZ-second-secret";
  const SecretPatterns patterns = patternsOf({first, second});
  expectMasked(patterns, "<first-secret-XYZ-second-secret>", "<" + std::string(30, '*') + ">",
               "overlap");
}

TEST(SecretMask, UnrelatedTextPassesUnchanged) {
  const SecretPatterns patterns = patternsOf({kAlnum, kReserved});
  std::string text;
  for (int i = 0; i < 4000; ++i) {
    text += base64Of(std::to_string(i * 7919) + "-sk-real-", i % 2 == 0, true) + "%2F" +
            hexOf(std::to_string(i), false) + " ";
  }
  EXPECT_EQ(run(patterns, text, {}), text);
  EXPECT_EQ(run(patterns, text, {1, 1000, 1001, 50000}), text);
}

TEST(SecretMask, FormsTooShortToTellFromOtherTextAreNotLookedFor) {
  // Three bytes: base64 "YWJj" and hex "616263" would mask unrelated text.
  const SecretPatterns patterns = patternsOf({"abc"});
  EXPECT_EQ(run(patterns, "abc YWJj 616263 %61%62%63", {}), "*** YWJj 616263 *********");
}

// --- holding back --------------------------------------------------------------------------------

std::string fedOnce(SecretMask& mask, const std::string& piece) {
  std::string out;
  mask.feed(std::span<const char>(piece.data(), piece.size()), out);
  return out;
}

TEST(SecretMask, APieceThatEndsOutsideEveryPatternIsPassedOnWhole) {
  // Server-sent events from an API the secret is injected for: no event waits for the next.
  const SecretPatterns patterns = patternsOf({kAlnum, kReserved});
  SecretMask mask;
  mask.reset(&patterns);
  const std::string event = "data: {\"delta\": \"Hello\"}\n\n";
  EXPECT_EQ(fedOnce(mask, event), event);
  EXPECT_EQ(fedOnce(mask, event), event);
}

TEST(SecretMask, OnlyTheStartOfAPossibleOccurrenceIsHeld) {
  const SecretPatterns patterns = patternsOf({kAlnum});
  SecretMask mask;
  mask.reset(&patterns);
  EXPECT_EQ(fedOnce(mask, "key: sk-re"), "key: ");
  EXPECT_EQ(fedOnce(mask, "al-7f3a9c0e5b1d4a2e8c6f\n"), std::string(kAlnum.size(), '*') + "\n");
  EXPECT_EQ(fedOnce(mask, "sk-real-7f3!\n"), "sk-real-7f3!\n");  // not it after all
  // A last byte that could be the base64 character a secret shares with what precedes it
  // waits for the next piece.
  // ("H": 0x73, the secret's first byte, puts 0111 in its low bits at alignment 1; "Q" cannot be.)
  EXPECT_EQ(fedOnce(mask, "x=H"), "x=");
  EXPECT_EQ(fedOnce(mask, "\nx=Q"), "H\nx=Q");
}

TEST(SecretMask, NeverHoldsMoreThanTheLongestMatch) {
  const SecretPatterns patterns = patternsOf({kAlnum, kReserved});
  std::size_t longest = patterns.longestMatch();
  EXPECT_GE(longest, 3 * kReserved.size());  // every byte percent-encoded
  for (const Encoding& e : encodings()) {
    for (const std::string& secret : {kAlnum, kReserved}) {
      const std::string encoded = e.encode(secret);
      SecretMask mask;
      mask.reset(&patterns);
      std::string out;
      std::size_t fed = 0;
      for (char c : encoded.substr(0, encoded.size() - 1)) {  // all but the last byte
        mask.feed(std::span<const char>(&c, 1), out);
        ++fed;
        ASSERT_LE(fed - out.size(), longest) << e.name;
      }
    }
  }
}

TEST(SecretMask, WithoutPatternsItPassesEverything) {
  SecretMask mask;
  mask.reset(nullptr);
  EXPECT_FALSE(mask.active());
  const SecretPatterns none = patternsOf({});
  EXPECT_TRUE(none.empty());
  mask.reset(&none);
  EXPECT_FALSE(mask.active());
}

TEST(SecretMask, ResetStartsOver) {
  const SecretPatterns patterns = patternsOf({kAlnum});
  SecretMask mask;
  mask.reset(&patterns);
  std::string out;
  const std::string start = "sk-real-7f3a";
  mask.feed(std::span<const char>(start.data(), start.size()), out);
  mask.reset(&patterns);  // the held start belonged to another text
  const std::string rest = "9c0e5b1d4a2e8c6f";
  mask.feed(std::span<const char>(rest.data(), rest.size()), out);
  mask.finish(out);
  EXPECT_EQ(out, rest);
}

TEST(SecretPatterns, MovedFromMatchesNothing) {
  SecretPatterns patterns = patternsOf({kAlnum});
  EXPECT_FALSE(patterns.empty());
  EXPECT_GT(patterns.memoryBytes(), 0u);
  SecretPatterns moved = std::move(patterns);
  EXPECT_TRUE(patterns.empty());  // NOLINT(bugprone-use-after-move): what moving leaves
  EXPECT_FALSE(moved.empty());
  EXPECT_EQ(run(moved, kAlnum, {}), std::string(kAlnum.size(), '*'));
}

}  // namespace
}  // namespace sluice::proxy::session
