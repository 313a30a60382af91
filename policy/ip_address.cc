#include "policy/ip_address.h"

#include <cstring>
#include <span>

#include "base/ascii.h"
#include "base/ip_text.h"

namespace sluice::policy {

namespace {

// The prefix of the IPv4-mapped block ::ffff:0:0/96, the form IPv4 addresses are stored in.
constexpr std::array<std::uint8_t, 12> kMappedPrefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
// A v4 prefix length n is 96 + n over the 128-bit form.
constexpr int kMappedBits = 96;

using ascii::hexValue;
using ascii::isDigit;

// A decimal number of 1..max_digits ASCII digits without a leading zero ("0" itself is fine),
// consumed from text[*pos]. No sign, no whitespace, no other base: every spelling that some
// library reads differently ("010", "0x10", "+1") is refused rather than interpreted.
std::optional<std::uint32_t> parseDecimal(std::string_view text, std::size_t* pos,
                                          std::size_t max_digits) {
  std::size_t i = *pos;
  if (i >= text.size() || !isDigit(text[i])) {
    return std::nullopt;
  }
  if (text[i] == '0' && i + 1 < text.size() && isDigit(text[i + 1])) {
    return std::nullopt;
  }
  std::uint32_t value = 0;
  std::size_t digits = 0;
  while (i < text.size() && isDigit(text[i])) {
    if (++digits > max_digits) {
      return std::nullopt;
    }
    value = value * 10 + static_cast<std::uint32_t>(text[i] - '0');
    ++i;
  }
  *pos = i;
  return value;
}

// Exactly "d.d.d.d", each part 0-255 in canonical decimal, and nothing after it.
std::optional<std::uint32_t> parseDottedQuad(std::string_view text) {
  std::uint32_t value = 0;
  std::size_t pos = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (pos >= text.size() || text[pos] != '.') {
        return std::nullopt;
      }
      ++pos;
    }
    const auto octet = parseDecimal(text, &pos, 3);
    if (!octet || *octet > 255) {
      return std::nullopt;
    }
    value = (value << 8) | *octet;
  }
  if (pos != text.size()) {
    return std::nullopt;
  }
  return value;
}

bool isMappedForm(const std::array<std::uint8_t, 16>& bytes) {
  return std::memcmp(bytes.data(), kMappedPrefix.data(), kMappedPrefix.size()) == 0;
}

// Whether the first `bits` bits of a and b agree.
bool samePrefix(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& b,
                int bits) {
  const auto whole = static_cast<std::size_t>(bits / 8);
  if (std::memcmp(a.data(), b.data(), whole) != 0) {
    return false;
  }
  const int rest = bits % 8;
  if (rest == 0) {
    return true;
  }
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return ((a[whole] ^ b[whole]) & mask) == 0;
}

// Whether any bit after the first `bits` is set.
bool hasHostBits(const std::array<std::uint8_t, 16>& a, int bits) {
  for (int i = bits; i < 128; ++i) {
    if ((a[static_cast<std::size_t>(i / 8)] >> (7 - i % 8)) & 1) {
      return true;
    }
  }
  return false;
}

