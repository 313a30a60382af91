// libFuzzer target for the IP-literal parser, CIDR and endpoint parsing, and classification.
// Invariants, each a trap on violation:
//   - parseV4 and parseV6 never both accept; parse() is whichever does.
//   - an accepted address formats to text that parses back to the same address, and that text
//     is a fixed point; the text fits kMaxTextLength.
//   - glibc's inet_pton (strict: dotted decimal without leading zeros, RFC 4291 text) accepts
//     exactly what we accept, with the same bytes. It is the oracle here only: policy/ never
//     calls it, so one parser decides on the data path.
//   - Cidr and Endpoint round-trip through toString(); overlaps() is symmetric and reflexive.
//   - classifyAddress() gives the same class to an IPv4 address and to its mapped, NAT64 and
//     6to4 forms; every class and embedding has a name.
// The first 16 bytes of the input are also used raw as an IPv6 address, so that formatting
// sees every zero-run shape, not just the ones the text parser reaches.
//
// Parser files: policy/ip_address.cc policy/address_class.cc

#include <arpa/inet.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "policy/address_class.h"
#include "policy/ip_address.h"

namespace {

namespace sp = sluice::policy;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

void checkClass(const sp::AddressClassification& c) {
  check(sp::toString(c.address_class) != "unknown");
  check(sp::toString(c.embedding) != "unknown");
  check(c.isGlobal() == (c.address_class == sp::AddressClass::Global));
}

sp::IpAddress withV4(std::uint32_t v4, std::array<std::uint8_t, 16> bytes, std::size_t offset) {
  bytes[offset] = static_cast<std::uint8_t>(v4 >> 24);
  bytes[offset + 1] = static_cast<std::uint8_t>(v4 >> 16);
  bytes[offset + 2] = static_cast<std::uint8_t>(v4 >> 8);
  bytes[offset + 3] = static_cast<std::uint8_t>(v4);
  return sp::IpAddress::fromV6(bytes);
}

void checkAddress(const sp::IpAddress& a) {
  char buf[sp::IpAddress::kMaxTextLength + 1];
  std::memset(buf, 'x', sizeof buf);
  const std::size_t length = a.format(buf);
  check(length > 0 && length <= sp::IpAddress::kMaxTextLength);
  check(buf[length] == '\0' && std::strlen(buf) == length);
  const std::string_view text(buf, length);
  check(a.toString() == text);

  const auto again = sp::IpAddress::parse(text);
  check(again.has_value() && *again == a);
  char buf2[sp::IpAddress::kMaxTextLength + 1];
  const std::size_t length2 = again->format(buf2);
  check(std::string_view(buf2, length2) == text);

  if (a.isV4()) {
    check(sp::IpAddress::fromV4(a.v4()) == a);
  }

  const sp::AddressClassification c = classifyAddress(a);
  checkClass(c);
  if (a.isV4()) {
    check(c.embedding == sp::Embedding::None);
    const std::uint32_t v4 = a.v4();
    const sp::AddressClassification mapped = classifyAddress(sp::IpAddress::fromV6(a.bytes()));
    check(mapped.address_class == c.address_class && mapped.embedding == sp::Embedding::Mapped);
    const auto nat64 = classifyAddress(withV4(v4, {0, 0x64, 0xff, 0x9b}, 12));
    check(nat64.address_class == c.address_class && nat64.embedding == sp::Embedding::Nat64);
    const auto six_to_four = classifyAddress(withV4(v4, {0x20, 0x02}, 2));
    check(six_to_four.address_class == c.address_class &&
          six_to_four.embedding == sp::Embedding::SixToFour);
    if (v4 > 1) {
      const auto compatible = classifyAddress(withV4(v4, {}, 12));
      check(compatible.address_class == c.address_class &&
            compatible.embedding == sp::Embedding::Compatible);
    }
  }
}

void checkAgainstInetPton(std::string_view input, const std::optional<sp::IpAddress>& v4,
                          const std::optional<sp::IpAddress>& v6) {
  if (input.find('\0') != std::string_view::npos) {
    return;  // inet_pton would stop at the NUL; ours refuses it (unit-tested)
  }
  const std::string z(input);
  unsigned char out[16];
  const bool pton4 = inet_pton(AF_INET, z.c_str(), out) == 1;
  check(pton4 == v4.has_value());
  if (pton4) {
    check(std::memcmp(out, v4->bytes().data() + 12, 4) == 0);
  }
  const bool pton6 = inet_pton(AF_INET6, z.c_str(), out) == 1;
  check(pton6 == v6.has_value());
  if (pton6) {
    check(std::memcmp(out, v6->bytes().data(), 16) == 0);
  }
}

void checkCidr(std::string_view input, const std::optional<sp::IpAddress>& any) {
  sp::Cidr::ParseError why = sp::Cidr::ParseError::BadAddress;
  const auto cidr = sp::Cidr::parse(input, &why);
  if (input.find('/') == std::string_view::npos) {
    // A bare address is the /32 or /128 of itself.
    check(cidr.has_value() == any.has_value());
  }
  if (!cidr) {
    return;
  }
  const int max = cidr->base().isV4() ? 32 : 128;
  check(cidr->prefixLength() >= 0 && cidr->prefixLength() <= max);
  // A block contains its base, unless it is an IPv6 block wider than the IPv4-carrying prefix
  // (all are /96 or shorter) its base lies in: ::/0 does not open :: through ::/96.
  check(cidr->contains(cidr->base()) || (!cidr->base().isV4() && cidr->prefixLength() < 96));
  const auto again = sp::Cidr::parse(cidr->toString());
  check(again.has_value() && *again == *cidr);
  if (any) {
    check(cidr->contains(*any));
  }
}

std::optional<sp::Endpoint> checkEndpoint(std::string_view input) {
  std::optional<sp::Endpoint> first;
  for (const bool port_required : {true, false}) {
    const auto endpoint = sp::Endpoint::parse(input, port_required, 8080);
    if (!endpoint) {
      continue;
    }
    check(endpoint->port != 0);
    const auto again = sp::Endpoint::parse(endpoint->toString());
    check(again.has_value() && *again == *endpoint);
    check(sp::Endpoint::overlaps(*endpoint, *endpoint));
    if (port_required) {
      // What parses with a port required parses the same way without the requirement.
      const auto relaxed = sp::Endpoint::parse(input, false, 8080);
      check(relaxed.has_value() && *relaxed == *endpoint);
    }
    if (!first) {
      first = endpoint;
    }
  }
  return first;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const auto v4 = sp::IpAddress::parseV4(input);
  const auto v6 = sp::IpAddress::parseV6(input);
  const auto any = sp::IpAddress::parse(input);
  check(!(v4 && v6));
  check(any == (v4 ? v4 : v6));
  check(!v4 || v4->isV4());
  check(!v6 || !v6->isV4());
  if (any) {
    check(size <= sp::IpAddress::kMaxTextLength);
    checkAddress(*any);
  }
  checkAgainstInetPton(input, v4, v6);
  checkCidr(input, any);

  // Two endpoints from the two halves: overlaps() must be symmetric.
  const auto whole = checkEndpoint(input);
  const std::size_t half = size / 2;
  const auto a = checkEndpoint(input.substr(0, half));
  const auto b = checkEndpoint(input.substr(half));
  if (a && b) {
    check(sp::Endpoint::overlaps(*a, *b) == sp::Endpoint::overlaps(*b, *a));
  }
  if (whole && a) {
    check(sp::Endpoint::overlaps(*whole, *a) == sp::Endpoint::overlaps(*a, *whole));
  }

  // Raw bytes as addresses: formatting and classification over shapes text rarely reaches.
  if (size >= 16) {
    std::array<std::uint8_t, 16> raw{};
    std::memcpy(raw.data(), data, 16);
    checkAddress(sp::IpAddress::fromV6(raw));
    std::uint32_t v4_raw = 0;
    std::memcpy(&v4_raw, data, 4);
    checkAddress(sp::IpAddress::fromV4(v4_raw));
  }
  return 0;
}
