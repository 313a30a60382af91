// The parts of a rule that match a request once its host has matched.
#include <algorithm>

#include "policy/config.h"
#include "policy/request_path.h"

namespace sluice::policy {

bool Rule::allowsPort(Scheme s, std::uint16_t port) const {
  if (ports.empty()) {
    // No `ports`: each scheme on its own default port, so https on :80 is not allowed by
    // accident of listing both schemes.
    return port == defaultPort(s);
  }
  return std::find(ports.begin(), ports.end(), port) != ports.end();
}

bool Rule::allowsMethod(std::string_view method) const {
  return methods.empty() || std::find(methods.begin(), methods.end(), method) != methods.end();
}

bool Rule::allowsPath(std::string_view target) const {
  if (paths.empty()) {
    return true;
  }
  return std::any_of(paths.begin(), paths.end(),
                     [&](const std::string& prefix) { return pathHasPrefix(target, prefix); });
}

}  // namespace sluice::policy
