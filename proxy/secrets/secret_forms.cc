#include "proxy/secrets/secret_forms.h"

#include <openssl/crypto.h>

#include <iterator>

namespace sluice::proxy {

namespace {

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view kHexUpper = "0123456789ABCDEF";
constexpr std::string_view kHexLower = "0123456789abcdef";

bool isAlnum(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Which bytes a percent-encoder leaves as they are.
struct PercentStyle {
  std::string_view also_literal;  // besides letters and digits
  bool space_as_plus;
};

// RFC 3986's unreserved set; JavaScript's encodeURIComponent; Python's quote(); form encoding
// as Python's quote_plus() and Go's QueryEscape() write it, and as HTML forms do. "Every byte
// encoded" is the empty set, written apart (letters and digits are encoded there too).
constexpr PercentStyle kPercentStyles[] = {
    {"-._~", false}, {"-._~!'()*", false}, {"-._~/", false}, {"-._~", true}, {"*-._", true},
};

void appendPercent(std::string& out, unsigned char c, std::string_view digits) {
  out.push_back('%');
  out.push_back(digits[c >> 4]);
  out.push_back(digits[c & 15]);
}

std::string percentEncoded(std::string_view secret, const PercentStyle* style,
                           std::string_view digits) {
  std::string out;
  out.reserve(secret.size() * 3);
  for (char ch : secret) {
    const auto c = static_cast<unsigned char>(ch);
    if (style != nullptr && style->space_as_plus && c == ' ') {
      out.push_back('+');
    } else if (style != nullptr &&
               (isAlnum(c) || style->also_literal.find(ch) != std::string_view::npos)) {
      out.push_back(ch);
    } else {
      appendPercent(out, c, digits);
    }
  }
  return out;
}

std::string hexEncoded(std::string_view secret, std::string_view digits) {
  std::string out;
  out.reserve(secret.size() * 2);
  for (char ch : secret) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// The characters of an alphabet whose 6-bit value v has (v & mask) == value.
ByteSet base64Chars(std::string_view alphabet, unsigned mask, unsigned value) {
  ByteSet set;
  for (unsigned v = 0; v < 64; ++v) {
    if ((v & mask) == value) {
      set.add(static_cast<unsigned char>(alphabet[v]));
    }
  }
  return set;
}

// The secret `align` bytes into a 3-byte block of a longer base64 text. Its bits are
// [8 * align, 8 * (align + size)) of the encoding; character k carries bits [6k, 6k + 6).
MaskPattern base64Form(std::string_view secret, std::size_t align, std::string_view alphabet) {
  std::string blocks;
  blocks.reserve(align + secret.size() + 2);  // grown once: no copy of the secret left behind
  blocks.append(align, '\0');
  blocks.append(secret);
  blocks.append((3 - blocks.size() % 3) % 3, '\0');
  std::string encoded;
  encoded.reserve(blocks.size() / 3 * 4);
  for (std::size_t i = 0; i < blocks.size(); i += 3) {
    const std::uint32_t word = (static_cast<unsigned char>(blocks[i]) << 16) |
                               (static_cast<unsigned char>(blocks[i + 1]) << 8) |
                               static_cast<unsigned char>(blocks[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) {
      encoded.push_back(alphabet[(word >> shift) & 63]);
    }
  }
  const std::size_t bit_begin = 8 * align;
  const std::size_t bit_end = 8 * (align + secret.size());
  const std::size_t first = (bit_begin + 5) / 6;  // the first character of the secret's alone
  const std::size_t last = bit_end / 6;           // one past the last
  MaskPattern form;
  if (last > first) {
    form.text = encoded.substr(first, last - first);
  }
  auto value = [&](std::size_t k) { return static_cast<unsigned>(alphabet.find(encoded[k])); };
  if (bit_begin % 6 != 0) {
    // Character first-1: the neighbour's bits high, the secret's first (6*first - bit_begin)
    // bits low.
    const unsigned mask = (1u << (6 * first - bit_begin)) - 1;
    form.before = base64Chars(alphabet, mask, value(first - 1) & mask);
  }
  if (bit_end % 6 != 0) {
    // Character `last`: the secret's last (bit_end - 6*last) bits high, the neighbour's low.
    const unsigned low_bits = 6 - static_cast<unsigned>(bit_end - 6 * last);
    const unsigned mask = 63u & ~((1u << low_bits) - 1);
    form.after = base64Chars(alphabet, mask, value(last) & mask);
  }
  OPENSSL_cleanse(blocks.data(), blocks.size());
  OPENSSL_cleanse(encoded.data(), encoded.size());
  return form;
}

void wipe(std::string& s) { OPENSSL_cleanse(s.data(), s.capacity()); }  // SSO bytes too

void addForm(std::vector<MaskPattern>& forms, MaskPattern form, bool derived) {
  if (form.text.empty() || (derived && form.text.size() < kMinDerivedPattern)) {
    wipe(form.text);
    return;
  }
  for (MaskPattern& known : forms) {
    if (known.text == form.text) {
      known.before |= form.before;
      known.after |= form.after;
      wipe(form.text);
      return;
    }
  }
  forms.push_back(std::move(form));
  wipe(form.text);  // a short text was copied out of the object, not moved  // NOLINT
}

void addText(std::vector<MaskPattern>& forms, std::string text) {
  MaskPattern form;
  form.text = std::move(text);
  addForm(forms, std::move(form), true);
}

}  // namespace

std::vector<MaskPattern> maskPatterns(std::string_view secret) {
  std::vector<MaskPattern> forms;
  if (secret.empty()) {
    return forms;
  }
  // Room for every form at once: a vector that grows would free copies of short ones (kept
  // inside the string objects) unwiped. 1 exact, 2 x (hex, every byte, 5 styles), 6 base64.
  forms.reserve(1 + 2 * (2 + std::size(kPercentStyles)) + 6);
  forms.push_back(MaskPattern{std::string(secret), {}, {}});
  for (std::string_view digits : {kHexLower, kHexUpper}) {
    addText(forms, hexEncoded(secret, digits));
    addText(forms, percentEncoded(secret, nullptr, digits));
    for (const PercentStyle& style : kPercentStyles) {
      addText(forms, percentEncoded(secret, &style, digits));
    }
  }
  for (std::string_view alphabet : {kBase64, kBase64Url}) {
    for (std::size_t align = 0; align < 3; ++align) {
      addForm(forms, base64Form(secret, align, alphabet), true);
    }
  }
  return forms;
}

}  // namespace sluice::proxy
