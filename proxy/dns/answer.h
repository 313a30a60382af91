#pragma once
// What a DNS lookup yields: the addresses of a name and how long they may be used, or why there
// are none. Shared by the resolver, its cache and the sessions that dial the addresses.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/ip_address.h"

namespace sluice::proxy::dns {

// The A and AAAA addresses of one name, A first, each in the order the server sent it, without
// duplicates, at most kMaxAddresses. Immutable once built: shared by the cache and every caller.
struct Answer {
  static constexpr std::size_t kMaxAddresses = 64;

  std::vector<policy::IpAddress> addresses;  // never empty
  // Arrival + min(smallest record TTL, max_ttl). Equal to the arrival time when the answer was
  // not cacheable (TTL 0); callers use the addresses once either way (never re-resolve).
  std::chrono::steady_clock::time_point expires;
};

enum class DnsError : std::uint8_t {
  NotFound,     // NXDOMAIN: the name does not exist
  NoAddresses,  // NODATA: the name exists but has no A and no AAAA record
  Timeout,      // no server answered within settings.timeout
  Refused,      // the servers refused (REFUSED, SERVFAIL) or were unreachable
  Failed,       // anything else, including names the resolver will not look up (IP literals)
  Cancelled,    // the resolver is closing; never delivered to a callback
};

std::string_view toString(DnsError e);

using LookupResult = Result<std::shared_ptr<const Answer>, DnsError>;

}  // namespace sluice::proxy::dns
