#include "base/ip_text.h"

#include <array>
#include <charconv>
#include <cstring>
#include <string_view>

namespace sluice {

namespace {

// Appends to a buffer sized for the longest text (kMaxIpTextLength), so it never checks.
class TextWriter {
 public:
  explicit TextWriter(char* out) : out_(out) {}

  void put(char c) { out_[length_++] = c; }
  void put(std::string_view s) {
    std::memcpy(out_ + length_, s.data(), s.size());
    length_ += s.size();
  }
  void putDecimal(unsigned value) {  // an octet: 3 digits at most
    char* end = std::to_chars(out_ + length_, out_ + length_ + 3, value).ptr;
    length_ = static_cast<std::size_t>(end - out_);
  }
  // Lower case, no leading zeros (RFC 5952 §4.1, §4.3).
  void putHexGroup(unsigned group) {
    static constexpr char kHex[] = "0123456789abcdef";
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const unsigned nibble = (group >> shift) & 0xf;
      if (nibble != 0 || started || shift == 0) {
        put(kHex[nibble]);
        started = true;
      }
    }
  }
  void putQuad(const std::uint8_t* b) {
    for (int i = 0; i < 4; ++i) {
      if (i > 0) {
        put('.');
      }
      putDecimal(b[i]);
    }
  }
  std::size_t length() const { return length_; }

 private:
  char* out_;
  std::size_t length_ = 0;
};

bool isMapped(const std::uint8_t* bytes) {
  static constexpr std::array<std::uint8_t, 12> kMappedPrefix{0, 0, 0, 0, 0, 0,
                                                              0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(bytes, kMappedPrefix.data(), kMappedPrefix.size()) == 0;
}

void writeV6(const std::uint8_t* bytes, TextWriter& w) {
  if (isMapped(bytes)) {
    w.put("::ffff:");
    w.putQuad(bytes + 12);
    return;
  }
  std::array<unsigned, 8> groups{};
  for (std::size_t g = 0; g < 8; ++g) {
    groups[g] = (unsigned{bytes[2 * g]} << 8) | bytes[2 * g + 1];
  }
  // RFC 5952 §4.2: compress the longest run of two or more zero groups, the first on a tie.
  int best_start = -1;
  int best_length = 1;
  for (int g = 0; g < 8;) {
    if (groups[static_cast<std::size_t>(g)] != 0) {
      ++g;
      continue;
    }
    int end = g;
    while (end < 8 && groups[static_cast<std::size_t>(end)] == 0) {
      ++end;
    }
    if (end - g > best_length) {
      best_start = g;
      best_length = end - g;
    }
    g = end;
  }
  for (int g = 0; g < 8; ++g) {
    if (g == best_start) {
      w.put("::");
      g += best_length - 1;
      continue;
    }
    if (g > 0 && g != best_start + best_length) {
      w.put(':');
    }
    w.putHexGroup(groups[static_cast<std::size_t>(g)]);
  }
}

}  // namespace

std::size_t writeIpText(std::span<const std::uint8_t> octets,
                        char (&out)[kMaxIpTextLength + 1]) {
  TextWriter w(out);
  if (octets.size() == 4) {
    w.putQuad(octets.data());
  } else if (octets.size() == 16) {
    writeV6(octets.data(), w);
  }
  out[w.length()] = '\0';
  return w.length();
}

}  // namespace sluice
