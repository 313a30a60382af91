#pragma once
// Credential brokering's check (docs/wire.md#credential-brokering): a request that carries a
// secret's placeholder to a host whose rule does not inject that secret is denied
// (`secret_misuse`). Pure: the session hands in the texts it forwards (each header value, the
// request target) and the rule that allowed the request.

#include <span>
#include <string_view>

#include "policy/config.h"

namespace sluice::policy {

// The first secret (in config order) whose placeholder occurs in `text` and that `rule` does
// not inject; nullptr when there is none. `rule` may be null (a report-mode request no rule
// allowed): such a request injects nothing.
const Secret* misusedSecret(std::span<const Secret> secrets, const Rule* rule,
                            std::string_view text);

// Whether `rule` injects the secret named `name`.
bool injects(const Rule& rule, std::string_view name);

}  // namespace sluice::policy
