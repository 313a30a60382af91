#pragma once
// Keeps injected secrets from coming back to the sandbox (docs/wire.md#credential-brokering: the
// sandbox only ever holds the placeholder). An upstream that echoes request headers (an echo
// endpoint, an error message quoting the key) would otherwise hand the real secret to the sandbox.
// Each occurrence in the response is overwritten with '*' of the same length, so framing and
// lengths hold.
//
// A body arrives in pieces and an occurrence may straddle two of them: the last
// (longest secret - 1) bytes of each piece are held back until the next piece, or finish().
// Pure: bytes in, bytes out.

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::session {

// Overwrites every occurrence of each secret in `text`.
void maskSecrets(std::span<char> text, std::span<const std::string_view> secrets);

class SecretMask {
 public:
  // Starts a new body; `secrets` must outlive its use (they live in the session's
  // Generation, which it holds until the exchange is over).
  void reset(std::span<const std::string_view> secrets);
  bool active() const { return !secrets_.empty(); }
  // Appends to `out` what of `in` (after what was held back) is safe to send.
  void feed(std::span<const char> in, std::string& out);
  // Appends what was held back; the body is over.
  void finish(std::string& out);

 private:
  std::vector<std::string_view> secrets_;
  std::size_t keep_ = 0;  // longest secret - 1
  std::string pending_;
};

}  // namespace sluice::proxy::session
