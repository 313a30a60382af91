// HTTP/2 on the connection (ALPN h2, Multiplexing): the codec made after the handshake, the
// admission of each stream's request, and the connection's end when its streams are over.
#include <spdlog/spdlog.h>

#include "proxy/runtime/generation.h"
#include "proxy/session/client_connection.h"

namespace sluice::proxy::session {

bool ClientConnection::startHttp2() {
  h2_ = std::make_unique<Http2ServerCodec>(static_cast<Http2Host&>(*this),
                                           static_cast<ExchangeHost&>(*this),
                                           config().limits.max_header_bytes);
  if (!h2_->start()) {
    close("cannot start an HTTP/2 session");
    return false;
  }
  transition(ConnectionState::Multiplexing);
  SPDLOG_DEBUG("[C{}] ALPN h2: streams", facts_.id);
  return true;
}

Admission ClientConnection::admitRequest() {
  const std::shared_ptr<const Generation>& current = ctx_.currentGeneration();
  if (!binding_.bound(current)) {
    // A reload: the streams in flight keep the generation they were decided by, so the
    // connection takes up the new one only when none is in flight; until then new streams are
    // refused (REFUSED_STREAM: safe to retry) and GOAWAY sends the client to a new connection,
    // judged by the new generation.
    if (h2_->inFlight() || !binding_.takeUp(current)) {
      h2_->goAway(0);
      if (!h2_->busy()) {
        finishConnection();
      }
      return Admission::RefuseStream;
    }
  }
  if (!binding_.auditAvailable()) {
    return Admission::AuditUnavailable;
  }
  timer_.setRelease(0);
  return Admission::Admit;
}

void ClientConnection::onStreamsIdle() {
  noteProgress();  // idle_timeout counts from the last stream's end
  armTimer();
  if (after_exchange_ != AfterExchange::ReadNext || h2_->goingAway()) {
    finishConnection();
  }
}

void ClientConnection::onCodecDone(std::string_view why) {
  SPDLOG_DEBUG("[C{}] h2 over: {}", facts_.id, why);
  finishConnection();
}

void ClientConnection::onConnectionError(audit::Error error) {
  // The connection's own exchange opened the tunnel (CONNECT, or a redirected ClientHello) and
  // still holds its facts: the record of the tunnel that failed is written from them.
  exchange_.recordTunnelError(audit::Proto::H2, error);
}

std::uint64_t ClientConnection::exchangeDeadline() const {
  const std::uint64_t own = exchange_.deadline();
  if (!h2_) {
    return own;
  }
  const std::uint64_t streams = h2_->deadline();
  if (own == 0 || (streams != 0 && streams < own)) {
    return streams;
  }
  return own;
}

}  // namespace sluice::proxy::session