// A port as docs/policy.md#schemes-and-ports allows it: 1-5 ASCII digits, no leading zero,
// 1..65535. "0443", "+443", "0x1bb" and "65979" (which glibc truncates to 443) are all refused.
std::optional<std::uint16_t> parsePort(std::string_view text) {
  std::size_t pos = 0;
  const auto value = parseDecimal(text, &pos, 5);
  if (!value || pos != text.size() || *value == 0 || *value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(*value);
}

// Linux binds an AF_INET6 socket given ::ffff:a.b.c.d to the IPv4 address a.b.c.d, so for
// "same socket" questions a mapped address is its IPv4 address.
bool actsAsV4(const IpAddress& a) { return a.isV4() || isMappedForm(a.bytes()); }

bool isV4Any(const IpAddress& a) {
  return actsAsV4(a) && a.bytes()[12] == 0 && a.bytes()[13] == 0 && a.bytes()[14] == 0 &&
         a.bytes()[15] == 0;
}

bool isV6Any(const IpAddress& a) {
  if (a.isV4()) {
    return false;
  }
  for (const std::uint8_t b : a.bytes()) {
    if (b != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

IpAddress IpAddress::fromV4(std::uint32_t host_order) {
  IpAddress a;
  a.v4_ = true;
  a.bytes_[12] = static_cast<std::uint8_t>(host_order >> 24);
  a.bytes_[13] = static_cast<std::uint8_t>(host_order >> 16);
  a.bytes_[14] = static_cast<std::uint8_t>(host_order >> 8);
  a.bytes_[15] = static_cast<std::uint8_t>(host_order);
  return a;
}

IpAddress IpAddress::fromV6(const std::array<std::uint8_t, 16>& bytes) {
  IpAddress a;
  a.v4_ = false;
  a.bytes_ = bytes;
  return a;
}

std::uint32_t IpAddress::v4() const {
  return (std::uint32_t{bytes_[12]} << 24) | (std::uint32_t{bytes_[13]} << 16) |
         (std::uint32_t{bytes_[14]} << 8) | std::uint32_t{bytes_[15]};
}

std::optional<IpAddress> IpAddress::parseV4(std::string_view text) {
  const auto value = parseDottedQuad(text);
  if (!value) {
    return std::nullopt;
  }
  return fromV4(*value);
}

std::optional<IpAddress> IpAddress::parseV6(std::string_view text) {
  // No valid literal is longer; the cap also bounds the work on hostile input.
  if (text.empty() || text.size() > kMaxTextLength) {
    return std::nullopt;
  }
  std::array<std::uint16_t, 8> groups{};
  int count = 0;
  int gap = -1;  // index in `groups` where "::" stands, if it appeared
  std::size_t i = 0;
  const std::size_t n = text.size();

  if (text[0] == ':') {
    // A leading colon is only valid as the first half of "::".
    if (n < 2 || text[1] != ':') {
      return std::nullopt;
    }
    gap = 0;
    i = 2;
  }
  while (i < n) {
    std::size_t end = i;
    unsigned value = 0;
    while (end < n) {
      const int digit = hexValue(text[end]);
      if (digit < 0) {
        break;
      }
      if (end - i == 4) {
        return std::nullopt;  // a fifth digit; no dotted-quad part is that long either
      }
      value = (value << 4) | static_cast<unsigned>(digit);
      ++end;
    }
    if (end < n && text[end] == '.') {
      // The trailing dotted quad (RFC 4291 §2.2 form 3): it must run to the end, in canonical
      // decimal, and fill the last two groups.
      const auto quad = parseDottedQuad(text.substr(i));
      if (!quad || count > 6) {
        return std::nullopt;
      }
      groups[static_cast<std::size_t>(count++)] = static_cast<std::uint16_t>(*quad >> 16);
      groups[static_cast<std::size_t>(count++)] = static_cast<std::uint16_t>(*quad & 0xffff);
      break;
    }
    if (end == i || count == 8) {
      return std::nullopt;
    }
    groups[static_cast<std::size_t>(count++)] = static_cast<std::uint16_t>(value);
    i = end;
    if (i == n) {
      break;
    }
    if (text[i] != ':') {
      return std::nullopt;  // brackets, "%zone", spaces, anything else
    }
    ++i;
    if (i < n && text[i] == ':') {
      if (gap >= 0) {
        return std::nullopt;  // a second "::"
      }
      gap = count;
      ++i;
    } else if (i == n) {
      return std::nullopt;  // a trailing single colon
    }
  }

  if (gap < 0 ? count != 8 : count > 7) {
    // Without "::" all eight groups are written; with it, "::" stands for at least one group.
    return std::nullopt;
  }
  std::array<std::uint8_t, 16> bytes{};
  const int tail = gap < 0 ? 0 : count - gap;
  for (int g = 0; g < count; ++g) {
    const int slot = (gap >= 0 && g >= gap) ? 8 - tail + (g - gap) : g;
    const auto at = static_cast<std::size_t>(slot * 2);
    bytes[at] = static_cast<std::uint8_t>(groups[static_cast<std::size_t>(g)] >> 8);
    bytes[at + 1] = static_cast<std::uint8_t>(groups[static_cast<std::size_t>(g)] & 0xff);
  }
  return fromV6(bytes);
}

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  // Only IPv6 text contains a colon; deciding by it means the two parsers never both apply.
  if (text.find(':') != std::string_view::npos) {
    return parseV6(text);
  }
  return parseV4(text);
}

std::size_t IpAddress::format(char (&buf)[kMaxTextLength + 1]) const {
  // An IPv4 address is written as its 4 octets; any other, mapped ones included, as 16.
  return v4_ ? writeIpText(std::span<const std::uint8_t>(bytes_).subspan(12), buf)
             : writeIpText(bytes_, buf);
}

std::string IpAddress::toString() const {
  char buf[kMaxTextLength + 1];
  const std::size_t length = format(buf);
  return std::string(buf, length);
}

std::optional<Cidr> Cidr::parse(std::string_view text, ParseError* why) {
  const auto fail = [why](ParseError e) -> std::optional<Cidr> {
    if (why != nullptr) {
      *why = e;
    }
    return std::nullopt;
  };
  const std::size_t slash = text.find('/');
  const auto address = IpAddress::parse(text.substr(0, slash));
  if (!address) {
    return fail(ParseError::BadAddress);
  }
  const int max_length = address->isV4() ? 32 : 128;
  int length = max_length;
  if (slash != std::string_view::npos) {
    const std::string_view prefix = text.substr(slash + 1);
    std::size_t pos = 0;
    const auto value = parseDecimal(prefix, &pos, 3);
    if (!value || pos != prefix.size() || *value > static_cast<std::uint32_t>(max_length)) {
      return fail(ParseError::BadPrefix);
    }
    length = static_cast<int>(*value);
  }
  Cidr cidr;
  cidr.base_ = *address;
  cidr.bits_ = address->isV4() ? kMappedBits + length : length;
  // "10.0.0.1/8" is refused rather than silently widened: the operator writes what they mean.
  if (hasHostBits(cidr.base_.bytes(), cidr.bits_)) {
    return fail(ParseError::HostBitsSet);
  }
  return cidr;
}

namespace {

// IPv6 prefixes that carry (or route to) an IPv4 address: mapped, compatible, NAT64 (well-known
// and local-use), 6to4 and Teredo. Sorted so that no prefix hides a later one.
struct Embedding {
  std::array<std::uint8_t, 16> prefix;
  int bits;
};
constexpr Embedding kEmbeddings[] = {
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}, 96},     // ::ffff:0:0/96
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96},           // ::/96
    {{0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96},  // 64:ff9b::/96
    {{0, 0x64, 0xff, 0x9b, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 48},  // 64:ff9b:1::/48
    {{0x20, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 16},     // 2002::/16
    {{0x20, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32},     // 2001::/32 (Teredo)
};

}  // namespace

bool Cidr::contains(const IpAddress& address) const {
  // An address that carries an IPv4 address (::ffff:10.0.0.1, 64:ff9b::a9fe:a9fe,
  // 2002:7f00:1::) is covered only by a block written inside that embedding's own prefix: an
  // operator who opens "all IPv6" (::/0, 2000::/3) has not opened the metadata address through
  // NAT64, nor loopback through 6to4. An IPv4 block covers the mapped form of its addresses
  // (its 16-byte form is inside ::ffff:0:0/96), and no other.
  for (const Embedding& e : kEmbeddings) {
    if (samePrefix(e.prefix, address.bytes(), e.bits)) {
      if (bits_ < e.bits || !samePrefix(e.prefix, base_.bytes(), e.bits)) {
        return false;
      }
      break;
    }
  }
  return samePrefix(base_.bytes(), address.bytes(), bits_);
}

std::string Cidr::toString() const {
  return base_.toString() + "/" + std::to_string(prefixLength());
}

std::optional<Endpoint> Endpoint::parse(std::string_view text, bool port_required,
                                        std::uint16_t default_port) {
  std::string_view host;
  std::optional<std::string_view> port_text;
  bool bracketed = false;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    bracketed = true;
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return std::nullopt;
      }
      port_text = rest.substr(1);
    }
  } else {
    const std::size_t first = text.find(':');
    if (first != std::string_view::npos && text.find(':', first + 1) == std::string_view::npos) {
      // One colon: IPv4 with a port.
      host = text.substr(0, first);
      port_text = text.substr(first + 1);
    } else {
      // No colon (bare IPv4) or several (bare IPv6: a port needs brackets to be told apart).
      host = text;
    }
  }

  const auto ip = bracketed ? IpAddress::parseV6(host) : IpAddress::parse(host);
  if (!ip) {
    return std::nullopt;
  }
  Endpoint endpoint;
  endpoint.ip = *ip;
  if (port_text) {
    const auto port = parsePort(*port_text);
    if (!port) {
      return std::nullopt;
    }
    endpoint.port = *port;
  } else {
    if (port_required) {
      return std::nullopt;
    }
    endpoint.port = default_port;
  }
  return endpoint;
}

// ::ffff:0.0.0.0 counts too: Linux binds it as INADDR_ANY, so it takes every IPv4 address.
bool Endpoint::isWildcard() const { return isV4Any(ip) || isV6Any(ip); }

bool Endpoint::overlaps(const Endpoint& a, const Endpoint& b) {
  if (a.port != b.port) {
    return false;
  }
  // Same bytes: same socket, whether spelled 1.2.3.4 or ::ffff:1.2.3.4.
  if (a.ip.bytes() == b.ip.bytes()) {
    return true;
  }
  // [::] takes the port on every address, IPv4 included (dual-stack, bindv6only=0). Assuming
  // dual-stack is the safe side: it can only report more overlaps, never fewer.
  if (isV6Any(a.ip) || isV6Any(b.ip)) {
    return true;
  }
  // 0.0.0.0 takes the port on every IPv4 address.
  return (isV4Any(a.ip) && actsAsV4(b.ip)) || (isV4Any(b.ip) && actsAsV4(a.ip));
}

std::string Endpoint::toString() const {
  std::string text = ip.isV4() ? ip.toString() : "[" + ip.toString() + "]";
  text += ':';
  text += std::to_string(port);
  return text;
}

}  // namespace sluice::policy
