#pragma once
// IP addresses, CIDR blocks and listen endpoints, parsed strictly by one parser.
//
// Why our own parser: libraries disagree on what a literal is (c-ares 1.18 reads `0177.0.0.1` as
// 177.0.0.1, glibc as 127.0.0.1; glibc accepts `127.1` and `2130706433`). Two parsers that
// disagree are a bypass, so sluice decides "is this an address, and which" here and nowhere else,
// and the proxy dials the bytes this parser produced.
//
// Accepted IPv4: exactly four decimal parts 0-255 without leading zeros ("0" itself is fine).
// Accepted IPv6: RFC 4291 text (1-4 hex digits a group, one "::", an optional trailing dotted
// quad as above), case-insensitive, no brackets, no zone index ("%eth0").

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/ip_text.h"

namespace sluice::policy {

class IpAddress {
 public:
  // Longest text form: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" is 45 chars.
  static constexpr std::size_t kMaxTextLength = kMaxIpTextLength;

  IpAddress() = default;  // 0.0.0.0
  static IpAddress fromV4(std::uint32_t host_order);
  static IpAddress fromV6(const std::array<std::uint8_t, 16>& bytes);

  // Strict parsers; nullopt for anything that is not exactly one address in the forms above.
  static std::optional<IpAddress> parseV4(std::string_view text);
  static std::optional<IpAddress> parseV6(std::string_view text);
  static std::optional<IpAddress> parse(std::string_view text);  // v4 or v6

  bool isV4() const { return v4_; }
  // The IPv4 value in host byte order; only meaningful when isV4().
  std::uint32_t v4() const;
  // 16 bytes in network order. An IPv4 address is stored in its IPv4-mapped form
  // (::ffff:a.b.c.d), so that a v4 CIDR covers the mapped AAAA form of the same address.
  const std::array<std::uint8_t, 16>& bytes() const { return bytes_; }

  // Dotted quad for IPv4; RFC 5952 for IPv6 (lower case, longest zero run compressed,
  // "::ffff:1.2.3.4" for mapped addresses): base/ip_text.h. Writes into buf, returns the length.
  std::size_t format(char (&buf)[kMaxTextLength + 1]) const;
  std::string toString() const;

  // Family first, then bytes: 127.0.0.1 and ::ffff:127.0.0.1 are different addresses to
  // compare, but the same bytes to a CIDR.
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
  friend auto operator<=>(const IpAddress&, const IpAddress&) = default;

 private:
  bool v4_ = true;
  std::array<std::uint8_t, 16> bytes_{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
};

// A block of addresses, "10.0.0.0/8" or "fd00::/8". A bare address means /32 or /128.
class Cidr {
 public:
  enum class ParseError : std::uint8_t { BadAddress, BadPrefix, HostBitsSet };

  static std::optional<Cidr> parse(std::string_view text, ParseError* why = nullptr);

  // Compares the 16-byte forms: 127.0.0.0/8 contains 127.0.0.1 and ::ffff:127.0.0.1. An address
  // that carries IPv4 (mapped, compatible, NAT64, 6to4, Teredo) is contained only by a block
  // written inside that embedding's prefix: ::/0 and 2000::/3 contain none of them.
  bool contains(const IpAddress& address) const;
  const IpAddress& base() const { return base_; }
  // Prefix length as written: 0-32 for IPv4, 0-128 for IPv6.
  int prefixLength() const { return base_.isV4() ? bits_ - 96 : bits_; }
  std::string toString() const;

  friend bool operator==(const Cidr&, const Cidr&) = default;

 private:
  IpAddress base_;
  int bits_ = 0;  // prefix over the 128-bit form
};

// A socket address sluice listens on or talks to: "127.0.0.1:3128", "[::1]:53".
struct Endpoint {
  IpAddress ip;
  std::uint16_t port = 0;

  // port_required=false allows a bare address ("10.0.0.1", "::1", "[::1]") with default_port.
  static std::optional<Endpoint> parse(std::string_view text, bool port_required = true,
                                       std::uint16_t default_port = 0);
  bool isWildcard() const;  // 0.0.0.0 or ::
  // Whether a listener on `a` and one on `b` would take the same socket (a wildcard address
  // takes its port on every address of its family).
  static bool overlaps(const Endpoint& a, const Endpoint& b);
  std::string toString() const;  // "1.2.3.4:80", "[::1]:53"

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

}  // namespace sluice::policy
