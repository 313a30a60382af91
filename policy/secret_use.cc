#include "policy/secret_use.h"

namespace sluice::policy {

bool injects(const Rule& rule, std::string_view name) {
  for (const SecretInjection& injection : rule.inject) {
    if (injection.secret == name) {
      return true;
    }
  }
  return false;
}

const Secret* misusedSecret(std::span<const Secret> secrets, const Rule* rule,
                            std::string_view text) {
  for (const Secret& secret : secrets) {
    if (!secret.placeholder.empty() && text.find(secret.placeholder) != std::string_view::npos &&
        (rule == nullptr || !injects(*rule, secret.name))) {
      return &secret;
    }
  }
  return nullptr;
}

}  // namespace sluice::policy
