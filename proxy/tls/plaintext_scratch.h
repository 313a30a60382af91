#pragma once
// The one per-thread buffer TLS plaintext is decrypted into (TlsSession::readEach): a read hands
// each piece on before it decrypts the next, so one 16 KiB buffer per thread serves every TLS
// session of its loop, the sandbox's and the origins' alike, and no connection holds one.
//
// Held by one reader at a time: a reader that started another read while it still held the
// buffer would overwrite the piece it is handing on (an assertion in debug builds).
#include <cstddef>
#include <span>

namespace sluice::proxy::tls {

class PlaintextScratch {
 public:
  static constexpr std::size_t kBytes = 16 * 1024;

  PlaintextScratch();
  ~PlaintextScratch();
  PlaintextScratch(const PlaintextScratch&) = delete;
  PlaintextScratch& operator=(const PlaintextScratch&) = delete;

  std::span<char> bytes() const;
};

}  // namespace sluice::proxy::tls
