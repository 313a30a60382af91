#pragma once
// What a worker lends its client connections: the loop, the shared gateway state, the generation
// in force, the per-worker resolver and upstream pool, and the way to hand a finished connection
// back for deletion.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace sluice::proxy {
struct GatewayState;
struct Generation;
namespace dns {
class Resolver;
}
}  // namespace sluice::proxy

namespace sluice::proxy::session {

class ClientConnection;
class UpstreamPool;
class Http2UpstreamSessions;

// One move of one of a session's state machines (state_change.h); the names are the tables'.
struct StateChange {
  std::uint64_t connection = 0;
  std::string_view machine;  // "connection", "exchange", "connector"
  std::string_view from;
  std::string_view to;
};

struct WorkerContext {
  int worker = 0;  // the worker's index, for the logs
  uv_loop_t* loop = nullptr;
  GatewayState* state = nullptr;
  // The generation in force (PublishedGeneration): what a new connection starts with and what a
  // connection takes up when a request starts. Cheap enough for every request.
  const std::shared_ptr<const Generation>& currentGeneration();
  // As this worker last saw it: currentGeneration()'s cache, brought up to date by each
  // hand-over too (Worker::apply).
  std::shared_ptr<const Generation> generation;
  dns::Resolver* resolver = nullptr;
  UpstreamPool* pool = nullptr;
  // The shared HTTP/2 sessions to origins (null: HTTP/2 is never offered to origins).
  Http2UpstreamSessions* h2_upstreams = nullptr;
  // Called once every handle of the connection has closed; the worker deletes it.
  std::function<void(ClientConnection*)> finished;
  // The worker is draining: finish the exchange in progress, keep nothing alive.
  bool draining = false;
  // Whether debug lines are logged (SLUICE_LOG=debug), as the last connection made found it: a
  // state machine moves at every step of every request, and asks this, not the logger.
  bool debug_log = false;
  // Tests: told every move of every connection's machines. Empty in sluice (one branch per move).
  std::function<void(const StateChange&)> on_transition;
};

}  // namespace sluice::proxy::session
