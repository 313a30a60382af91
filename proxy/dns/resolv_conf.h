#pragma once
// The `nameserver` lines of /etc/resolv.conf, for a Resolver configured without servers.
//
// Only what glibc would use as a server, parsed with sluice's one strict address parser: the
// keyword at the start of a line followed by a blank, then an IPv4 or IPv6 literal (port 53).
// Everything else is ignored: comments (# or ; first), search/domain/options/sortlist lines,
// unparsable or non-canonical addresses ("0177.0.0.1"), and IPv6 with a zone index
// ("fe80::1%eth0", which c-ares cannot take as a server string). Like glibc, at most
// kMaxResolvConfServers (3) are kept.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "policy/ip_address.h"

namespace sluice::proxy::dns {

inline constexpr std::size_t kMaxResolvConfServers = 3;  // glibc's MAXNS

// Pure: text in, servers out, in file order.
std::vector<policy::Endpoint> parseResolvConf(std::string_view text);

// Reads and parses `path`; an unreadable file yields no servers.
std::vector<policy::Endpoint> readResolvConf(const std::string& path = "/etc/resolv.conf");

}  // namespace sluice::proxy::dns
