#include "proxy/session/tunnel_opening.h"

#include <spdlog/spdlog.h>

#include "base/ascii.h"
#include "policy/authority.h"
#include "policy/refusal.h"
#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/tls/client_hello.h"

namespace sluice::proxy::session {

namespace {

using tls::kAlertDecodeError;
using tls::kAlertHandshakeFailure;
using tls::kAlertInternalError;
using tls::kAlertUnrecognizedName;

// A client that would rather have the refusal as the CONNECT's answer says so
// (docs/wire.md#refusals-in-band).
bool asksForRefusalAtConnect(const http::RequestHead& head) {
  std::optional<std::string_view> asked = head.headers.find("sluice-refusal");
  return asked && ascii::iequals(*asked, "at_connect");
}

}  // namespace

TunnelOpening::TunnelOpening(OpeningHost& host, ClientSide& side, ConnectionFacts& facts,
                             ClientTransport& transport)
    : host_(host), side_(side), facts_(facts), transport_(transport) {}

void TunnelOpening::begin() {
  record_.reset(uv_now(side_.context().loop), uv_hrtime(), false);
  rate_ = RateToken::NotTaken;
}

void TunnelOpening::onConnect(const http::RequestHead& head, std::string_view rest) {
  begin();
  record_.proto = audit::Proto::Http1;  // the CONNECT is an HTTP/1.1 request
  record_.method = "CONNECT";
  record_.url.assign("https://").append(head.connect_authority);
  record_.scheme = policy::Scheme::Https;
  if (head.host_count == 1) {
    record_.host_header.emplace(head.host);
  }
  if (!host_.auditAvailable()) {
    refuseConnect(policy::Reason::AuditUnavailable, kAuditUnavailableDetail);
    return;
  }
  facts_.authority.assign(head.connect_authority);
  auto authority = policy::parseAuthority(facts_.authority, policy::PortRule::Required);
  if (!authority) {
    refuseConnect(policy::Reason::BadRequest, policy::toString(authority.error()));
    return;
  }
  facts_.host.assign(authority->host);
  facts_.port = *authority->port;
  record_.target_host = facts_.host;
  record_.port = facts_.port;

  policy::Decision d = policy::decide(host_.sandbox(), tunnelFacts());
  record_.host.assign(d.host.text());
  record_.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!d.forwards()) {
    // A refused CONNECT is a request that ends here, with a record, and it takes a token like
    // any request (an allowed one does not; the requests inside the tunnel will). Nothing was
    // resolved: an ip_denied here is an IP literal's own address.
    const std::string_view host = record_.host.empty() ? facts_.host : record_.host;
    if (d.reason == policy::Reason::IpDenied && d.host.isIpLiteral()) {
      listDeniedAddresses(host_.sandbox(), d.rule,
                          std::span<const policy::IpAddress>(&d.host.address(), 1), facts_.port,
                          record_.denied_addrs);
      refuseConnect(d.reason, explainIpDenied(host, record_.denied_addrs, d.rule));
      return;
    }
    const std::string detail =
        explainDenial(d.reason, {.sandbox = host_.sandbox().name, .host = host,
                                 .port = facts_.port, .scheme = policy::Scheme::Https,
                                 .method = "CONNECT", .target = facts_.authority});
    if (policy::refusesInBand(host_.sandbox(), d, facts_.port) && !asksForRefusalAtConnect(head)) {
      refuseInBand(d.reason, detail, rest);
      return;
    }
    refuseConnect(d.reason, detail);
    return;
  }
  record_.verdict = d.verdict;
  record_.policy_reason = d.reason;
  // The tunnel is open; what follows must be a ClientHello naming H.
  facts_.mode = audit::Mode::Connect;
  hello_.assign(rest);
  host_.flushCorked();
  transport_.writeRaw("HTTP/1.1 200 Connection established\r\n\r\n");
  host_.transition(ConnectionState::ReadingClientHello);
  if (!hello_.empty()) {
    processClientHello();
  }
}

