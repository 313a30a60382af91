// The opening of a tunnel: a redirected connection's first byte (TLS or HTTP), the ClientHello
// read by sluice's own parser and decided on with its SNI, then TLS terminated with a leaf for
// H. A tunnel that gets no TLS session ends with an alert where one can be sent
// (docs/wire.md#tunnels-that-get-no-tls-session).
#include <spdlog/spdlog.h>

#include "proxy/gateway_state.h"
#include "proxy/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/tls/client_hello.h"

namespace sluice::proxy::session {

namespace {

// Plaintext decrypted from the client, per thread; consumed (or copied) before returning.
constexpr std::size_t kPlainChunk = 16 * 1024;
thread_local char t_plain[kPlainChunk];

using tls::kAlertDecodeError;
using tls::kAlertHandshakeFailure;
using tls::kAlertInternalError;
using tls::kAlertUnrecognizedName;

}  // namespace

// Transparent: the first byte tells TLS (a handshake record, 0x16) from anything else, which is
// read as HTTP/1.1 with H from its Host (docs/wire.md#transparent-mode).
void ClientConnection::onFirstBytes(std::span<const char> data) {
  if (static_cast<unsigned char>(data.front()) == 0x16) {
    transition(ConnectionState::ReadingClientHello);
    hello_.append(data.data(), data.size());
    processClientHello();
    return;
  }
  facts_.route = Route::Plain;
  transition(ConnectionState::Serving);
  codec_.feed(data);
  codec_.process();
}

void ClientConnection::processClientHello() {
  auto bytes = std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(hello_.data()),
                                             hello_.size());
  tls::HelloResult hello = tls::parseClientHello(bytes);
  switch (hello.status) {
    case tls::HelloStatus::NeedMore:
      return;
    case tls::HelloStatus::NotTls:
      refuseTunnel(policy::Reason::NotTls, 0, "the tunnel did not start with a ClientHello");
      return;
    case tls::HelloStatus::Malformed:
      refuseTunnel(policy::Reason::NotTls, kAlertDecodeError, "malformed ClientHello");
      return;
    case tls::HelloStatus::TooLarge:
      refuseTunnel(policy::Reason::HeaderTooLarge, kAlertHandshakeFailure,
                   "ClientHello over 64 KiB");
      return;
    case tls::HelloStatus::Done:
      break;
  }
  const bool transparent = facts_.mode == audit::Mode::Transparent;
  // A redirected connection's ClientHello is where its tunnel starts: judged by the
  // configuration in force now. After a CONNECT, the tunnel started with the CONNECT and is
  // finished under that one (a reload in between meets its first request, with a 403 over TLS).
  if (transparent && !takeUpCurrentGeneration()) {
    return;
  }
  if (transparent) {
    // Transparent TLS: H is the SNI, the port is the one the sandbox dialled.
    facts_.port = facts_.orig_dst ? facts_.orig_dst->port : 443;
    facts_.host.assign(hello.info.sni_state == tls::SniState::Present ? hello.info.sni()
                                                                     : std::string_view{});
    facts_.authority = facts_.host + ":" + std::to_string(facts_.port);
    // A record is written only if the connection is refused here: the tunnel is no request.
    exchange_.beginRecord(false);
    exchange_.record().url = "https://" + facts_.authority;
    exchange_.record().scheme = policy::Scheme::Https;
    if (hello.info.sni_state == tls::SniState::Absent) {
      refuseTunnel(policy::Reason::SniMissing, kAlertUnrecognizedName, "no SNI");
      return;
    }
    if (hello.info.sni_state == tls::SniState::Malformed) {
      refuseTunnel(policy::Reason::BadHost, kAlertUnrecognizedName, "malformed SNI");
      return;
    }
  }
  policy::RequestFacts facts;
  facts.target_host = facts_.host;
  facts.port = facts_.port;
  facts.scheme = policy::Scheme::Https;
  switch (hello.info.sni_state) {
    case tls::SniState::Absent:
      facts.sni_state = policy::SniState::Absent;
      break;
    case tls::SniState::Present:
      facts.sni_state = policy::SniState::Present;
      facts_.sni.assign(hello.info.sni());
      facts.sni = facts_.sni;
      break;
    case tls::SniState::Malformed:
      // Two names, another name type, an empty or over-long name: not one name equal to H.
      facts.sni_state = policy::SniState::Present;
      facts_.sni.clear();
      facts.sni = facts_.sni;
      break;
  }
  facts_.sni_state = facts.sni_state;
  // A redirected connection's tunnel is a new request; after a CONNECT, the CONNECT was.
  if (transparent && refuseIfAuditUnavailable()) {
    return;
  }
  policy::Decision d = policy::decide(sandbox(), facts);
  exchange_.record().rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!d.forwards()) {
    refuseTunnel(d.reason, kAlertUnrecognizedName, facts_.sni);
    return;
  }

  // Mint (or take from the cache) a leaf for H only now, after the decision: a name the policy
  // refuses never costs a signature.
  auto leaf = runtime_->leaves->get(d.host.text());
  if (!leaf) {
    spdlog::error("[C{}] cannot mint a certificate for {}: {}", facts_.id, d.host.text(),
                  leaf.error());
    refuseTunnel(policy::Reason::None, kAlertInternalError, "");
    return;
  }
  auto session = tls::TlsSession::server(ctx_.state->sandbox_tls.get(),
                                         leaf.value()->certificate.get(), runtime_->leaves->key());
  if (!session) {
    spdlog::error("[C{}] TLS setup failed: {}", facts_.id, session.error());
    refuseTunnel(policy::Reason::None, kAlertInternalError, "");
    return;
  }
  client_tls_.emplace(std::move(session).value());
  facts_.route = Route::Tunnel;
  client_tls_->feed(std::span<const char>(hello_.data(), hello_.size()));
  hello_.clear();
  hello_.shrink_to_fit();
  if (exchange_.state() == ExchangeState::Deciding) {
    exchange_.tunnelOpened();  // a redirected connection's tunnel: not a request
  }
  transition(ConnectionState::TlsHandshake);
  pumpClientTls();
}

