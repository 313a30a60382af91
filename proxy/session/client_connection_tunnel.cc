// TLS toward the sandbox once TunnelOpening has let the handshake start: the handshake driven on,
// the client's records decrypted into the codec, and a close_notify or a failure ending it.
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy::session {

namespace {

// What the sandbox's failed handshake says (RFC 8446 §6.2): a client that refuses a server's
// certificate sends unknown_ca (48) when it does not trust the issuer, or one of
// bad_certificate (42) to certificate_unknown (46).
audit::Error handshakeEnd(const tls::Failure& failure) {
  if (failure.kind != tls::FailureKind::Alert) {
    return audit::Error::TlsFailed;
  }
  switch (failure.alert) {
    case SSL_AD_CLOSE_NOTIFY:
      return audit::Error::ClientClosed;
    case SSL_AD_UNKNOWN_CA:
      return audit::Error::TlsUnknownCa;
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_CERTIFICATE_EXPIRED:
    case SSL_AD_CERTIFICATE_UNKNOWN:
      return audit::Error::TlsBadCertificate;
    default:
      return audit::Error::TlsFailed;
  }
}

}  // namespace

void ClientConnection::onHandshakeFailed(const tls::Failure& failure) {
  const audit::Error why = handshakeEnd(failure);
  noteTunnelEnd(why);
  if (why != audit::Error::TlsUnknownCa && why != audit::Error::TlsBadCertificate) {
    return;
  }
  // The one sign a user gets that a client does not trust the sandbox's CA (npm, Java, a
  // runtime with its own trust list): at the default level, once a minute per sandbox, name
  // and alert (docs/audit.md#errors).
  const char* alert = SSL_alert_desc_string_long(failure.alert);
  const std::string key = facts_.host + "\n" + alert;
  std::uint64_t suppressed = 0;
  if (!binding_.runtime().certificate_refusals.take(key, uv_now(ctx_.loop), suppressed)) {
    return;
  }
  // unknown_ca says the client does not trust the issuer; the other certificate alerts say
  // less (a client that pins, or checks what a minted leaf cannot give), so the line says so.
  const std::string_view what = why == audit::Error::TlsUnknownCa
                                    ? "it does not trust the sandbox's CA"
                                    : "if it does not trust the sandbox's CA";
  spdlog::info(
      "sandbox '{}': a client refused sluice's certificate for {} (TLS alert: {}): {}; give it "
      "{}/ca.pem (`sluice env` prints the variables clients read){}",
      sandbox().name, facts_.host, alert, what, binding_.runtime().ca_dir,
      suppressed == 0 ? std::string()
                      : " (" + std::to_string(suppressed) + " more since the last such line)");
}

void ClientConnection::noteTunnelEnd(audit::Error why) {
  if (tunnel_end_ == audit::Error::None) {
    tunnel_end_ = why;
  }
}

void ClientConnection::recordQuietTunnel() {
  // A tunnel: TLS started for an allowed name, or a CONNECT answered 200 whose ClientHello has
  // not come (a redirected connection's has not been decided yet: no tunnel).
  const bool tunnel =
      facts_.route == Route::Tunnel ||
      (state_ == ConnectionState::ReadingClientHello && facts_.mode == audit::Mode::Connect);
  if (!tunnel || audited_) {
    return;
  }
  audit::Proto proto = audit::Proto::None;
  if (h2_) {
    proto = audit::Proto::H2;
  } else if (transport_.secure() && transport_.tls().handshakeDone()) {
    proto = audit::Proto::Http1;
  }
  // (No cause noted: the sandbox's side ended it, a GOAWAY or a TLS close without a request.)
  const audit::Error why =
      tunnel_end_ == audit::Error::None ? audit::Error::ClientClosed : tunnel_end_;
  exchange_.recordQuietTunnel(proto, why, facts_.mode == audit::Mode::Connect ? 200 : 0);
}

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
  noteTunnelEnd(status == tls::ReadStatus::Failed ? audit::Error::TlsFailed
                                                  : audit::Error::ClientClosed);
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
