// Credential brokering on the way out and back (README, "Credential brokering"): the headers a
// rule injects, and what its answer may bring back, masked (every form of every secret that
// SecretPatterns knows).
#include "proxy/generation.h"
#include "proxy/session/session.h"

namespace sluice::proxy::session {

void Session::injectSecrets() {
  inject_fields_.clear();
  if (const policy::Rule* rule = exchange_.matched_rule) {
    for (const policy::SecretInjection& injection : rule->inject) {
      inject_fields_.push_back({injection.header, generation_->secrets->value(injection.secret)});
    }
  }
  exchange_.injected = !inject_fields_.empty();
}

void Session::sendResponseHead(std::string_view head) {
  if (!response_mask_.active()) {
    sendClient(head);
    return;
  }
  // The head is a text of its own: masked whole, then the mask starts over for the body.
  masked_.clear();
  response_mask_.feed(std::span<const char>(head.data(), head.size()), masked_);
  response_mask_.finish(masked_);
  sendClient(masked_);
}

}  // namespace sluice::proxy::session
