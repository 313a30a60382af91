#pragma once
// Which addresses sluice refuses to dial unless an operator opens them with a rule's `ips`
// (docs/policy.md#addresses). The table follows the IANA special-purpose registries: only globally
// reachable unicast is `Global`. IPv6 outside 2000::/3 is not global unicast and is refused as a
// whole. IPv4 embedded in IPv6 (mapped ::ffff:0:0/96, compatible ::/96, NAT64 64:ff9b::/96, 6to4
// 2002::/16) is classified by the IPv4 address it carries; Teredo and local-use NAT64
// (64:ff9b:1::/48, whose embedding the operator chooses) are refused outright.

#include <cstdint>
#include <string_view>

#include "policy/ip_address.h"

namespace sluice::policy {

enum class AddressClass : std::uint8_t {
  Global,            // globally reachable unicast: may be dialled
  Unspecified,       // 0.0.0.0/8, ::/128
  Loopback,          // 127.0.0.0/8, ::1
  Private,           // RFC 1918
  Cgnat,             // 100.64.0.0/10
  LinkLocal,         // 169.254.0.0/16 (cloud metadata), fe80::/10
  IetfProtocol,      // 192.0.0.0/24, 2001::/23 (besides Teredo)
  Documentation,     // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
  Benchmarking,      // 198.18.0.0/15, 2001:2::/48
  Relay6to4,         // 192.88.99.0/24 (deprecated anycast)
  Multicast,         // 224.0.0.0/4, ff00::/8
  Reserved,          // 240.0.0.0/4 except broadcast
  Broadcast,         // 255.255.255.255
  UniqueLocal,       // fc00::/7
  SiteLocal,         // fec0::/10 (deprecated)
  Discard,           // 100::/64
  Teredo,            // 2001::/32
  Nat64Local,        // 64:ff9b:1::/48
  Srv6,              // 5f00::/16
  NotGlobalUnicast,  // any other IPv6 outside 2000::/3
};

// How an IPv4 address was carried inside IPv6, when it was.
enum class Embedding : std::uint8_t { None, Mapped, Compatible, Nat64, SixToFour };

struct AddressClassification {
  AddressClass address_class = AddressClass::NotGlobalUnicast;
  Embedding embedding = Embedding::None;

  bool isGlobal() const { return address_class == AddressClass::Global; }
};

AddressClassification classifyAddress(const IpAddress& address);

// "loopback", "link_local", ... ; and "mapped", "nat64", ... for embeddings.
std::string_view toString(AddressClass c);
std::string_view toString(Embedding e);

}  // namespace sluice::policy
