#include "proxy/session/exchange/credential_brokering.h"

#include "policy/secret_use.h"
#include "proxy/runtime/secret_values.h"

namespace sluice::proxy::session {

namespace {

constexpr std::string_view kAcceptEncoding = "Accept-Encoding";

}  // namespace

void injectedFields(const policy::Rule* rule, const SecretValues& secrets,
                    std::vector<http::HeaderField>& fields) {
  fields.clear();
  bool rule_sets_accept_encoding = false;
  if (rule != nullptr) {
    for (const policy::SecretInjection& injection : rule->inject) {
      fields.push_back({injection.header, secrets.value(injection.secret)});
      rule_sets_accept_encoding |= http::ascii::iequals(injection.header, kAcceptEncoding);
    }
  }
  if (!fields.empty() && !rule_sets_accept_encoding) {
    // Asked for uncompressed, in place of what the sandbox asked for (a client that asked for
    // gzip reads identity too, as HTTP allows).
    fields.push_back({kAcceptEncoding, "identity"});
  }
}

const policy::Secret* misusedInHead(std::span<const policy::Secret> secrets,
                                    const policy::Rule* rule, const http::RequestHead& head) {
  const policy::Secret* misused = policy::misusedSecret(secrets, rule, head.target);
  return misused != nullptr ? misused : misusedInFields(secrets, rule, head.headers);
}

const policy::Secret* misusedInFields(std::span<const policy::Secret> secrets,
                                      const policy::Rule* rule, const http::HeaderBlock& fields) {
  const policy::Secret* misused = nullptr;
  for (std::size_t i = 0; misused == nullptr && i < fields.size(); ++i) {
    misused = policy::misusedSecret(secrets, rule, fields.value(i));
  }
  return misused;
}

// Transfer codings other than chunked never get here: the response parser refuses them on
// every response. A bodiless answer (HEAD, 204, 304) hides nothing.
bool codedBody(const http::ResponseHead& head) {
  if (head.framing == http::ResponseFraming::None) {
    return false;
  }
  for (std::size_t i = 0; i < head.headers.size(); ++i) {
    if (!http::ascii::iequals(head.headers.name(i), "Content-Encoding")) {
      continue;
    }
    std::string_view list = head.headers.value(i);
    for (;;) {
      const std::size_t comma = list.find(',');
      const std::string_view coding = http::ascii::trimOws(list.substr(0, comma));
      if (!coding.empty() && !http::ascii::iequals(coding, "identity")) {
        return true;
      }
      if (comma == std::string_view::npos) {
        break;
      }
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}

}  // namespace sluice::proxy::session
