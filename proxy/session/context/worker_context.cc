#include "proxy/session/context/worker_context.h"

#include "proxy/runtime/gateway_state.h"

namespace sluice::proxy::session {

const std::shared_ptr<const Generation>& WorkerContext::currentGeneration() {
  state->generation.refresh(generation);
  return generation;
}

}  // namespace sluice::proxy::session