void ClientConnection::pumpClientTls() {
  if (state_ == ConnectionState::TlsHandshake) {
    tls::HandshakeStatus status = client_tls_->handshake();
    sendClient({});
    if (closing()) {
      return;
    }
    if (status == tls::HandshakeStatus::WantIo) {
      return;
    }
    if (status == tls::HandshakeStatus::Failed) {
      SPDLOG_DEBUG("[C{}] sandbox TLS handshake failed: {}", facts_.id,
                   client_tls_->failure().detail);
      finishConnection();
      return;
    }
    // Whatever read the SNI for the decision, the name OpenSSL negotiated must be the same
    // (docs/wire.md#tls-toward-the-sandbox): two parsers that disagree are a bypass.
    if (client_tls_->servername() != facts_.sni) {
      refuseTunnel(policy::Reason::SniMismatch, 0, "OpenSSL negotiated another name");
      return;
    }
    phase_deadline_ms_ = 0;
    release_deadline_ms_ = uv_now(ctx_.loop) + 1000;  // a tunnel opened ahead of its first use
    armTimer();
    codec_.restart();
    transition(ConnectionState::Serving);
  }
  for (;;) {
    std::size_t n = 0;
    tls::ReadStatus status = client_tls_->read(std::span<char>(t_plain, kPlainChunk), &n);
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
      SPDLOG_DEBUG("[C{}] sandbox TLS failed: {}", facts_.id, client_tls_->failure().detail);
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

void ClientConnection::refuseTunnel(policy::Reason reason, std::uint8_t alert,
                                    std::string_view detail) {
  flushCorked();
  SPDLOG_DEBUG("[C{}] refuse tunnel {}: {}", facts_.id, policy::toString(reason), detail);
  if (alert != 0) {
    auto record = tls::alertRecord(alert);
    client_.write(std::string_view(reinterpret_cast<const char*>(record.data()), record.size()));
  }
  exchange_.refuseWithoutAnswer(reason);  // on record like a refused request (None: sluice's)
  client_tls_.reset();  // nothing polite to say over a TLS session that never was
  finishConnection();
}

}  // namespace sluice::proxy::session
