#pragma once
// What a client connection is bound to: its sandbox, in the generation its current request is
// judged by, and its place in the open-connection counts.
//
// A connection is made with the generation in force when it was accepted, and takes up the one
// in force when each request (or tunnel) begins. A request keeps the one it began under: an
// HTTP/1.1 connection has one request at a time, and each HTTP/2 stream holds its own
// (Http2Stream), so the binding moves on while streams of the old generation finish. The sandbox's
// long-lived part (SandboxRuntime: CA, counters) stays the same across the generations; a reload
// that removed the sandbox, or gave it another CA (its clients trust the old one), leaves
// nothing to take up, and the connection drains (docs/cli.md#reloads).
//
// The binding counts the connection as open, process-wide and for its sandbox, for its whole
// life: the count taken when it was made is what the connection limits are judged on.
#include <cstdint>
#include <memory>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"

namespace sluice::proxy::session {

class SandboxBinding {
 public:
  // How many connections were open, this one counted, when it was made: process-wide and for
  // its sandbox. Taken by the same atomic add that counted it, so that of connections made
  // at once by several workers exactly those past a limit see themselves over it.
  struct OpenCount {
    std::uint64_t gateway = 0;
    std::int64_t sandbox = 0;
  };

  // `sandbox` is one of `generation`'s.
  SandboxBinding(GatewayState& state, std::shared_ptr<const Generation> generation,
                 const SandboxView& sandbox);
  ~SandboxBinding();
  SandboxBinding(const SandboxBinding&) = delete;
  SandboxBinding& operator=(const SandboxBinding&) = delete;

  // Takes up `current` if it is another generation. False when `current` no longer has this
  // sandbox, or has it with another runtime (another CA): the binding stays as it was.
  bool takeUp(const std::shared_ptr<const Generation>& current);
  // Whether `current` is the generation it is bound to already.
  bool bound(const std::shared_ptr<const Generation>& current) const {
    return current == generation_;
  }

  OpenCount openedAs() const { return opened_as_; }
  const Generation& generation() const { return *generation_; }
  // The same, for a request that keeps it after the binding moves on (an HTTP/2 stream).
  const std::shared_ptr<const Generation>& heldGeneration() const { return generation_; }
  const SandboxView& view() const { return *view_; }
  const policy::Sandbox& sandbox() const { return *view_->sandbox; }
  const policy::Config& config() const { return *generation_->config; }
  SandboxRuntime& runtime() const { return *runtime_; }
  // False while the sandbox's audit file cannot be written
  // (docs/audit.md#when-the-audit-file-cannot-be-written).
  bool auditAvailable() const { return view_->audit == nullptr || view_->audit->available(); }
  // Hands the sandbox's buffered audit records to the OS.
  void flushAudit() const;

 private:
  GatewayState& state_;
  std::shared_ptr<const Generation> generation_;
  const SandboxView* view_;
  std::shared_ptr<SandboxRuntime> runtime_;
  OpenCount opened_as_;
};

}  // namespace sluice::proxy::session
