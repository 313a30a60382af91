#include "proxy/io/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace sluice::proxy::io {

socklen_t toSockaddr(const policy::Endpoint& endpoint, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (endpoint.ip.isV4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(endpoint.port);
    sin->sin_addr.s_addr = htonl(endpoint.ip.v4());
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(endpoint.port);
  std::memcpy(&sin6->sin6_addr, endpoint.ip.bytes().data(), 16);
  return sizeof(sockaddr_in6);
}

std::optional<policy::Endpoint> fromSockaddr(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(address);
    return policy::Endpoint{policy::IpAddress::fromV4(ntohl(sin->sin_addr.s_addr)),
                            ntohs(sin->sin_port)};
  }
  if (address->sa_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(address);
    std::array<std::uint8_t, 16> bytes;
    std::memcpy(bytes.data(), &sin6->sin6_addr, 16);
    return policy::Endpoint{policy::IpAddress::fromV6(bytes), ntohs(sin6->sin6_port)};
  }
  return std::nullopt;
}

}  // namespace sluice::proxy::io
