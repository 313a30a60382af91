#pragma once
// Conversions between sluice's own Endpoint (policy/ip_address.h) and the kernel's sockaddr.
// The proxy dials the bytes policy/ checked, so the conversion goes from the parsed IpAddress
// bytes straight to a sockaddr: no text, no second parser.

#include <sys/socket.h>

#include <optional>

#include "policy/ip_address.h"

namespace sluice::proxy::net {

// Returns the length of the sockaddr written into `out`.
socklen_t toSockaddr(const policy::Endpoint& endpoint, sockaddr_storage* out);
// An IPv4-mapped IPv6 address (a dual-stack socket's IPv4 peer) comes back as IPv4.
std::optional<policy::Endpoint> fromSockaddr(const sockaddr* address);
// The address a socket is bound to (getsockname): with port 0, the port the kernel chose.
std::optional<policy::Endpoint> localEndpoint(int fd);
// The address of a connected socket's peer (getpeername).
std::optional<policy::Endpoint> peerEndpoint(int fd);

// Where a connection redirected by nftables/iptables (REDIRECT or DNAT) was going: the
// conntrack entry's original destination (SO_ORIGINAL_DST, or its IPv6 form). Only readable in
// the network namespace that did the NAT; nullopt for a connection that was not redirected.
// sluice logs it and may compare it with its own answers, and never connects to it.
std::optional<policy::Endpoint> originalDestination(int fd);

}  // namespace sluice::proxy::net