// Transparent: the first byte tells TLS (a handshake record, 0x16) from anything else, which is
// read as HTTP/1.1 with H from its Host (docs/wire.md#transparent-mode).
void TunnelOpening::onFirstBytes(std::span<const char> data) {
  if (static_cast<unsigned char>(data.front()) == 0x16) {
    host_.transition(ConnectionState::ReadingClientHello);
    onHelloBytes(data);
    return;
  }
  facts_.route = Route::Plain;
  host_.onPlainHttp(data);
}

void TunnelOpening::onHelloBytes(std::span<const char> data) {
  hello_.append(data.data(), data.size());
  processClientHello();
}

void TunnelOpening::processClientHello() {
  auto bytes = std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(hello_.data()),
                                             hello_.size());
  tls::HelloResult hello = tls::parseClientHello(bytes);
  switch (hello.status) {
    case tls::HelloStatus::NeedMore:
      return;
    case tls::HelloStatus::NotTls:
      refuse(policy::Reason::NotTls, 0, "the tunnel did not start with a ClientHello");
      return;
    case tls::HelloStatus::Malformed:
      refuse(policy::Reason::NotTls, kAlertDecodeError, "malformed ClientHello");
      return;
    case tls::HelloStatus::TooLarge:
      refuse(policy::Reason::HeaderTooLarge, kAlertHandshakeFailure, "ClientHello over 64 KiB");
      return;
    case tls::HelloStatus::Done:
      break;
  }
  const bool transparent = facts_.mode == audit::Mode::Transparent;
  // A redirected connection's ClientHello is where its tunnel starts: judged by the
  // configuration in force now. After a CONNECT, the tunnel started with the CONNECT and is
  // finished under that one (a reload in between meets its first request, with a 403 over TLS).
  if (transparent && !host_.takeUpCurrentGeneration()) {
    return;
  }
  if (transparent) {
    // Transparent TLS: H is the SNI, the port is the one the sandbox dialled.
    facts_.port = facts_.orig_dst ? facts_.orig_dst->port : 443;
    facts_.host.assign(hello.info.sni_state == tls::SniState::Present ? hello.info.sni()
                                                                      : std::string_view{});
    facts_.authority = facts_.host + ":" + std::to_string(facts_.port);
    // The tunnel's record: written if the connection is refused here or carries no request.
    begin();
    record_.proto = audit::Proto::None;  // a ClientHello: no HTTP yet
    // No usable SNI, no H: the url is null (docs/audit.md), not "https://:443".
    if (!facts_.host.empty()) {
      record_.url = "https://" + facts_.authority;
    }
    record_.scheme = policy::Scheme::Https;
    if (hello.info.sni_state == tls::SniState::Absent) {
      refuse(policy::Reason::SniMissing, kAlertUnrecognizedName, "no SNI");
      return;
    }
    if (hello.info.sni_state == tls::SniState::Malformed) {
      refuse(policy::Reason::BadHost, kAlertUnrecognizedName, "malformed SNI");
      return;
    }
  }
  policy::RequestFacts facts = tunnelFacts();
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
  // A redirected connection's tunnel is a new request; after a CONNECT, the CONNECT was. No TLS
  // session to answer over: an alert, as for any refused ClientHello.
  if (transparent && !host_.auditAvailable()) {
    refuse(policy::Reason::AuditUnavailable, kAlertInternalError, kAuditUnavailableDetail);
    return;
  }
  policy::Decision d = policy::decide(host_.sandbox(), facts);
  record_.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!d.forwards()) {
    // Refused in band (docs/wire.md#refusals-in-band): after a CONNECT refused so, a ClientHello
    // that names H; a redirected connection's whose refusal a rule could lift. Anything else
    // (another name, no name) gets its alert.
    const bool in_band = policy::refusesInBand(host_.sandbox(), d, facts_.port) &&
                         (transparent || facts_.refused_in_band != policy::Reason::None);
    if (!in_band) {
      refuse(d.reason, kAlertUnrecognizedName, facts_.sni);
      return;
    }
    if (transparent && !refuseHelloInBand(d.reason)) {
      return;
    }
  }
  if (transparent && d.forwards()) {
    record_.verdict = d.verdict;  // (after a CONNECT, the CONNECT's stands)
    record_.policy_reason = d.reason;
  }

  // Mint (or take from the cache) a leaf for H only now, after the decision: a name the policy
  // refuses costs a signature only when it is refused in band, a request of the sandbox's rate.
  auto leaf = side_.runtime().leaves->get(d.host.text());
  if (!leaf) {
    spdlog::error("[C{}] cannot mint a certificate for {}: {}", facts_.id, d.host.text(),
                  leaf.error());
    refuse(policy::Reason::None, kAlertInternalError, "");
    return;
  }
  auto session =
      tls::TlsSession::server(side_.context().state->sandbox_tls.get(),
                              leaf.value()->certificate.get(), side_.runtime().leaves->key());
  if (!session) {
    spdlog::error("[C{}] TLS setup failed: {}", facts_.id, session.error());
    refuse(policy::Reason::None, kAlertInternalError, "");
    return;
  }
  transport_.startTls(std::move(session).value());
  facts_.route = Route::Tunnel;
  transport_.tls().feed(std::span<const char>(hello_.data(), hello_.size()));
  hello_.clear();
  hello_.shrink_to_fit();
  host_.transition(ConnectionState::TlsHandshake);
  host_.onHandshakeBytes();
}

