#include "proxy/session/client_upstreams.h"

namespace sluice::proxy::session {

std::unique_ptr<UpstreamConnection> ClientUpstreams::takeParked(const UpstreamKey& key) {
  if (parked_ && parked_->key == key) {
    return std::move(parked_);
  }
  return nullptr;
}

void ClientUpstreams::park(std::unique_ptr<UpstreamConnection> connection) {
  parked_ = std::move(connection);
  parked_->stream.setHandler(&handler_);
  parked_->stream.startReading();
}

void ClientUpstreams::retire(std::unique_ptr<UpstreamConnection> connection) {
  connection->stream.setHandler(&handler_);
  connection->stream.close();
  closing_.push_back(std::move(connection));
}

void ClientUpstreams::retireParked() {
  if (parked_) {
    retire(std::move(parked_));
  }
}

bool ClientUpstreams::onClosed(const io::TcpStream& stream) {
  for (auto it = closing_.begin(); it != closing_.end(); ++it) {
    if (&(*it)->stream == &stream) {
      closing_.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace sluice::proxy::session
