// TLS toward the sandbox once TunnelOpening has let the handshake start: the handshake driven on,
// the client's records decrypted into the codec, and a close_notify or a failure ending it.
#include <spdlog/spdlog.h>

#include "proxy/session/client_connection.h"

namespace sluice::proxy::session {

namespace {

// Plaintext decrypted from the client, per thread; consumed (or copied) before returning.
constexpr std::size_t kPlainChunk = 16 * 1024;
thread_local char t_plain[kPlainChunk];

}  // namespace

void ClientConnection::onHandshakeBytes() { pumpClientTls(); }

void ClientConnection::onTunnelOpen() {
  timer_.setPhase(0);
  timer_.setRelease(timer_.now() + 1000);  // a tunnel opened ahead of its first use
  armTimer();
  codec_.restart();
  transition(ConnectionState::Serving);
}

void ClientConnection::pumpClientTls() {
  if (state_ == ConnectionState::TlsHandshake && !opening_.handshake()) {
    return;
  }
  for (;;) {
    std::size_t n = 0;
    tls::ReadStatus status = transport_.tls().read(std::span<char>(t_plain, kPlainChunk), &n);
    if (status == tls::ReadStatus::Data) {
      codec_.feed(std::span<const char>(t_plain, n));
      continue;
    }
    sendClient({});  // TLS 1.3 may answer records (key updates) even on read
    if (closing()) {
      return;
    }
    if (status == tls::ReadStatus::WantIo) {
      break;
    }
    // close_notify or a fatal error: parse what arrived, then end the connection. After
    // close_notify the answer to a request in flight can still be sent; after a failure
    // (garbage, too many KeyUpdates) nothing can, so it ends now.
    if (status == tls::ReadStatus::Failed) {
      SPDLOG_DEBUG("[C{}] sandbox TLS failed: {}", facts_.id, transport_.tls().failure().detail);
    }
    codec_.process();
    if (!closing() && state_ != ConnectionState::Lingering) {
      if (exchange_.inFlight() && status == tls::ReadStatus::Closed) {
        closeAfterExchange();
      } else {
        finishConnection();
      }
    }
    return;
  }
  codec_.process();
}

}  // namespace sluice::proxy::session
