#pragma once
// The decision: a pure function of a sandbox's configuration and the facts of one request.
// proxy/ gathers the facts (and may call decide() several times as they arrive: at CONNECT,
// at each request head, after resolving) and acts on the answer; nothing here does I/O.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "policy/config.h"
#include "policy/host_name.h"
#include "policy/reason.h"

namespace sluice::policy {

enum class Verdict : std::uint8_t { Deny, Allow, Report };
std::string_view toString(Verdict v);

enum class SniState : std::uint8_t {
  Unknown,  // not TLS, or the ClientHello has not been read yet: not checked
  Absent,   // the ClientHello carried no server_name
  Present,  // `sni` holds it, as received
};

// One HTTP request head, as received. Absent before the first request of a connection.
struct RequestHead {
  std::string_view method;
  std::string_view target;                // origin form "/p?q" (absolute form: split by caller)
  int host_count = 0;                     // number of Host header fields
  std::string_view host;                  // the Host value when host_count == 1
  bool absolute_form = false;
  std::string_view uri_authority;         // authority of an absolute-form target
  // It asks to become a WebSocket (HTTP/1.1 `Upgrade: websocket`, or an HTTP/2 extended CONNECT
  // with `:protocol websocket`): only a rule with `websocket: true` allows it.
  bool websocket = false;
};

struct RequestFacts {
  std::string_view target_host;  // H as received: CONNECT host, SNI (transparent), Host/URI
  std::uint16_t port = 0;        // the port H is reached on
  Scheme scheme = Scheme::Https;
  SniState sni_state = SniState::Unknown;
  std::string_view sni;
  const RequestHead* request = nullptr;
  // Addresses sluice resolved for H itself; only checked when `resolved`. (An IP-literal H is
  // its own and only address, resolved or not.)
  bool resolved = false;
  std::span<const IpAddress> addresses;

  // The facts of a target alone: H, its port and scheme (no request yet, nothing resolved).
  static RequestFacts of(std::string_view host, std::uint16_t port, Scheme scheme) {
    RequestFacts facts;
    facts.target_host = host;
    facts.port = port;
    facts.scheme = scheme;
    return facts;
  }
};

// At most this many addresses of an answer are considered; the rest are never dialled.
inline constexpr std::size_t kMaxAddresses = 64;

struct Decision {
  Verdict verdict = Verdict::Deny;  // a default Decision denies
  Reason reason = Reason::NotAllowedHost;
  // The rule that matched the request, if one did (also when its addresses were then refused:
  // reason ip_denied with the rule names which rule's `ips` applied).
  const Rule* rule = nullptr;
  CanonicalHost host;               // canonical H (empty if H was bad)
  bool ip_checked = false;
  // Bit i set: addresses[i] passed the address checks and may be dialled.
  std::uint64_t usable_addresses = 0;

  bool forwards() const { return verdict != Verdict::Deny; }
};

// The checks, in this order; the first that fails decides (docs/policy.md#the-decision):
//   1. H canonicalises (docs/policy.md#names)                              else bad_host
//   2. TLS: the ClientHello has an SNI (sni_missing), equal to H (sni_mismatch)
//   3. Request: the target is a valid origin-form target (bad_request); exactly one Host
//      (host_missing, host_duplicate); Host, and an absolute-form authority, equal H with a port
//      that is absent or the connection's port (host_mismatch)
//   4. Rules: an IP-literal H must be listed exactly (ip_literal); then a rule must match H,
//      scheme, port, method, path and, for a WebSocket upgrade, `websocket: true`, in that
//      order. The rule that comes first in the policy and matches everything wins; when none
//      does, the reason is that of the rule that got furthest (not_allowed_host < _scheme <
//      _port < _method < _path < upgrade_not_allowed). Method, path and upgrade are only
//      checked once there is a request. A report-mode sandbox turns these reasons
//      (only these) into Verdict::Report and goes on.
//   5. Addresses, once resolved: an address may be dialled if it is not one of sluice's own
//      listen endpoints and, when the rule has `ips`, lies inside them, else is globally
//      reachable (docs/policy.md#addresses). None left: ip_denied, in every mode.
Decision decide(const Sandbox& sandbox, const RequestFacts& facts);

// Check 5 alone, for a request already decided without addresses: given `unresolved` =
// decide(sandbox, facts) with facts.resolved false, returns exactly decide(sandbox, facts) with
// facts.resolved true, facts.addresses = `addresses` and facts.port = `port` (the same port as
// before). Checks 1 to 4 (canonicalising H and the SNI, the target, the Host, the rules) do not
// read the addresses, so their outcome is taken from `unresolved`: an upstream connection
// reused for a request is checked for its one address without deciding the request again.
Decision decideAddresses(const Sandbox& sandbox, const Decision& unresolved,
                         std::span<const IpAddress> addresses, std::uint16_t port);

// Why an address may not be dialled for a request (docs/policy.md#addresses), in the order the
// checks are made; None: it may. Check 5 above, for one address.
enum class AddressRefusal : std::uint8_t {
  None,
  SluiceListener,  // one of sluice's own listen endpoints (with this port)
  OutsideRuleIps,  // the rule has `ips`, and none holds it
  NotGlobal,       // the rule has no `ips`, and the address is not globally reachable unicast
};
AddressRefusal addressRefusal(const Sandbox& sandbox, const Rule* rule, const IpAddress& address,
                              std::uint16_t port);
std::string_view toString(AddressRefusal r);  // "sluice_listener", ...; "" for None

// The address's class as `sluice explain` and the audit record's `denied_addrs` name it:
// "documentation", "link_local", and for IPv4 carried in IPv6 the carrier first: "nat64:private".
std::string addressClassText(const IpAddress& address);

// The sandbox's resolver (docs/wire.md#the-sandboxs-resolver): whether a name may get an answer at
// all. True when some rule's hosts match the name (whatever its ports, schemes, methods or paths:
// those are checked when the connection comes), or for any valid name in a report-mode sandbox
// (whose traffic must reach sluice to be recorded). Never for IP literals. The answer is always
// sluice's own address, so a true here lets nothing out: it only lets the connection come to
// sluice.
bool mayResolve(const Sandbox& sandbox, const CanonicalHost& name);

}  // namespace sluice::policy
