#pragma once
// The forms in which an injected secret can come back from an origin that reflects what it was
// sent, each as a byte pattern the response masking looks for
// (docs/wire.md#what-masking-catches-and-what-it-does-not):
//   - the exact bytes;
//   - hex, all lower or all upper case;
//   - percent-encoding, hex digits all upper or all lower case, with every byte encoded, or
//     with the bytes the common encoders leave alone left as they are: RFC 3986's unreserved
//     set (A-Z a-z 0-9 - . _ ~); that set and ! ' ( ) * (JavaScript's encodeURIComponent);
//     that set and / (Python's quote()); form encoding, with space as + and the unreserved set
//     or HTML's (A-Z a-z 0-9 * - . _) left alone;
//   - base64 and base64url, at each of the three alignments the secret can have inside a
//     longer encoded text: the characters that depend on the secret's bytes alone (so the
//     pattern holds with or without padding, whatever precedes or follows), and for the one
//     character at each end that the secret shares with its neighbours, the set of characters
//     it can be given the secret's bits in it (`before`, `after`): those are masked too, so not
//     a bit of the secret is left readable.
// Pure.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy {

// A set of byte values.
class ByteSet {
 public:
  void add(unsigned char c) { words_[c >> 6] |= std::uint64_t{1} << (c & 63); }
  bool contains(unsigned char c) const { return (words_[c >> 6] >> (c & 63)) & 1; }
  bool empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  ByteSet& operator|=(const ByteSet& other) {
    for (std::size_t i = 0; i < words_.size(); ++i) {
      words_[i] |= other.words_[i];
    }
    return *this;
  }
  friend bool operator==(const ByteSet&, const ByteSet&) = default;

 private:
  std::array<std::uint64_t, 4> words_{};
};

struct MaskPattern {
  std::string text;
  // A byte of this set right before (after) `text` is masked with it; empty: none is.
  ByteSet before;
  ByteSet after;
};

// Derived forms shorter than this are not looked for: a pattern of a few characters would mask
// unrelated text. Every form of a secret of 7 bytes or more is at least this long.
inline constexpr std::size_t kMinDerivedPattern = 8;

// Every form of `secret` (the exact bytes first), identical texts merged with their sets
// joined. The texts are secret material: the caller wipes them.
std::vector<MaskPattern> maskPatterns(std::string_view secret);

}  // namespace sluice::proxy
