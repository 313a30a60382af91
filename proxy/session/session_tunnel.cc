// The tunnel half of the session: a CONNECT decided on its target, the ClientHello read by
// sluice's own parser and decided on its SNI, then TLS terminated with a leaf for H. A tunnel
// that gets no TLS session ends with an alert where one can be sent (SPEC §5.4).
#include <spdlog/spdlog.h>

#include "policy/authority.h"
#include "proxy/gateway_state.h"
#include "proxy/generation.h"
#include "proxy/session/denial.h"
#include "proxy/session/session.h"
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

void Session::onConnectHead() {
  if (!takeUpCurrentGeneration() || refuseIfAuditUnavailable()) {
    return;
  }
  const http::RequestHead& head = request_parser_.head();
  connect_authority_.assign(head.connect_authority);
  beginRecord(false);
  exchange_.method = "CONNECT";
  exchange_.url = "https://" + connect_authority_;
  exchange_.scheme = policy::Scheme::Https;
  if (head.host_count == 1) {
    exchange_.host_header.emplace(head.host);
  }
  if (state_ != ConnectionState::ReadingProxyHead) {
    deny(policy::Reason::BadRequest, mode_ == audit::Mode::Transparent
                                         ? "CONNECT on a redirected connection"
                                         : "CONNECT inside a tunnel");
    return;
  }
  auto authority = policy::parseAuthority(connect_authority_, policy::PortRule::Required);
  if (!authority) {
    deny(policy::Reason::BadRequest, policy::toString(authority.error()));
    return;
  }
  connect_host_.assign(authority->host);
  connect_port_ = *authority->port;
  exchange_.target_host = connect_host_;
  exchange_.port = connect_port_;

  policy::RequestFacts facts;
  facts.target_host = connect_host_;
  facts.port = connect_port_;
  facts.scheme = policy::Scheme::Https;
  policy::Decision d = policy::decide(sandbox(), facts);
  exchange_.host.assign(d.host.text());
  exchange_.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!d.forwards()) {
    // A refused CONNECT is a request that ends here, with a record: deny() takes a token for
    // it like for any request (an allowed one does not; the requests inside the tunnel will).
    deny(d.reason, explainDenial(d.reason, sandbox().name,
                                 exchange_.host.empty() ? connect_host_ : exchange_.host,
                                 "CONNECT", connect_authority_));
    return;
  }
  exchange_.policy_reason = d.reason;
  // The tunnel is not a request; each request inside it will be.
  transition(ExchangeState::Idle);
  // The tunnel is open; what follows must be a ClientHello naming H.
  mode_ = audit::Mode::Connect;
  hello_.assign(client_plain_.data() + client_plain_offset_,
                client_plain_.size() - client_plain_offset_);
  client_plain_.clear();
  client_plain_offset_ = 0;
  flushCorked();
  client_.write(std::string_view("HTTP/1.1 200 Connection established\r\n\r\n"));
  transition(ConnectionState::ReadingClientHello);
  if (!hello_.empty()) {
    processClientHello();
  }
}

// Transparent: the first byte tells TLS (a handshake record, 0x16) from anything else, which is
// read as HTTP/1.1 with H from its Host (SPEC §5.2).
void Session::onFirstBytes(std::span<const char> data) {
  if (static_cast<unsigned char>(data.front()) == 0x16) {
    transition(ConnectionState::ReadingClientHello);
    hello_.append(data.data(), data.size());
    processClientHello();
    return;
  }
  transition(ConnectionState::Serving);
  client_plain_.append(data.data(), data.size());
  processClientPlaintext();
}

