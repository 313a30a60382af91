#include "policy/decision.h"

#include <algorithm>

#include "policy/address_class.h"
#include "policy/authority.h"
#include "policy/request_path.h"

namespace sluice::policy {

std::string_view toString(Verdict v) {
  switch (v) {
    case Verdict::Deny:
      return "deny";
    case Verdict::Allow:
      return "allow";
    case Verdict::Report:
      return "report";
  }
  return "deny";
}

namespace {

// Host header or absolute-URI authority against H: the same canonical host, and a port that
// is absent or the connection's own.
bool authorityNames(std::string_view text, const CanonicalHost& h, std::uint16_t port) {
  auto authority = parseAuthority(text, PortRule::Optional);
  if (!authority) {
    return false;
  }
  if (authority->port && *authority->port != port) {
    return false;
  }
  auto host = canonicalizeHost(authority->host);
  return host && *host == h;
}

// How far a rule got before it failed; the furthest any rule got is the reason given.
Reason furthest(Reason a, Reason b) {
  auto rank = [](Reason r) {
    switch (r) {
      case Reason::NotAllowedScheme:
        return 1;
      case Reason::NotAllowedPort:
        return 2;
      case Reason::NotAllowedMethod:
        return 3;
      case Reason::NotAllowedPath:
        return 4;
      case Reason::UpgradeNotAllowed:
        return 5;
      default:
        return 0;
    }
  };
  return rank(b) > rank(a) ? b : a;
}

// Reason::None when `rule` matches everything known so far, else what it failed on.
Reason matchRule(const Rule& rule, const RequestFacts& facts, const TargetCheck& target) {
  if (!rule.allowsScheme(facts.scheme)) {
    return Reason::NotAllowedScheme;
  }
  if (!rule.allowsPort(facts.scheme, facts.port)) {
    return Reason::NotAllowedPort;
  }
  if (facts.request == nullptr) {
    return Reason::None;  // CONNECT: method and path are not known yet
  }
  if (!rule.allowsMethod(facts.request->method)) {
    return Reason::NotAllowedMethod;
  }
  // A path with any kind of ambiguity matches no prefix: the rule cannot know which path the
  // origin will read. The one exception is an encoded '/' where a prefix spells it out (npm's
  // "/@scope%2f", docs/policy.md#paths), which pathHasPrefix checks. A rule without paths has
  // nothing to escape from.
  if (!rule.paths.empty() &&
      ((target.ambiguities & ~kEncodedSlash) != 0 || !rule.allowsPath(facts.request->target))) {
    return Reason::NotAllowedPath;
  }
  if (facts.request->websocket && !rule.websocket) {
    return Reason::UpgradeNotAllowed;
  }
  return Reason::None;
}

bool isOwnEndpoint(const Sandbox& sandbox, const IpAddress& address, std::uint16_t port) {
  if (!sandbox.own_endpoints) {
    return false;
  }
  Endpoint target{address, port};
  return std::any_of(sandbox.own_endpoints->begin(), sandbox.own_endpoints->end(),
                     [&](const Endpoint& own) { return Endpoint::overlaps(target, own); });
}

}  // namespace

AddressRefusal addressRefusal(const Sandbox& sandbox, const Rule* rule, const IpAddress& address,
                              std::uint16_t port) {
  if (isOwnEndpoint(sandbox, address, port)) {
    return AddressRefusal::SluiceListener;
  }
  if (rule != nullptr && !rule->ips.empty()) {
    return std::any_of(rule->ips.begin(), rule->ips.end(),
                       [&](const Cidr& cidr) { return cidr.contains(address); })
               ? AddressRefusal::None
               : AddressRefusal::OutsideRuleIps;
  }
  return classifyAddress(address).isGlobal() ? AddressRefusal::None : AddressRefusal::NotGlobal;
}

std::string_view toString(AddressRefusal r) {
  switch (r) {
    case AddressRefusal::None:
      return "";
    case AddressRefusal::SluiceListener:
      return "sluice_listener";
    case AddressRefusal::OutsideRuleIps:
      return "outside_rule_ips";
    case AddressRefusal::NotGlobal:
      return "not_global";
  }
  return "";
}

std::string addressClassText(const IpAddress& address) {
  AddressClassification c = classifyAddress(address);
  std::string text;
  if (c.embedding != Embedding::None) {
    text.assign(toString(c.embedding)).push_back(':');
  }
  text += toString(c.address_class);
  return text;
}

namespace {

// Check 5 on a decision as check 4 left it (a rule, or a report-mode sandbox's policy reason;
// Deny, nothing checked): the addresses that may be dialled, or ip_denied when none may. In
// place: a Decision holds its host inline, a copy is not free.
void checkAddresses(const Sandbox& sandbox, Decision& d, std::span<const IpAddress> addresses,
                    std::uint16_t port) {
  if (d.host.isIpLiteral()) {
    addresses = std::span<const IpAddress>(&d.host.address(), 1);
  }
  d.ip_checked = true;
  std::size_t considered = std::min(addresses.size(), kMaxAddresses);
  for (std::size_t i = 0; i < considered; ++i) {
    if (addressRefusal(sandbox, d.rule, addresses[i], port) == AddressRefusal::None) {
      d.usable_addresses |= std::uint64_t{1} << i;
    }
  }
  if (d.usable_addresses == 0) {
    d.verdict = Verdict::Deny;
    d.reason = Reason::IpDenied;
    return;
  }
  d.verdict = d.rule != nullptr ? Verdict::Allow : Verdict::Report;
  if (d.rule != nullptr) {
    d.reason = Reason::None;
  }
}

}  // namespace

Decision decide(const Sandbox& sandbox, const RequestFacts& facts) {
  Decision d;

  // 1. H is a name or an IP literal.
  auto h = canonicalizeHost(facts.target_host);
  if (!h) {
    d.reason = Reason::BadHost;
    return d;
  }
  d.host = *h;

  // 2. TLS: the ClientHello named H.
  if (facts.scheme == Scheme::Https) {
    if (facts.sni_state == SniState::Absent) {
      d.reason = Reason::SniMissing;
      return d;
    }
    if (facts.sni_state == SniState::Present) {
      auto sni = canonicalizeHost(facts.sni);
      if (!sni || !(*sni == d.host)) {
        d.reason = Reason::SniMismatch;
        return d;
      }
    }
  }

  // 3. The request names H, once.
  TargetCheck target{PathShape::Plain, 0};
  if (const RequestHead* request = facts.request) {
    target = examineRequestTarget(request->target);
    if (target.shape == PathShape::Invalid) {
      d.reason = Reason::BadRequest;
      return d;
    }
    if (request->host_count == 0) {
      d.reason = Reason::HostMissing;
      return d;
    }
    if (request->host_count > 1) {
      d.reason = Reason::HostDuplicate;
      return d;
    }
    if (!authorityNames(request->host, d.host, facts.port) ||
        (request->absolute_form && !authorityNames(request->uri_authority, d.host, facts.port))) {
      d.reason = Reason::HostMismatch;
      return d;
    }
  }

  // 4. A rule allows it. Candidates come from the index in policy order.
  const Policy& policy = *sandbox.policy;
  std::uint32_t candidates[64];
  std::size_t count = policy.index.matching(d.host, candidates, std::size(candidates));
  bool scan_all = count > std::size(candidates);  // absurdly many rules name H: walk them all
  std::size_t total = scan_all ? policy.rules.size() : count;
  Reason reason = d.host.isIpLiteral() ? Reason::IpLiteral : Reason::NotAllowedHost;
  for (std::size_t i = 0; i < total && d.rule == nullptr; ++i) {
    const Rule& rule = policy.rules[scan_all ? i : candidates[i]];
    if (scan_all && std::none_of(rule.hosts.begin(), rule.hosts.end(),
                                 [&](const HostPattern& p) { return p.matches(d.host); })) {
      continue;
    }
    Reason failed = matchRule(rule, facts, target);
    if (failed == Reason::None) {
      d.rule = &rule;
    } else {
      reason = reason == Reason::IpLiteral || reason == Reason::NotAllowedHost
                   ? failed
                   : furthest(reason, failed);
    }
  }
  if (d.rule == nullptr) {
    d.reason = reason;
    if (sandbox.mode != SandboxMode::Report || !isPolicyReason(reason)) {
      return d;
    }
  }

  // 5. The addresses sluice would dial, once known. An IP-literal H is its own, only, address.
  if (!facts.resolved && !d.host.isIpLiteral()) {
    d.verdict = d.rule != nullptr ? Verdict::Allow : Verdict::Report;
    if (d.rule != nullptr) {
      d.reason = Reason::None;
    }
    return d;
  }
  checkAddresses(sandbox, d, facts.addresses, facts.port);
  return d;
}

Decision decideAddresses(const Sandbox& sandbox, const Decision& unresolved,
                         std::span<const IpAddress> addresses, std::uint16_t port) {
  if (!unresolved.forwards()) {
    return unresolved;  // refused by checks 1 to 4 (or an IP literal's own address): final
  }
  // Back to where check 4 left it: a rule's reason is set again below, a report-mode
  // sandbox's policy reason stays.
  Decision d = unresolved;
  d.verdict = Verdict::Deny;
  d.ip_checked = false;
  d.usable_addresses = 0;
  checkAddresses(sandbox, d, addresses, port);
  return d;
}

bool mayResolve(const Sandbox& sandbox, const CanonicalHost& name) {
  if (name.isIpLiteral() || name.text().empty()) {
    return false;
  }
  if (sandbox.mode == SandboxMode::Report) {
    return true;
  }
  std::uint32_t candidates[1];
  return sandbox.policy->index.matching(name, candidates, std::size(candidates)) > 0;
}

}  // namespace sluice::policy
