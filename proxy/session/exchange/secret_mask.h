#pragma once
// Keeps injected secrets from coming back to the sandbox (credential brokering: it only ever
// holds the placeholder). An upstream that echoes request headers (an echo endpoint, an error
// message quoting the key, a debug page that base64-encodes what it got) would otherwise hand
// the real secret to the sandbox. Every occurrence of any form of a secret (SecretPatterns: the
// exact bytes, hex, percent-encoding, base64) is overwritten with '*' of the same length, so
// framing and lengths hold.
//
// A response arrives in pieces and an occurrence may straddle two of them: feed() passes on
// what no later byte can make part of an occurrence and holds back the rest, which is only the
// bytes that could still begin one (the text so far ends with the start of a pattern; at most
// SecretPatterns::longestMatch() bytes, usually none), until the next piece or finish(). A
// stream whose pieces end outside any pattern (server-sent events, lines of JSON) is passed
// on as it comes. Time is linear in the bytes fed; memory is the held bytes and one piece.
// Pure: bytes in, bytes out.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "proxy/secrets/secret_patterns.h"

namespace sluice::proxy::session {

class SecretMask {
 public:
  // Starts a new text (a response head, a response body). `patterns` must outlive its use
  // (they belong to the Generation's secrets, which the session holds until the exchange is
  // over); null or empty: inactive, and the caller passes bytes on without feeding them.
  void reset(const SecretPatterns* patterns);
  bool active() const { return patterns_ != nullptr; }
  // Appends to `out` what of the text so far is safe to send, masked.
  void feed(std::span<const char> in, std::string& out);
  // Appends what was held back, masked; the text is over. The mask stays active for the next
  // text with the same patterns.
  void finish(std::string& out);

 private:
  // A stretch of pending_ to mask: [begin, end).
  struct Run {
    std::size_t begin;
    std::size_t end;
  };

  void scan(std::size_t from);
  void addRun(std::size_t begin, std::size_t end);
  void emit(std::size_t count, std::string& out);
  void restart();

  const SecretPatterns* patterns_ = nullptr;
  SecretPatterns::State state_ = 0;
  // The bytes scanned but not yet passed on, as they came (masking is applied when they go).
  std::string pending_;
  // What to mask in pending_, in order and disjoint: occurrences are found in the order they
  // end, so a new one merges with the last few (each run merged once: linear however the
  // occurrences overlap).
  std::vector<Run> runs_;
  // Bytes to mask if they come next (the base64 character a secret shares with what follows).
  ByteSet after_;
  bool after_pending_ = false;
};

}  // namespace sluice::proxy::session
