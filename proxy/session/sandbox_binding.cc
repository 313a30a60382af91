#include "proxy/session/sandbox_binding.h"

namespace sluice::proxy::session {

SandboxBinding::SandboxBinding(GatewayState& state, std::shared_ptr<const Generation> generation,
                               const SandboxView& sandbox)
    : state_(state),
      generation_(std::move(generation)),
      view_(&sandbox),
      runtime_(sandbox.runtime) {
  opened_as_.gateway = state_.open_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  opened_as_.sandbox =
      runtime_->metrics.connections_active.fetch_add(1, std::memory_order_relaxed) + 1;
}

SandboxBinding::~SandboxBinding() {
  state_.open_connections.fetch_sub(1, std::memory_order_relaxed);
  runtime_->metrics.connections_active.fetch_sub(1, std::memory_order_relaxed);
}

bool SandboxBinding::takeUp(const std::shared_ptr<const Generation>& current) {
  if (current == generation_) {
    return true;
  }
  const SandboxView* now = current->find(runtime_->name);
  if (now == nullptr || now->runtime != runtime_) {
    return false;
  }
  generation_ = current;
  view_ = now;
  return true;
}

void SandboxBinding::flushAudit() const {
  if (view_->audit != nullptr) {
    view_->audit->flush();
  }
}

}  // namespace sluice::proxy::session
