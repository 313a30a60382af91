#pragma once
// What sluice reads of an upstream DNS answer, apart from the resolver's event plumbing (so that
// fuzz_dns_answer runs exactly this code on hostile replies): c-ares parses the A or AAAA reply
// into addresses and TTLs; sluice keeps at most Answer::kMaxAddresses of them, joins the two
// families (A first, no duplicates), takes the smallest TTL (a TTL with the top bit set, which
// c-ares hands over negative, counts as 0) capped by max_ttl, and decides what the cache keeps.

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "policy/ip_address.h"
#include "proxy/dns/answer.h"

namespace sluice::proxy::dns {

// One family's half of a lookup, copied out of the reply (the reply buffer dies with the
// c-ares callback).
struct FamilyAnswer {
  std::optional<DnsError> error;
  std::vector<std::pair<policy::IpAddress, int>> records;  // address, TTL in seconds
};

// A c-ares status as a DnsError.
DnsError dnsErrorFromAresStatus(int status);

// The A (resp. AAAA) records of a reply, in the order the server sent them, at most
// Answer::kMaxAddresses; or the error c-ares found in it (no records then).
FamilyAnswer readAReply(const unsigned char* abuf, int alen);
FamilyAnswer readAaaaReply(const unsigned char* abuf, int alen);

// The result of a lookup from its two halves, and how long the cache may keep it (nullopt:
// not at all). `now` is when the second half arrived.
struct JoinedAnswer {
  LookupResult result;
  std::optional<std::chrono::steady_clock::time_point> cache_until;
};
JoinedAnswer joinFamilies(const FamilyAnswer& a, const FamilyAnswer& aaaa,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::milliseconds max_ttl);

// How long a negative answer (NotFound, NoAddresses) is kept at most.
inline constexpr std::chrono::milliseconds kMaxNegativeAnswerTtl{5000};

}  // namespace sluice::proxy::dns
