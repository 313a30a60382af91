#pragma once
// Where a refused tunnel is refused (docs/wire.md#refusals-in-band): a pure function of the
// sandbox's configuration and the decision that refused the tunnel. proxy/ acts on it: in band,
// the tunnel opens with a leaf for H and every request inside gets the refusal as its answer
// (never resolved, never dialled); else the CONNECT gets it (a redirected connection: an alert).

#include <cstdint>

#include "policy/config.h"
#include "policy/decision.h"

namespace sluice::policy {

// A port the sandbox's clients are expected to speak TLS on: 443, or a port some rule allows
// for https. A tunnel to any other port may carry another protocol (ssh over CONNECT to 22),
// whose client would wait for a greeting that never comes instead of reading a refusal.
bool isKnownTlsPort(const Policy& policy, std::uint16_t port);

// `refused` is decide() on a tunnel's own facts (its target, `port` and https; for a redirected
// connection, with its SNI), and denied it. True when the sandbox refuses in band
// (`refusal: in_band`, the default) and the tunnel can carry that refusal: its reason is one a
// rule could lift (not_allowed_host, not_allowed_scheme, not_allowed_port), H is a DNS name
// (sluice mints leaves for names; an IP literal and a name that is not valid are refused at the
// CONNECT), and `port` is a known TLS port. A limit (the rate, the audit log) is never refused in
// band: the CONNECT says it, and costs sluice no handshake.
bool refusesInBand(const Sandbox& sandbox, const Decision& refused, std::uint16_t port);

}  // namespace sluice::policy
