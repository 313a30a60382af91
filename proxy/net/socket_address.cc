#include "proxy/net/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace sluice::proxy::net {

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
    if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
      // An IPv4 peer of a dual-stack ([::]) socket is an IPv4 peer: say so in logs and records.
      std::uint32_t v4;
      std::memcpy(&v4, sin6->sin6_addr.s6_addr + 12, 4);
      return policy::Endpoint{policy::IpAddress::fromV4(ntohl(v4)), ntohs(sin6->sin6_port)};
    }
    std::array<std::uint8_t, 16> bytes;
    std::memcpy(bytes.data(), &sin6->sin6_addr, 16);
    return policy::Endpoint{policy::IpAddress::fromV6(bytes), ntohs(sin6->sin6_port)};
  }
  return std::nullopt;
}

namespace {

std::optional<policy::Endpoint> askKernel(int (*ask)(int, sockaddr*, socklen_t*), int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (ask(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return std::nullopt;
  }
  return fromSockaddr(reinterpret_cast<const sockaddr*>(&address));
}

}  // namespace

std::optional<policy::Endpoint> localEndpoint(int fd) { return askKernel(::getsockname, fd); }

std::optional<policy::Endpoint> peerEndpoint(int fd) { return askKernel(::getpeername, fd); }

std::optional<policy::Endpoint> originalDestination(int fd) {
  // From <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>, whose C headers do
  // not mix well with C++: both options are number 80.
  constexpr int kSoOriginalDst = 80;
  constexpr int kIp6tSoOriginalDst = 80;
  sockaddr_in6 v6{};
  socklen_t length = sizeof(v6);
  if (::getsockopt(fd, SOL_IPV6, kIp6tSoOriginalDst, &v6, &length) == 0 &&
      v6.sin6_family == AF_INET6) {
    return fromSockaddr(reinterpret_cast<const sockaddr*>(&v6));
  }
  sockaddr_in v4{};
  length = sizeof(v4);
  if (::getsockopt(fd, SOL_IP, kSoOriginalDst, &v4, &length) == 0 && v4.sin_family == AF_INET) {
    return fromSockaddr(reinterpret_cast<const sockaddr*>(&v4));
  }
  return std::nullopt;
}

}  // namespace sluice::proxy::net
