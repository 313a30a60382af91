#pragma once
// sluice's own answers: the response for a denial or an upstream failure (docs/wire.md#denials),
// built from the one reasons table (policy/reason.h): status line, `Sluice-Reason`, RFC 9209
// `Proxy-Status`, a one-line text body, and `Connection: close` (a denied connection is not
// kept: nothing pipelined behind a denied request is read).

#include <string>
#include <string_view>

#include "policy/reason.h"

namespace sluice::proxy::session {

// The standard reason phrase of the statuses sluice sends itself.
std::string_view reasonPhrase(int status);
// The status line's reason phrase of sluice's answer: the standard phrase, then who refused and
// why ("Forbidden by sluice: not_allowed_host"). apt, npm and Python print only the status line
// of a failure (docs/wire.md#denials).
std::string denialPhrase(int status, policy::Reason reason);

// A one-line explanation of a policy denial for the response body: what was asked and why it
// is not allowed. `host` is canonical H (or H as received when it is not a valid name).
std::string explainDenial(policy::Reason reason, std::string_view sandbox, std::string_view host,
                          std::string_view method, std::string_view target);

// The one-line text body of sluice's answer: "sluice: <reason>: <detail>\n", hostile bytes of
// `detail` replaced. (HTTP/2 answers carry the same text: docs/wire.md#http2.)
std::string denialBody(policy::Reason reason, std::string_view detail);
// The RFC 9209 Proxy-Status value for `reason`.
std::string proxyStatusValue(policy::Reason reason);
// Appends the whole response for `reason` to `out`. `detail` is a short human explanation
// (hostile bytes in it are replaced, so it cannot break the header or body framing).
void appendDenial(std::string& out, policy::Reason reason, std::string_view detail);

}  // namespace sluice::proxy::session
