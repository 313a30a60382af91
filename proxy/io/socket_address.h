#pragma once
// Conversions between sluice's own Endpoint (policy/ip_address.h) and the kernel's sockaddr.
// The proxy dials the bytes policy/ checked, so the conversion goes from the parsed IpAddress
// bytes straight to a sockaddr: no text, no second parser.

#include <sys/socket.h>

#include <optional>

#include "policy/ip_address.h"

namespace sluice::proxy::io {

// Returns the length of the sockaddr written into `out`.
socklen_t toSockaddr(const policy::Endpoint& endpoint, sockaddr_storage* out);
std::optional<policy::Endpoint> fromSockaddr(const sockaddr* address);

}  // namespace sluice::proxy::io
