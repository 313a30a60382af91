// TLS toward the sandbox once TunnelOpening has let the handshake start: the handshake driven on,
// the client's records decrypted into the codec, and a close_notify or a failure ending it.
#include <spdlog/spdlog.h>

#include "proxy/session/client_connection.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy::session {

void ClientConnection::onHandshakeBytes() { pumpClientTls(); }

void ClientConnection::onTunnelOpen() {
  timer_.setPhase(0);
  timer_.setRelease(timer_.now() + 1000);  // a tunnel opened ahead of its first use
  armTimer();
  if (transport_.tls().alpn() == tls::kAlpnH2) {
    startHttp2();
    return;
  }
  codec_.restart();
  transition(ConnectionState::Serving);
}

void ClientConnection::pumpClientTls() {
  if (state_ == ConnectionState::TlsHandshake && !opening_.handshake()) {
    return;
  }
  const tls::ReadStatus status = transport_.tls().readEach([this](std::span<const char> plain) {
    if (h2_) {
      if (state_ != ConnectionState::Multiplexing) {
        return false;  // the session is over: nothing more is read
      }
      noteProgress();
      h2_->feed(plain);  // frames are processed as they complete: nothing is copied
      return !closing() && state_ == ConnectionState::Multiplexing;
    }
    codec_.feed(plain);  // copied: the codec keeps what it has not parsed yet
    return true;
  });
  sendClient({});  // TLS 1.3 may answer records (key updates) even on read
  if (closing()) {
    return;
  }
  if (h2_) {
    if (state_ == ConnectionState::Multiplexing &&
        (status == tls::ReadStatus::Closed || status == tls::ReadStatus::Failed)) {
      onEof(transport_.stream());  // close_notify or a failure: as the end of its stream
    }
    return;
  }
  codec_.process();
  if (status == tls::ReadStatus::WantIo) {
    return;
  }
  // close_notify or a fatal error: what arrived before it is parsed (above), then the connection
  // ends. After close_notify the answer to a request in flight can still be sent; after a failure
  // (garbage, too many KeyUpdates) nothing can, so it ends now.
  if (status == tls::ReadStatus::Failed) {
    SPDLOG_DEBUG("[C{}] sandbox TLS failed: {}", facts_.id, transport_.tls().failure().detail);
  }
  if (!closing() && state_ != ConnectionState::Lingering) {
    if (exchange_.inFlight() && status == tls::ReadStatus::Closed) {
      closeAfterExchange();
      if (exchange_.state() == ExchangeState::Tunneling) {
        exchange_.onClientClosed();  // close_notify ends the client's side of a WebSocket
      }
    } else {
      finishConnection();
    }
  }
}

}  // namespace sluice::proxy::session
