#include "proxy/session/context/state_change.h"

#include <spdlog/spdlog.h>

#include <cassert>

namespace sluice::proxy::session {

void reportStateChange(WorkerContext& ctx, std::uint64_t connection, std::string_view machine,
                       std::string_view from, std::string_view to, bool allowed) {
  if (!allowed) {
    spdlog::error("[C{}] {}: refused a move the state table does not list: {} -> {}", connection,
                  machine, from, to);
    assert(allowed && "a move the state table does not list");
    return;
  }
  SPDLOG_DEBUG("[C{}] {} {} -> {}", connection, machine, from, to);
  if (ctx.on_transition) {
    ctx.on_transition(StateChange{connection, machine, from, to});
  }
}

}  // namespace sluice::proxy::session