void Session::processClientHello() {
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
  // A redirected connection's ClientHello is where its tunnel starts: judged by the
  // configuration in force now. After a CONNECT, the tunnel started with the CONNECT and is
  // finished under that one (a reload in between meets its first request, with a 403 over TLS).
  if (mode_ == audit::Mode::Transparent && !takeUpCurrentGeneration()) {
    return;
  }
  if (mode_ == audit::Mode::Transparent) {
    // Transparent TLS: H is the SNI, the port is the one the sandbox dialled (SPEC §5.2).
    connect_port_ = orig_dst_ ? orig_dst_->port : 443;
    connect_host_.assign(hello.info.sni_state == tls::SniState::Present ? hello.info.sni()
                                                                       : std::string_view{});
    connect_authority_ = connect_host_ + ":" + std::to_string(connect_port_);
    // A record is written only if the connection is refused here: the tunnel is no request.
    beginRecord(false);
    exchange_.url = "https://" + connect_authority_;
    exchange_.scheme = policy::Scheme::Https;
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
  facts.target_host = connect_host_;
  facts.port = connect_port_;
  facts.scheme = policy::Scheme::Https;
  switch (hello.info.sni_state) {
    case tls::SniState::Absent:
      facts.sni_state = policy::SniState::Absent;
      break;
    case tls::SniState::Present:
      facts.sni_state = policy::SniState::Present;
      sni_.assign(hello.info.sni());
      facts.sni = sni_;
      break;
    case tls::SniState::Malformed:
      // Two names, another name type, an empty or over-long name: not one name equal to H.
      facts.sni_state = policy::SniState::Present;
      sni_.clear();
      facts.sni = sni_;
      break;
  }
  sni_state_ = facts.sni_state;
  // A redirected connection's tunnel is a new request; after a CONNECT, the CONNECT was.
  if (mode_ == audit::Mode::Transparent && refuseIfAuditUnavailable()) {
    return;
  }
  policy::Decision d = policy::decide(sandbox(), facts);
  exchange_.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!d.forwards()) {
    refuseTunnel(d.reason, kAlertUnrecognizedName, sni_);
    return;
  }

  // Mint (or take from the cache) a leaf for H only now, after the decision (BYPASSES R6).
  auto leaf = runtime_->leaves->get(d.host.text());
  if (!leaf) {
    spdlog::error("[C{}] cannot mint a certificate for {}: {}", id_, d.host.text(), leaf.error());
    refuseTunnel(policy::Reason::None, kAlertInternalError, "");
    return;
  }
  auto session = tls::TlsSession::server(ctx_.state->sandbox_tls.get(),
                                         leaf.value()->certificate.get(), runtime_->leaves->key());
  if (!session) {
    spdlog::error("[C{}] TLS setup failed: {}", id_, session.error());
    refuseTunnel(policy::Reason::None, kAlertInternalError, "");
    return;
  }
  client_tls_.emplace(std::move(session).value());
  client_tls_->feed(std::span<const char>(hello_.data(), hello_.size()));
  hello_.clear();
  hello_.shrink_to_fit();
  if (exchange_.state == ExchangeState::Deciding) {
    transition(ExchangeState::Idle);  // a redirected connection's tunnel: not a request
  }
  transition(ConnectionState::TlsHandshake);
  pumpClientTls();
}

void Session::pumpClientTls() {
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
      SPDLOG_DEBUG("[C{}] sandbox TLS handshake failed: {}", id_, client_tls_->failure().detail);
      finishConnection();
      return;
    }
    // Whatever read the SNI for the decision, the name OpenSSL negotiated must be the same
    // (SPEC §5.1): two parsers that disagree are a bypass.
    if (client_tls_->servername() != sni_) {
      refuseTunnel(policy::Reason::SniMismatch, 0, "OpenSSL negotiated another name");
      return;
    }
    phase_deadline_ms_ = 0;
    release_deadline_ms_ = uv_now(ctx_.loop) + 1000;  // a tunnel opened ahead of its first use
    armTimer();
    request_parser_.reset();
    transition(ConnectionState::Serving);
  }
  for (;;) {
    std::size_t n = 0;
    tls::ReadStatus status = client_tls_->read(std::span<char>(t_plain, kPlainChunk), &n);
    if (status == tls::ReadStatus::Data) {
      client_plain_.append(t_plain, n);
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
      SPDLOG_DEBUG("[C{}] sandbox TLS failed: {}", id_, client_tls_->failure().detail);
    }
    processClientPlaintext();
    if (!closing() && state_ != ConnectionState::Lingering) {
      if (exchange_.inFlight() && status == tls::ReadStatus::Closed) {
        closeAfterExchange();
      } else {
        finishConnection();
      }
    }
    return;
  }
  processClientPlaintext();
}

void Session::refuseTunnel(policy::Reason reason, std::uint8_t alert, std::string_view detail) {
  flushCorked();
  SPDLOG_DEBUG("[C{}] refuse tunnel {}: {}", id_, policy::toString(reason), detail);
  if (alert != 0) {
    auto record = tls::alertRecord(alert);
    client_.write(std::string_view(reinterpret_cast<const char*>(record.data()), record.size()));
  }
  if (reason != policy::Reason::None) {
    // A refused tunnel is on record like a refused request, and takes a token like one.
    if (!chargeRequest()) {
      reason = policy::Reason::RateLimited;
      exchange_.rule.clear();
    }
    writeAudit(policy::Verdict::Deny, reason, 0);
    transition(ExchangeState::Denied);
  } else if (exchange_.state == ExchangeState::Deciding) {
    transition(ExchangeState::Idle);  // sluice's own failure: no request, no record
  }
  client_tls_.reset();  // nothing polite to say over a TLS session that never was
  finishConnection();
}

}  // namespace sluice::proxy::session
