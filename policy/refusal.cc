#include "policy/refusal.h"

namespace sluice::policy {

bool isKnownTlsPort(const Policy& policy, std::uint16_t port) {
  if (port == defaultPort(Scheme::Https)) {
    return true;
  }
  for (const Rule& rule : policy.rules) {
    if (rule.allowsScheme(Scheme::Https) && rule.allowsPort(Scheme::Https, port)) {
      return true;
    }
  }
  return false;
}

bool refusesInBand(const Sandbox& sandbox, const Decision& refused, std::uint16_t port) {
  if (sandbox.refusal != Refusal::InBand || refused.forwards() || sandbox.policy == nullptr) {
    return false;
  }
  switch (refused.reason) {
    case Reason::NotAllowedHost:
    case Reason::NotAllowedScheme:
    case Reason::NotAllowedPort:
      break;
    default:
      return false;
  }
  if (refused.host.text().empty() || refused.host.isIpLiteral()) {
    return false;
  }
  return isKnownTlsPort(*sandbox.policy, port);
}

}  // namespace sluice::policy
