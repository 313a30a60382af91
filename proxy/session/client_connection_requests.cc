// Where the connection's requests begin: the explicit listener's first head (a CONNECT for the
// tunnel's opening, or forward mode), the deadline of a head trickled in, and the checks every
// new request meets first (the generation in force, the audit log writable).
#include <spdlog/spdlog.h>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"

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

Admission ClientConnection::admitRequest() {
  // A reload: each request is judged by the generation in force when it begins, and the
  // requests in flight keep theirs (an HTTP/2 stream holds its own: Http2Stream), so the
  // connection takes up the new one at once (docs/cli.md#reloads). A generation without this
  // sandbox, or with another CA (its client trusts the old one), is never taken up: the
  // connection is to drain.
  if (!binding_.takeUp(ctx_.currentGeneration())) {
    SPDLOG_DEBUG("[C{}] a request under a generation without this sandbox's CA: refused",
                 facts_.id);
    return Admission::Refuse;
  }
  if (!binding_.auditAvailable()) {
    // Its records are kept in memory meanwhile: one refusal per connection is kept, the rest
    // are refused unrecorded (and counted).
    if (audit_refusals_kept_ == 0) {
      ++audit_refusals_kept_;
      return Admission::AuditUnavailable;
    }
    binding_.view().audit->countRefusedStream();
    return Admission::Shed;
  }
  audit_refusals_kept_ = 0;
  timer_.setPhase(0);  // the head is complete
  timer_.setRelease(0);
  return Admission::Admit;
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

// The first head on the explicit listener, when it is not CONNECT: plain-HTTP forwarding of an
// absolute-form request (docs/wire.md#explicit-proxy). Each request on this connection names
// its own host.
void ClientConnection::onProxyHead() {
  facts_.mode = audit::Mode::Forward;
  facts_.route = Route::Forward;
  timer_.setPhase(0);
  transition(ConnectionState::Serving);
}

void ClientConnection::onConnectHead(const http::RequestHead& head, std::string_view rest) {
  if (!takeUpCurrentGeneration()) {
    return;
  }
  opening_.onConnect(head, rest);
}

}  // namespace sluice::proxy::session
