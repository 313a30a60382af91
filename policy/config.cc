// Look-ups and names of the configuration model. Rule::allowsPort/allowsMethod/allowsPath are
// defined in rule.cc.

#include "policy/config.h"

namespace sluice::policy {

std::string_view toString(Scheme s) {
  switch (s) {
    case Scheme::Https:
      return "https";
    case Scheme::Http:
      return "http";
  }
  return "unknown";
}

std::string_view toString(SandboxMode m) {
  switch (m) {
    case SandboxMode::Enforce:
      return "enforce";
    case SandboxMode::Report:
      return "report";
  }
  return "unknown";
}

std::string_view toString(OriginalDst o) {
  switch (o) {
    case OriginalDst::Ignore:
      return "ignore";
    case OriginalDst::RequireMatch:
      return "require_match";
  }
  return "unknown";
}

std::string_view toString(Refusal r) {
  switch (r) {
    case Refusal::InBand:
      return "in_band";
    case Refusal::AtConnect:
      return "at_connect";
  }
  return "unknown";
}

std::string_view toString(AdvisoryBlock b) {
  return b == AdvisoryBlock::All ? "all" : "malicious";
}

// Linear scans: a configuration has a handful of each, and these run at startup and reload,
// not per request (a session holds the Sandbox it was accepted for).
const Sandbox* Config::findSandbox(std::string_view name) const {
  for (const Sandbox& sandbox : sandboxes) {
    if (sandbox.name == name) {
      return &sandbox;
    }
  }
  return nullptr;
}

const Policy* Config::findPolicy(std::string_view name) const {
  for (const std::shared_ptr<const Policy>& policy : policies) {
    if (policy->name == name) {
      return policy.get();
    }
  }
  return nullptr;
}

const Secret* Config::findSecret(std::string_view name) const {
  for (const Secret& secret : secrets) {
    if (secret.name == name) {
      return &secret;
    }
  }
  return nullptr;
}

// Rule::allowsPort, Rule::allowsMethod and Rule::allowsPath: see rule.cc (the lead's).

}  // namespace sluice::policy