bool TunnelOpening::handshake() {
  tls::HandshakeStatus status = transport_.tls().handshake();
  transport_.send({});
  if (host_.closing() || status == tls::HandshakeStatus::WantIo) {
    return false;
  }
  if (status == tls::HandshakeStatus::Failed) {
    SPDLOG_DEBUG("[C{}] sandbox TLS handshake failed: {}", facts_.id,
                 transport_.tls().failure().detail);
    host_.onHandshakeFailed(transport_.tls().failure());
    host_.finishConnection();
    return false;
  }
  // Whatever read the SNI for the decision, the name OpenSSL negotiated must be the same
  // (docs/wire.md#tls-toward-the-sandbox): two parsers that disagree are a bypass.
  if (transport_.tls().servername() != facts_.sni) {
    refuse(policy::Reason::SniMismatch, 0, "OpenSSL negotiated another name");
    return false;
  }
  host_.onTunnelOpen();
  return true;
}

void TunnelOpening::refuse(policy::Reason reason, std::uint8_t alert, std::string_view detail) {
  // On record like a refused request (None: sluice's own failure: no request, no record; a
  // tunnel refused in band has its record already, from its CONNECT).
  std::string over_rate;
  if (reason != policy::Reason::None && facts_.refused_in_band == policy::Reason::None) {
    reason = settle(reason, detail, over_rate);
  } else {
    reason = policy::Reason::None;
  }
  endWithoutTls(reason, alert, detail);
}

void TunnelOpening::endWithoutTls(policy::Reason reason, std::uint8_t alert,
                                  std::string_view detail) {
  host_.flushCorked();
  SPDLOG_DEBUG("[C{}] refuse tunnel {}: {}", facts_.id, policy::toString(reason), detail);
  if (alert != 0) {
    auto record = tls::alertRecord(alert);
    transport_.writeRaw(
        std::string_view(reinterpret_cast<const char*>(record.data()), record.size()));
  }
  if (reason != policy::Reason::None) {
    write(policy::Verdict::Deny, reason, 0);
  }
  transport_.dropTls();  // nothing polite to say over a TLS session that never was
  host_.finishConnection();
}

bool TunnelOpening::refuseHelloInBand(policy::Reason reason) {
  std::string_view detail = facts_.sni;
  std::string over_rate;
  const policy::Reason settled = settle(reason, detail, over_rate);
  if (settled != reason) {
    endWithoutTls(settled, kAlertUnrecognizedName, detail);  // over the rate: no handshake
    return false;
  }
  // The tunnel's record now, with no status (no HTTP was answered): what happens inside has
  // records of its own.
  write(policy::Verdict::Deny, reason, 0);
  facts_.refused_in_band = reason;
  return true;
}

