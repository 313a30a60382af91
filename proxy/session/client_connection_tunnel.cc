// TLS toward the sandbox once TunnelOpening has let the handshake start: the handshake driven on,
// the client's records decrypted into the codec, and a close_notify or a failure ending it.
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/session/http1/http1_server_codec.h"
#include "proxy/session/http2/http2_server_codec.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy::session {

namespace {

// A tunnel closed this soon after its handshake, with nothing sent in it, was most likely
// closed by a client that checked sluice's certificate then (GnuTLS's clients do it within
// milliseconds), not one that opened it ahead of use and gave up waiting (browsers keep those
// for seconds).
constexpr std::uint64_t kClosedAtOnceMs = 1000;

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
  // and alert (docs/audit.md#errors). unknown_ca says the client does not trust the issuer; the
  // other certificate alerts say less (a client that pins, or checks what a minted leaf cannot
  // give), so the line says so.
  const std::string cause =
      std::string("refused sluice's certificate for ") + facts_.host + " (TLS alert: " +
      SSL_alert_desc_string_long(failure.alert) + ")";
  hintTheCaFile(cause, why == audit::Error::TlsUnknownCa ? "it does not trust the sandbox's CA"
                                                         : "if it does not trust the sandbox's CA");
}

void ClientConnection::hintTheCaFile(std::string_view cause, std::string_view what) {
  // `cause` names the host: it is the key (one line a minute per sandbox, name and cause).
  std::uint64_t suppressed = 0;
  if (!binding_.runtime().certificate_refusals.take(std::string(cause), uv_now(ctx_.loop),
                                                     suppressed)) {
    return;
  }
  spdlog::info(
      "sandbox '{}': a client {}: {}; give it {} (`sluice env` prints the variables clients "
      "read){}",
      sandbox().name, cause, what, binding_.runtime().ca_pem_shown,
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
  // (A tunnel refused in band has its record, from its refusal: the hint below still applies.)
  const bool refused = facts_.refused_in_band != policy::Reason::None;
  if (!tunnel || (audited_ && !refused)) {
    return;
  }
  const bool spoken = transport_.secure() && transport_.tls().handshakeDone() && codec_;
  // (No cause noted: the sandbox's side ended it, a GOAWAY or a TLS close without a request.)
  const audit::Error end =
      tunnel_end_ == audit::Error::None ? audit::Error::ClientClosed : tunnel_end_;
  if (!refused) {
    opening_.recordQuiet(spoken ? codec_->protocol() : audit::Proto::None, end);
  }
  // A GnuTLS client (wget, apt's https method) checks sluice's certificate once the handshake is
  // over and, not trusting it, closes without an alert or a byte: on record as client_closed,
  // and named like a client that refused the certificate (docs/audit.md#errors).
  if (spoken && end == audit::Error::ClientClosed && tunnel_plaintext_ == 0 &&
      uv_now(ctx_.loop) - tunnel_opened_ms_ <= kClosedAtOnceMs) {
    hintTheCaFile("closed its tunnel to " + facts_.host +
                      " right after the TLS handshake, without a byte",
                  "a client that checks the certificate after the handshake (GnuTLS: wget, "
                  "apt) does so when it does not trust the sandbox's CA");
  }
}

void ClientConnection::onConnectionError(audit::Error error) {
  opening_.recordFailure(codec_->protocol(), error);
}

void ClientConnection::onHandshakeBytes() { pumpClientTls(); }

void ClientConnection::onPlainHttp(std::span<const char> data) {
  if (!useCodec(audit::Proto::Http1)) {
    return;
  }
  transition(ConnectionState::Serving);
  codec_->feed(data);
  codec_->process();
}

void ClientConnection::onTunnelOpen() {
  timer_.setPhase(0);
  timer_.setRelease(timer_.now() + 1000);  // a tunnel opened ahead of its first use
  armTimer();
  const bool h2 = transport_.tls().alpn() == tls::kAlpnH2;
  if (!useCodec(h2 ? audit::Proto::H2 : audit::Proto::Http1)) {
    return;
  }
  SPDLOG_DEBUG("[C{}] ALPN {}: {}", facts_.id, h2 ? "h2" : "http/1.1",
               h2 ? "streams" : "requests");
  tunnel_opened_ms_ = uv_now(ctx_.loop);
  transition(ConnectionState::Serving);
}

// A new byte stream (the requests inside a tunnel, a redirected plain connection) gets a codec
// of its own: the proxy head's, if any, is done with.
bool ClientConnection::useCodec(audit::Proto protocol) {
  const std::size_t max_header_bytes = config().limits.max_header_bytes;
  std::unique_ptr<ClientCodec> made;
  if (protocol == audit::Proto::H2) {
    // The sandbox's limits.max_streams, for the connection's life (a reload that changes it
    // applies to its new connections: SETTINGS are promised once).
    const std::uint32_t max_streams = static_cast<std::uint32_t>(
        sandbox().limits.max_streams.value_or(Http2ServerCodec::kMaxConcurrentStreams));
    auto h2 = std::make_unique<Http2ServerCodec>(static_cast<CodecHost&>(*this), max_header_bytes,
                                                 max_streams);
    if (!h2->start()) {
      close("cannot start an HTTP/2 session");
      return false;
    }
    made = std::move(h2);
  } else {
    made = std::make_unique<Http1ServerCodec>(static_cast<CodecHost&>(*this), max_header_bytes);
  }
  retired_ = std::move(codec_);
  codec_ = std::move(made);
  return true;
}

void ClientConnection::pumpClientTls() {
  if (state_ == ConnectionState::TlsHandshake && !opening_.handshake()) {
    return;
  }
  const tls::ReadStatus status = transport_.tls().readEach([this](std::span<const char> plain) {
    if (state_ != ConnectionState::Serving) {
      return false;  // the codec is over (an HTTP/2 session ended): nothing more is read
    }
    tunnel_plaintext_ += plain.size();
    return codec_->feed(plain) && !closing() && state_ == ConnectionState::Serving;
  });
  sendClient({});  // TLS 1.3 may answer records (key updates) even on read
  if (closing() || state_ != ConnectionState::Serving) {
    return;
  }
  codec_->process();
  if (status == tls::ReadStatus::WantIo || closing() || state_ != ConnectionState::Serving) {
    return;
  }
  // close_notify or a fatal error: what arrived before it is taken (above), then the
  // connection ends. After close_notify the answer to a request in flight can still be sent;
  // after a failure (garbage, too many KeyUpdates) nothing can.
  if (status == tls::ReadStatus::Failed) {
    SPDLOG_DEBUG("[C{}] sandbox TLS failed: {}", facts_.id, transport_.tls().failure().detail);
  }
  noteTunnelEnd(status == tls::ReadStatus::Failed ? audit::Error::TlsFailed
                                                  : audit::Error::ClientClosed);
  closeAfterExchange();
  codec_->onClientEnd(status == tls::ReadStatus::Failed ? ClientEnd::TlsFailed
                                                        : ClientEnd::CloseNotify);
}

}  // namespace sluice::proxy::session
