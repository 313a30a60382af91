// Where the connection's requests begin: the explicit listener's first head (CONNECT, or an
// absolute-form request), each request head with H taken from the connection's route (the
// tunnel, the Host of a redirected connection, the absolute URL), heads the parser refused, and
// the checks every new request meets first (the generation in force, the audit log writable).
#include <spdlog/spdlog.h>

#include "policy/authority.h"
#include "proxy/gateway_state.h"
#include "proxy/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/session/denial.h"
#include "proxy/session/request_target.h"
#include "proxy/tls/client_hello.h"

namespace sluice::proxy::session {

const policy::Sandbox& ClientConnection::sandbox() const { return *view_->sandbox; }

const policy::Config& ClientConnection::config() const { return *generation_->config; }

bool ClientConnection::takeUpCurrentGeneration() {
  const std::shared_ptr<const Generation>& current = ctx_.currentGeneration();
  if (current == generation_) {
    return true;
  }
  const SandboxView* now = current->find(runtime_->name);
  if (now == nullptr || now->runtime != runtime_) {
    SPDLOG_DEBUG("[C{}] sandbox {} was removed or replaced by a reload: closing", facts_.id,
                 runtime_->name);
    finishConnection();
    return false;
  }
  generation_ = current;
  view_ = now;
  return true;
}

bool ClientConnection::refuseIfAuditUnavailable() {
  if (view_->audit == nullptr || view_->audit->available()) {
    return false;
  }
  constexpr std::string_view kDetail = "the audit log cannot be written; try again later";
  if (state_ == ConnectionState::ReadingClientHello) {
    // No TLS session to answer over: an alert, as for any refused ClientHello.
    refuseTunnel(policy::Reason::AuditUnavailable, tls::kAlertInternalError, kDetail);
  } else {
    describeRefusedHead();  // what was asked, for its record
    exchange_.deny(policy::Reason::AuditUnavailable, kDetail);
  }
  return true;
}

void ClientConnection::onHeadBegun() {
  if (betweenRequests() && phase_deadline_ms_ == 0) {
    // A head has begun: it must be complete within handshake_timeout, however slowly its bytes
    // trickle in (each byte would otherwise reset the idle timer: slowloris).
    phase_deadline_ms_ =
        uv_now(ctx_.loop) + static_cast<std::uint64_t>(config().limits.handshake_timeout.count());
    armTimer();
  }
}

void ClientConnection::onBadRequest(policy::Reason reason, std::string_view detail) {
  SPDLOG_DEBUG("[C{}] bad request: {}", facts_.id, detail);
  if (!exchange_.inFlight()) {
    describeRefusedHead();
  }
  exchange_.deny(reason, detail);
}

void ClientConnection::describeRefusedHead() {
  exchange_.beginRecord(false);
  recordRefusedHead(codec_.partialHead(), facts_, state_ == ConnectionState::ReadingProxyHead,
                    exchange_.record(), facts_.mode);
}

// The first head on the explicit listener, when it is not CONNECT: plain-HTTP forwarding of an
// absolute-form request (docs/wire.md#explicit-proxy). Each request on this connection names
// its own host.
void ClientConnection::onProxyHead(const http::RequestHead& head) {
  facts_.mode = audit::Mode::Forward;
  facts_.route = Route::Forward;
  phase_deadline_ms_ = 0;
  transition(ConnectionState::Serving);
  onRequestHead(head);
}

void ClientConnection::onRequestHead(const http::RequestHead& head) {
  if (state_ == ConnectionState::ReadingProxyHead) {
    onProxyHead(head);
    return;
  }
  if (betweenRequests()) {
    phase_deadline_ms_ = 0;  // the head is complete
  }
  if (!takeUpCurrentGeneration() || refuseIfAuditUnavailable()) {
    return;
  }
  release_deadline_ms_ = 0;
  exchange_.beginRequest(head, config().audit.hash_bodies);
  if (std::optional<TargetRefusal> refused = targetOf(facts_, head, exchange_.record())) {
    exchange_.deny(refused->reason, refused->detail);
    return;
  }
  exchange_.decide();
}

void ClientConnection::onConnectHead(const http::RequestHead& head) {
  if (!takeUpCurrentGeneration() || refuseIfAuditUnavailable()) {
    return;
  }
  exchange_.beginRecord(false);
  RequestRecord& record = exchange_.record();
  record.method = "CONNECT";
  record.url = "https://" + std::string(head.connect_authority);
  record.scheme = policy::Scheme::Https;
  if (head.host_count == 1) {
    record.host_header.emplace(head.host);
  }
  if (state_ != ConnectionState::ReadingProxyHead) {
    exchange_.deny(policy::Reason::BadRequest, facts_.mode == audit::Mode::Transparent
                                                   ? "CONNECT on a redirected connection"
                                                   : "CONNECT inside a tunnel");
    return;
  }
  facts_.authority.assign(head.connect_authority);
  auto authority = policy::parseAuthority(facts_.authority, policy::PortRule::Required);
  if (!authority) {
    exchange_.deny(policy::Reason::BadRequest, policy::toString(authority.error()));
    return;
  }
  facts_.host.assign(authority->host);
  facts_.port = *authority->port;
  record.target_host = facts_.host;
  record.port = facts_.port;

  policy::RequestFacts facts;
  facts.target_host = facts_.host;
  facts.port = facts_.port;
  facts.scheme = policy::Scheme::Https;
  policy::Decision d = policy::decide(sandbox(), facts);
  record.host.assign(d.host.text());
  record.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!d.forwards()) {
    // A refused CONNECT is a request that ends here, with a record: deny() takes a token for
    // it like for any request (an allowed one does not; the requests inside the tunnel will).
    exchange_.deny(d.reason, explainDenial(d.reason, sandbox().name,
                                           record.host.empty() ? facts_.host : record.host,
                                           "CONNECT", facts_.authority));
    return;
  }
  record.policy_reason = d.reason;
  exchange_.tunnelOpened();  // the tunnel is not a request; each request inside it will be
  // The tunnel is open; what follows must be a ClientHello naming H.
  facts_.mode = audit::Mode::Connect;
  hello_.assign(codec_.unparsed());
  codec_.dropUnparsed();
  flushCorked();
  client_.write(std::string_view("HTTP/1.1 200 Connection established\r\n\r\n"));
  transition(ConnectionState::ReadingClientHello);
  if (!hello_.empty()) {
    processClientHello();
  }
}

}  // namespace sluice::proxy::session
