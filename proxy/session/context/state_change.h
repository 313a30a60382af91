#pragma once
// Moving a state machine of the session (state_table.h) from one state to the next: the move is
// checked against its table, logged at debug level ("[C42] connection Serving -> Lingering"),
// and reported to WorkerContext::on_transition (tests). A move the table does not list is
// refused: logged as an error, an assertion in debug builds, and the state stays.

#include <cstdint>
#include <string_view>

#include "proxy/session/context/state_table.h"
#include "proxy/session/context/worker_context.h"

namespace sluice::proxy::session {

// Reports a move of `machine` on connection `connection`: logged, and told to the tests' hook
// when allowed; logged as an error (and asserted on in debug builds) when not.
void reportStateChange(WorkerContext& ctx, std::uint64_t connection, std::string_view machine,
                       std::string_view from, std::string_view to, bool allowed);

template <typename State, std::size_t kStates, std::size_t kEdges>
bool changeState(WorkerContext& ctx, std::uint64_t connection,
                 const TransitionTable<State, kStates, kEdges>& table, State& current, State next) {
  const bool allowed = table.allows(current, next);
  if (!allowed || ctx.debug_log || ctx.on_transition) {
    reportStateChange(ctx, connection, table.machine(), table.name(current), table.name(next),
                      allowed);
  }
  if (allowed) {
    current = next;
  }
  return allowed;
}

}  // namespace sluice::proxy::session
