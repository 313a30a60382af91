// libFuzzer target for the response masking: an upstream chooses every byte of a response, and
// how TCP cuts it into reads. The input is: one byte L, then L bytes of secret (at most 48),
// then one byte S seeding the cuts, then the response.
// Parser files: proxy/session/exchange/secret_mask.cc proxy/secrets/secret_patterns.cc
//   proxy/secrets/secret_forms.cc
// Invariants, each a trap on violation:
//   - the output is as long as the response, and each byte is the response's or '*';
//   - cutting the response into pieces (of sizes drawn from S) gives the same output as one
//     piece;
//   - the secret does not survive in the output (unless it holds a '*', which masking writes).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/secrets/secret_patterns.h"
#include "proxy/session/exchange/secret_mask.h"

namespace {

using sluice::proxy::session::SecretMask;
using sluice::proxy::SecretPatterns;

std::string maskInPieces(const SecretPatterns& patterns, std::string_view text, std::uint8_t seed) {
  SecretMask mask;
  mask.reset(&patterns);
  std::string out;
  std::size_t at = 0;
  std::uint32_t state = seed * 2654435761u + 1;
  while (at < text.size()) {
    state = state * 1103515245u + 12345u;
    const std::size_t piece = seed == 0 ? text.size() : 1 + (state >> 16) % (seed % 64 + 1);
    const std::size_t n = piece < text.size() - at ? piece : text.size() - at;
    mask.feed(std::span<const char>(text.data() + at, n), out);
    at += n;
  }
  mask.finish(out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) {
    return 0;
  }
  const std::size_t length = data[0] % 49;
  if (size < 2 + length) {
    return 0;
  }
  const std::string_view secret(reinterpret_cast<const char*>(data + 1), length);
  const std::uint8_t seed = data[1 + length];
  const std::string_view text(reinterpret_cast<const char*>(data + 2 + length), size - 2 - length);
  const std::string_view secrets[] = {secret};
  const SecretPatterns patterns = SecretPatterns::build(secrets);

  const std::string whole = maskInPieces(patterns, text, 0);
  if (whole.size() != text.size()) {
    __builtin_trap();
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (whole[i] != text[i] && whole[i] != '*') {
      __builtin_trap();
    }
  }
  if (maskInPieces(patterns, text, seed) != whole) {
    __builtin_trap();
  }
  if (!secret.empty() && secret.find('*') == std::string_view::npos &&
      whole.find(secret) != std::string::npos) {
    __builtin_trap();
  }
  return 0;
}
