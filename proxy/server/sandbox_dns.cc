#include "proxy/server/sandbox_dns.h"

#include <spdlog/spdlog.h>

#include "policy/decision.h"
#include "policy/host_name.h"

namespace sluice::proxy {

namespace {

// How long the sandbox may cache an answer of its resolver. The answer is sluice's own address,
// never a real one, so a stale answer can only send a connection to sluice, which decides anew.
constexpr std::uint32_t kSandboxAnswerTtl = 60;
constexpr std::uint16_t kTypeA = 1;
constexpr std::uint16_t kTypeAaaa = 28;

// The sandbox's resolver (docs/wire.md#the-sandboxs-resolver): allowed names get the
// sandbox-facing gateway address of the asked family (dns_listen's, else the transparent
// listener's), other types of allowed names an empty answer, every other name NXDOMAIN. Nothing
// is ever forwarded.
dns::SandboxAnswer answerFor(const policy::Sandbox& sandbox, std::string_view qname,
                             std::uint16_t qtype) {
  dns::SandboxAnswer answer;  // NXDOMAIN
  auto name = policy::canonicalizeHost(qname);
  if (!name || !policy::mayResolve(sandbox, *name)) {
    SPDLOG_DEBUG("sandbox {} resolver: NXDOMAIN for a name its policy does not allow",
                 sandbox.name);
    return answer;
  }
  answer.kind = dns::SandboxAnswer::Kind::NoData;
  answer.ttl = kSandboxAnswerTtl;
  if (qtype != kTypeA && qtype != kTypeAaaa) {
    return answer;
  }
  bool want_v4 = qtype == kTypeA;
  for (const auto& own : {sandbox.dns_listen, sandbox.transparent}) {
    if (own && !own->isWildcard() && own->ip.isV4() == want_v4) {
      answer.kind = dns::SandboxAnswer::Kind::Addresses;
      answer.addresses.push_back(own->ip);
      break;
    }
  }
  return answer;
}

// What the record says the sandbox was told, if the query is one to record: every refusal (the
// policy's NXDOMAIN, the rate's REFUSED), and in report mode every answer too
// (docs/audit.md#dns-records). An enforce-mode sandbox's allowed names are not on record here:
// the connections they lead to are.
std::optional<audit::DnsAnswer> recorded(const policy::Sandbox& sandbox,
                                         const dns::SandboxAnswer& answer, std::uint16_t qtype) {
  switch (answer.kind) {
    case dns::SandboxAnswer::Kind::NxDomain:
      return audit::DnsAnswer::NxDomain;
    case dns::SandboxAnswer::Kind::Refused:
      return audit::DnsAnswer::Refused;
    case dns::SandboxAnswer::Kind::NoData:
    case dns::SandboxAnswer::Kind::Addresses:
      break;
  }
  if (sandbox.mode != policy::SandboxMode::Report) {
    return std::nullopt;
  }
  const bool answered =
      answer.kind == dns::SandboxAnswer::Kind::Addresses && (qtype == kTypeA || qtype == kTypeAaaa);
  return answered ? audit::DnsAnswer::Answered : audit::DnsAnswer::NoData;
}

// A sandbox resolver's key: a reload keeps it running while sandbox and address are unchanged.
std::string resolverKey(const policy::Sandbox& sandbox) {
  return sandbox.name + " " + sandbox.dns_listen->toString();
}

}  // namespace

SandboxDns::SandboxDns(uv_loop_t* loop, CurrentGeneration current, Retire retire)
    : current_(std::move(current)), retire_(std::move(retire)), timer_(loop), loop_(loop) {}

Result<Ok, std::string> SandboxDns::sync(const Generation& generation) {
  std::map<std::string, std::unique_ptr<dns::SandboxResolver>> kept;
  Result<Ok, std::string> result = Ok{};
  for (const SandboxView& view : generation.sandboxes) {
    const policy::Sandbox& sandbox = *view.sandbox;
    if (!sandbox.dns_listen || closed_) {
      continue;
    }
    std::string key = resolverKey(sandbox);
    if (auto it = resolvers_.find(key); it != resolvers_.end()) {
      kept.emplace(key, std::move(it->second));
      resolvers_.erase(it);
      continue;
    }
    // The answer follows the generation in force when the query comes, by sandbox name.
    auto resolver = std::make_unique<dns::SandboxResolver>(
        loop_, *sandbox.dns_listen,
        [this, name = sandbox.name](std::string_view qname, std::uint16_t qtype,
                                    const policy::Endpoint& client) {
          return answer(name, qname, qtype, client);
        });
    auto started = resolver->start();
    if (!started) {
      if (result) {
        result = Err{"sandbox '" + sandbox.name + "' dns_listen " + started.error()};
      }
      retire_(std::move(resolver));
      continue;
    }
    kept.emplace(key, std::move(resolver));
  }
  for (auto& [key, resolver] : resolvers_) {
    retire_(std::move(resolver));
  }
  resolvers_ = std::move(kept);
  return result;
}

dns::SandboxAnswer SandboxDns::answer(const std::string& sandbox, std::string_view qname,
                                      std::uint16_t qtype, const policy::Endpoint& client) {
  const std::shared_ptr<const Generation> generation = current_();
  const SandboxView* current = generation ? generation->find(sandbox) : nullptr;
  if (current == nullptr) {
    return dns::SandboxAnswer{};
  }
  admin::SandboxMetrics& metrics = current->runtime->metrics;
  dns::SandboxAnswer answer;
  if (current->dns_rate != nullptr && !current->dns_rate->take(uv_hrtime())) {
    metrics.countResolverAnswer(admin::ResolverAnswer::Refused);
    answer.kind = dns::SandboxAnswer::Kind::Refused;
  } else {
    answer = answerFor(*current->sandbox, qname, qtype);
    metrics.countResolverAnswer(answer.kind == dns::SandboxAnswer::Kind::NxDomain
                                    ? admin::ResolverAnswer::NxDomain
                                    : admin::ResolverAnswer::Allowed);
  }
  if (auto what = recorded(*current->sandbox, answer, qtype)) {
    note(*generation, *current, qname, qtype, *what, client);
  }
  return answer;
}

void SandboxDns::note(const Generation& generation, const SandboxView& view, std::string_view qname,
                      std::uint16_t qtype, audit::DnsAnswer answer,
                      const policy::Endpoint& client) {
  if (view.audit == nullptr || closed_) {
    return;
  }
  auto [it, added] = pending_.try_emplace(view.sandbox->name);
  Pending& pending = it->second;
  if (pending.sink.get() != view.audit) {
    // A reload moved the sandbox's log: what is pending goes to the file it was asked under.
    if (pending.sink && !pending.queries.empty()) {
      pending.queries.drain(view.sandbox->name,
                            [&](const audit::DnsRecord& r) { pending.sink->write(r); });
      pending.sink->flush();
    }
    for (const auto& sink : generation.audit_sinks) {
      if (sink.get() == view.audit) {
        pending.sink = sink;
      }
    }
  }
  if (pending.queries.note(qname, qtype, answer, client, std::chrono::system_clock::now())) {
    writePending();  // a table full of distinct names: out now, memory stays bounded
    return;
  }
  if (!timer_armed_) {
    timer_armed_ = true;
    timer_.start(kRecordInterval, [this] {
      timer_armed_ = false;
      writePending();
    });
  }
}

void SandboxDns::writePending() {
  for (auto& entry : pending_) {
    Pending& pending = entry.second;  // (a lambda cannot capture a structured binding in C++20)
    if (!pending.sink || pending.queries.empty()) {
      continue;
    }
    pending.queries.drain(entry.first,
                          [&pending](const audit::DnsRecord& r) { pending.sink->write(r); });
    pending.sink->flush();
  }
  // Sandboxes that asked nothing this interval let their sink go (a removed sandbox's file can
  // then close).
  std::erase_if(pending_, [](const auto& entry) { return entry.second.queries.empty(); });
}

void SandboxDns::close() {
  if (closed_) {
    return;
  }
  writePending();
  closed_ = true;
  for (auto& [key, resolver] : resolvers_) {
    retire_(std::move(resolver));
  }
  resolvers_.clear();
  timer_.close(nullptr);
}

}  // namespace sluice::proxy
