#pragma once
// IP addresses as text: the one writer of the canonical spelling, shared by policy/ (every
// address it prints: logs, audit records, `sluice explain`) and certs/ (which accepts a host
// for a certificate only in exactly this spelling). Two writers would let the two disagree on
// what "canonical" means.
//
// 4 octets: a dotted quad without leading zeros. 16 octets: RFC 5952 (lower case, no leading
// zeros in a group, the longest run of two or more zero groups compressed, the first on a tie),
// with the IPv4-mapped block written as "::ffff:a.b.c.d" (RFC 5952 §5). No allocation.

#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice {

// "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", the longest text an address has.
inline constexpr std::size_t kMaxIpTextLength = 45;

// Writes `octets` (4 or 16 of them, network order) into `out`, NUL-terminated, and returns the
// text's length; any other number of octets writes "" and returns 0.
std::size_t writeIpText(std::span<const std::uint8_t> octets,
                        char (&out)[kMaxIpTextLength + 1]);

}  // namespace sluice