void TunnelOpening::refuseConnect(policy::Reason reason, std::string_view detail) {
  std::string over_rate;
  reason = settle(reason, detail, over_rate);
  answerConnect(reason, detail);
}

void TunnelOpening::answerConnect(policy::Reason reason, std::string_view detail) {
  Cork cork(side_);  // the record reaches the OS before the answer
  record_.verdict = policy::Verdict::Deny;
  record_.refusal = reason;
  std::string answer;
  appendDenial(answer, reason, detail);
  transport_.send(answer);
  if (host_.closing()) {
    return;
  }
  write(policy::Verdict::Deny, reason, policy::reasonInfo(reason).http_status);
  host_.finishConnection();  // a denied connection is not kept (docs/wire.md#denials)
}

void TunnelOpening::refuseInBand(policy::Reason reason, std::string_view detail,
                                 std::string_view rest) {
  // A refusal like any: a token of the rate (beyond it, the CONNECT gets its 429: a limit is
  // never carried in band) and its log line.
  std::string over_rate;
  const policy::Reason settled = settle(reason, detail, over_rate);
  if (settled != reason) {
    answerConnect(settled, detail);
    return;
  }
  {
    Cork cork(side_);  // the tunnel's record reaches the OS before its 200
    record_.verdict = policy::Verdict::Deny;
    record_.refusal = reason;
    write(policy::Verdict::Deny, reason, 200);
    facts_.refused_in_band = reason;
    facts_.mode = audit::Mode::Connect;
    hello_.assign(rest);
    transport_.writeRaw("HTTP/1.1 200 Connection established\r\n\r\n");
  }
  if (host_.closing()) {
    return;
  }
  host_.transition(ConnectionState::ReadingClientHello);
  if (!hello_.empty()) {
    processClientHello();
  }
}

// The tunnel's own facts (no request yet): H and its port, over TLS.
policy::RequestFacts TunnelOpening::tunnelFacts() const {
  return policy::RequestFacts::of(facts_.host, facts_.port, policy::Scheme::Https);
}

void TunnelOpening::refuseConnection(policy::Reason reason, std::string_view detail,
                                     bool answer) {
  begin();
  rate_ = RateToken::Waived;  // not a request: the limit is its reason
  if (answer) {
    record_.proto = audit::Proto::Http1;
    refuseConnect(reason, detail);
    return;
  }
  record_.proto = audit::Proto::None;  // closed before any HTTP
  std::string over_rate;
  reason = settle(reason, detail, over_rate);
  write(policy::Verdict::Deny, reason, 0);
}

void TunnelOpening::recordQuiet(audit::Proto proto, audit::Error why) {
  record_.proto = proto;
  record_.error = why;
  write(record_.verdict, record_.outcomeReason(), facts_.mode == audit::Mode::Connect ? 200 : 0);
}

void TunnelOpening::recordFailure(audit::Proto proto, audit::Error error) {
  record_.proto = proto;
  record_.error = error;
  write(policy::Verdict::Deny, policy::Reason::BadRequest, 0);
}

policy::Reason TunnelOpening::settle(policy::Reason reason, std::string_view& detail,
                                     std::string& over_rate) {
  if (!takeRequestToken(rate_, side_.sandboxView())) {
    reason = policy::Reason::RateLimited;
    over_rate = rateLimitDetail(host_.sandbox());
    detail = over_rate;
    record_.rule.clear();
  }
  if (reason != policy::Reason::IpDenied) {
    record_.denied_addrs.clear();  // (listed for an ip_denied the rate overrode)
  }
  normaliseUrl(record_.url);
  logDenial(side_.runtime().denial_lines, uv_now(side_.context().loop), host_.sandbox().name,
            record_.host, record_.method, record_.url, reason, detail);
  return reason;
}

void TunnelOpening::write(policy::Verdict verdict, policy::Reason reason, int status) {
  if (side_.sandboxView().audit == nullptr) {
    return;
  }
  writeAuditRecord(record_, facts_, side_.sandboxView(), side_.runtime(),
                   uv_now(side_.context().loop), verdict, reason, status);
  side_.noteAudited();
}

}  // namespace sluice::proxy::session
