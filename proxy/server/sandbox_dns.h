#pragma once
// The sandboxes' resolvers (`dns_listen`, docs/wire.md#the-sandboxs-resolver), all on worker 0
// (one UDP socket has one owner), and the records of what they refused (and, in report mode,
// answered) in each sandbox's audit log (docs/audit.md#dns-records): one per distinct (name,
// qtype, answer) per kRecordInterval, written when the interval ends, when a sandbox's table is
// full, and when sluice stops.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "policy/ip_address.h"
#include "proxy/audit/audit_log.h"
#include "proxy/audit/dns_query_log.h"
#include "proxy/dns/sandbox_resolver.h"
#include "proxy/io/timer.h"
#include "proxy/runtime/generation.h"

namespace sluice::proxy {

class SandboxDns {
 public:
  static constexpr std::chrono::milliseconds kRecordInterval{10'000};

  // The generation in force when a query comes (its policy answers; its sandbox's audit log
  // takes the record).
  using CurrentGeneration = std::function<std::shared_ptr<const Generation>()>;
  // A resolver no generation serves any more: the owner closes it and keeps it until closed.
  using Retire = std::function<void(std::unique_ptr<dns::SandboxResolver>)>;

  SandboxDns(uv_loop_t* loop, CurrentGeneration current, Retire retire);
  SandboxDns(const SandboxDns&) = delete;
  SandboxDns& operator=(const SandboxDns&) = delete;

  // A resolver for each sandbox of `generation` with dns_listen: one whose sandbox and address
  // are unchanged keeps running, the others are retired. The first error names the sandbox.
  Result<Ok, std::string> sync(const Generation& generation);
  // Writes the records still pending, retires every resolver and closes the timer.
  void close();

 private:
  dns::SandboxAnswer answer(const std::string& sandbox, std::string_view qname, std::uint16_t qtype,
                            const policy::Endpoint& client);
  void note(const Generation& generation, const SandboxView& view, std::string_view qname,
            std::uint16_t qtype, audit::DnsAnswer answer, const policy::Endpoint& client);
  // Every sandbox's pending queries become records, in their audit logs, handed to the OS.
  void writePending();

  struct Pending {
    audit::DnsQueryLog queries;
    std::shared_ptr<audit::AuditSink> sink;  // where they go: kept alive until then
  };

  CurrentGeneration current_;
  Retire retire_;
  // Keyed by sandbox name and endpoint.
  std::map<std::string, std::unique_ptr<dns::SandboxResolver>> resolvers_;
  std::map<std::string, Pending, std::less<>> pending_;  // by sandbox name
  io::Timer timer_;
  uv_loop_t* loop_;
  bool timer_armed_ = false;
  bool closed_ = false;
};

}  // namespace sluice::proxy
