#pragma once
// Credential brokering (docs/wire.md#credential-brokering), the parts that are pure: which
// fields a rule injects into the head sluice writes, whether a request carries the placeholder
// of a secret its rule does not inject, and whether an answer is coded in a way the masking of
// echoed secrets cannot look into.

#include <span>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "proxy/http/header_block.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"

namespace sluice::proxy {
class SecretValues;
}  // namespace sluice::proxy

namespace sluice::proxy::session {

// The fields `rule` injects (values from `secrets`), and Accept-Encoding: identity when it
// injects any and does not set that field itself: the answer is masked, and masking cannot see
// into a compressed body. Replaces `fields`' contents (its capacity is kept).
void injectedFields(const policy::Rule* rule, const SecretValues& secrets,
                    std::vector<http::HeaderField>& fields);

// The first secret whose placeholder the target or a field value of `head` carries and `rule`
// does not inject (secret_misuse), or null.
const policy::Secret* misusedInHead(std::span<const policy::Secret> secrets,
                                    const policy::Rule* rule, const http::RequestHead& head);

// The first secret whose placeholder a value of `fields` (a request's trailers) carries and
// `rule` does not inject, or null.
const policy::Secret* misusedInFields(std::span<const policy::Secret> secrets,
                                      const policy::Rule* rule, const http::HeaderBlock& fields);

// The answer has a body with a content coding other than identity (gzip, br, an encrypted
// one...): an echoed secret in it could not be masked.
bool codedBody(const http::ResponseHead& head);

}  // namespace sluice::proxy::session
