// Where the connection's requests begin: the explicit listener's first head (CONNECT, or an
// absolute-form request), each request head with H taken from the connection's route (the
// tunnel, the Host of a redirected connection, the absolute URL), heads the parser refused, and
// the checks every new request meets first (the generation in force, the audit log writable).
#include <spdlog/spdlog.h>

#include "policy/authority.h"
#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"
#include "proxy/session/denial.h"
#include "proxy/session/request_target.h"
#include "proxy/tls/client_hello.h"

namespace sluice::proxy::session {

bool ClientConnection::takeUpCurrentGeneration() {
  if (binding_.takeUp(ctx_.currentGeneration())) {
    return true;
  }
  SPDLOG_DEBUG("[C{}] sandbox {} was removed or replaced by a reload: closing", facts_.id,
               runtime().name);
  finishConnection();
  return false;
}

bool ClientConnection::refuseIfAuditUnavailable() {
  if (binding_.auditAvailable()) {
    return false;
  }
  constexpr std::string_view kDetail = "the audit log cannot be written; try again later";
  if (state_ == ConnectionState::ReadingClientHello) {
    // No TLS session to answer over: an alert, as for any refused ClientHello.
    opening_.refuse(policy::Reason::AuditUnavailable, tls::kAlertInternalError, kDetail);
  } else {
    describeRefusedHead();  // what was asked, for its record
    exchange_.deny(policy::Reason::AuditUnavailable, kDetail);
  }
  return true;
}

void ClientConnection::onHeadBegun() {
  if (betweenRequests() && timer_.phase() == 0) {
    // A head has begun: it must be complete within handshake_timeout, however slowly its bytes
    // trickle in (each byte would otherwise reset the idle timer: slowloris).
    timer_.setPhase(timer_.now() +
                    static_cast<std::uint64_t>(config().limits.handshake_timeout.count()));
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
  timer_.setPhase(0);
  transition(ConnectionState::Serving);
  onRequestHead(head);
}

void ClientConnection::onRequestHead(const http::RequestHead& head) {
  if (state_ == ConnectionState::ReadingProxyHead) {
    onProxyHead(head);
    return;
  }
  if (betweenRequests()) {
    timer_.setPhase(0);  // the head is complete
  }
  if (!takeUpCurrentGeneration() || refuseIfAuditUnavailable()) {
    return;
  }
  timer_.setRelease(0);
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
  opening_.onConnect(head);
}

}  // namespace sluice::proxy::session
