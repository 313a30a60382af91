#include "policy/address_class.h"

#include <array>
#include <cstddef>

namespace sluice::policy {

namespace {

// ---- IPv4 ---------------------------------------------------------------------------------

struct V4Range {
  std::uint32_t base;
  std::uint32_t mask;
  int length;
  AddressClass address_class;
};

constexpr std::uint32_t v4Mask(int length) {
  return length == 0 ? 0 : ~std::uint32_t{0} << (32 - length);
}

constexpr V4Range v4Row(unsigned a, unsigned b, unsigned c, unsigned d, int length,
                        AddressClass address_class) {
  return {(a << 24) | (b << 16) | (c << 8) | d, v4Mask(length), length, address_class};
}

// The IANA IPv4 Special-Purpose Address Registry, multicast and 240/4, reduced to what a
// sandbox may dial: only globally reachable unicast is Global. Blocks the registry marks partly
// global (192.0.0.9/32 and 192.0.0.10/32 inside 192.0.0.0/24) are refused whole, as
// docs/policy.md#addresses lists 192.0.0/24; an operator opens them with `ips`. First match wins,
// so a block comes before any block that contains it (checked below).
constexpr std::array kV4Ranges{
    v4Row(0, 0, 0, 0, 8, AddressClass::Unspecified),  // "this network"; Linux dials 0.0.0.0 locally
    v4Row(10, 0, 0, 0, 8, AddressClass::Private),
    v4Row(100, 64, 0, 0, 10, AddressClass::Cgnat),  // Alibaba metadata is 100.100.100.200
    v4Row(127, 0, 0, 0, 8, AddressClass::Loopback),
    v4Row(169, 254, 0, 0, 16, AddressClass::LinkLocal),  // cloud metadata 169.254.169.254
    v4Row(172, 16, 0, 0, 12, AddressClass::Private),
    v4Row(192, 0, 0, 0, 24, AddressClass::IetfProtocol),  // Oracle metadata is 192.0.0.192
    v4Row(192, 0, 2, 0, 24, AddressClass::Documentation),
    v4Row(192, 88, 99, 0, 24, AddressClass::Relay6to4),
    v4Row(192, 168, 0, 0, 16, AddressClass::Private),
    v4Row(198, 18, 0, 0, 15, AddressClass::Benchmarking),
    v4Row(198, 51, 100, 0, 24, AddressClass::Documentation),
    v4Row(203, 0, 113, 0, 24, AddressClass::Documentation),
    v4Row(224, 0, 0, 0, 4, AddressClass::Multicast),
    v4Row(255, 255, 255, 255, 32, AddressClass::Broadcast),
    v4Row(240, 0, 0, 0, 4, AddressClass::Reserved),
};

AddressClass classifyV4(std::uint32_t address) {
  for (const V4Range& range : kV4Ranges) {
    if ((address & range.mask) == range.base) {
      return range.address_class;
    }
  }
  return AddressClass::Global;
}

// ---- IPv6 ---------------------------------------------------------------------------------

// A prefix over the 128-bit address as two 64-bit halves, so a row is two mask-and-compares.
struct V6Range {
  std::uint64_t high;
  std::uint64_t low;
  std::uint64_t high_mask;
  std::uint64_t low_mask;
  int length;
  // Embedding::None: the address is `address_class`. Otherwise the block carries an IPv4
  // address at byte `v4_offset`, and that address decides the class.
  AddressClass address_class;
  Embedding embedding;
  std::size_t v4_offset;
};

constexpr std::uint64_t highMask(int length) {
  return length >= 64 ? ~std::uint64_t{0} : length == 0 ? 0 : ~std::uint64_t{0} << (64 - length);
}

constexpr std::uint64_t lowMask(int length) {
  return length <= 64 ? 0 : length == 128 ? ~std::uint64_t{0} : ~std::uint64_t{0} << (128 - length);
}

constexpr V6Range v6Row(const std::array<std::uint16_t, 8>& groups, int length,
                        AddressClass address_class, Embedding embedding = Embedding::None,
                        std::size_t v4_offset = 0) {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  for (std::size_t g = 0; g < 4; ++g) {
    high = (high << 16) | groups[g];
    low = (low << 16) | groups[g + 4];
  }
  return {.high = high,
          .low = low,
          .high_mask = highMask(length),
          .low_mask = lowMask(length),
          .length = length,
          .address_class = address_class,
          .embedding = embedding,
          .v4_offset = v4_offset};
}

// The address_class of an embedding row is unused: the embedded IPv4 address decides.
constexpr AddressClass kByEmbedded = AddressClass::NotGlobalUnicast;

// The IANA IPv6 Special-Purpose Address Registry plus the blocks IPv6 addressing reserves
// (fc00::/7, fe80::/10, fec0::/10, ff00::/8). Anything left over outside 2000::/3 is not global
// unicast (classifyAddress). Blocks in 2001::/23 that the registry marks global (anycast
// 2001:1::1-3, AMT 2001:3::/32, ORCHIDv2 2001:20::/28 ...) are refused with the rest of it:
// none is a web origin, and the operator can open one with `ips`. First match wins.
constexpr std::array kV6Ranges{
    v6Row({0, 0, 0, 0, 0, 0, 0, 0}, 128, AddressClass::Unspecified),
    v6Row({0, 0, 0, 0, 0, 0, 0, 1}, 128, AddressClass::Loopback),
    // :: and ::1 are matched above, so they keep their own classes rather than reading as the
    // compatible forms of 0.0.0.0 and 0.0.0.1.
    v6Row({0, 0, 0, 0, 0, 0xffff, 0, 0}, 96, kByEmbedded, Embedding::Mapped, 12),
    v6Row({0, 0, 0, 0, 0, 0, 0, 0}, 96, kByEmbedded, Embedding::Compatible, 12),
    v6Row({0x64, 0xff9b, 0, 0, 0, 0, 0, 0}, 96, kByEmbedded, Embedding::Nat64, 12),
    // Local-use NAT64 (RFC 8215): where the IPv4 address sits is the operator's choice, so the
    // block cannot be classified by what it carries.
    v6Row({0x64, 0xff9b, 1, 0, 0, 0, 0, 0}, 48, AddressClass::Nat64Local),
    v6Row({0x100, 0, 0, 0, 0, 0, 0, 0}, 64, AddressClass::Discard),
    // Teredo carries an obfuscated client IPv4 and a server IPv4; neither says where a
    // packet ends up, so the block is refused whole.
    v6Row({0x2001, 0, 0, 0, 0, 0, 0, 0}, 32, AddressClass::Teredo),
    v6Row({0x2001, 2, 0, 0, 0, 0, 0, 0}, 48, AddressClass::Benchmarking),
    v6Row({0x2001, 0, 0, 0, 0, 0, 0, 0}, 23, AddressClass::IetfProtocol),
    v6Row({0x2001, 0xdb8, 0, 0, 0, 0, 0, 0}, 32, AddressClass::Documentation),
    // 6to4: 2002:aabb:ccdd::/48 is the site behind IPv4 aa.bb.cc.dd (bits 16..47).
    v6Row({0x2002, 0, 0, 0, 0, 0, 0, 0}, 16, kByEmbedded, Embedding::SixToFour, 2),
    v6Row({0x3fff, 0, 0, 0, 0, 0, 0, 0}, 20, AddressClass::Documentation),
    v6Row({0x5f00, 0, 0, 0, 0, 0, 0, 0}, 16, AddressClass::Srv6),
    v6Row({0xfc00, 0, 0, 0, 0, 0, 0, 0}, 7, AddressClass::UniqueLocal),
    v6Row({0xfe80, 0, 0, 0, 0, 0, 0, 0}, 10, AddressClass::LinkLocal),
    v6Row({0xfec0, 0, 0, 0, 0, 0, 0, 0}, 10, AddressClass::SiteLocal),
    v6Row({0xff00, 0, 0, 0, 0, 0, 0, 0}, 8, AddressClass::Multicast),
};

// ---- table checks, at compile time --------------------------------------------------------

template <class Range, std::size_t N, class Contains>
constexpr bool everyRowReachable(const std::array<Range, N>& rows, Contains contains) {
  // A row inside an earlier row would never match: the order would be wrong.
  for (std::size_t later = 0; later < N; ++later) {
    for (std::size_t earlier = 0; earlier < later; ++earlier) {
      if (contains(rows[earlier], rows[later])) {
        return false;
      }
    }
  }
  return true;
}

constexpr bool v4Contains(const V4Range& outer, const V4Range& inner) {
  return outer.length <= inner.length && (inner.base & v4Mask(outer.length)) == outer.base;
}

constexpr bool v6Contains(const V6Range& outer, const V6Range& inner) {
  return outer.length <= inner.length && (inner.high & highMask(outer.length)) == outer.high &&
         (inner.low & lowMask(outer.length)) == outer.low;
}

template <class Range, std::size_t N, class Contains>
constexpr bool noHostBits(const std::array<Range, N>& rows, Contains contains) {
  // A row equals its own network exactly when it contains itself with its mask applied.
  for (const Range& row : rows) {
    if (!contains(row, row)) {
      return false;
    }
  }
  return true;
}

static_assert(everyRowReachable(kV4Ranges, v4Contains), "IPv4 table out of order");
static_assert(everyRowReachable(kV6Ranges, v6Contains), "IPv6 table out of order");
static_assert(noHostBits(kV4Ranges, v4Contains), "IPv4 row with host bits set");
static_assert(noHostBits(kV6Ranges, v6Contains), "IPv6 row with host bits set");

std::uint64_t loadBigEndian64(const std::uint8_t* p) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value = (value << 8) | p[i];
  }
  return value;
}

std::uint32_t loadBigEndian32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

}  // namespace

AddressClassification classifyAddress(const IpAddress& address) {
  if (address.isV4()) {
    return {classifyV4(address.v4()), Embedding::None};
  }
  const std::uint8_t* bytes = address.bytes().data();
  const std::uint64_t high = loadBigEndian64(bytes);
  const std::uint64_t low = loadBigEndian64(bytes + 8);
  for (const V6Range& range : kV6Ranges) {
    if ((high & range.high_mask) != range.high || (low & range.low_mask) != range.low) {
      continue;
    }
    if (range.embedding == Embedding::None) {
      return {range.address_class, Embedding::None};
    }
    return {classifyV4(loadBigEndian32(bytes + range.v4_offset)), range.embedding};
  }
  // 2000::/3 is the only block IANA allocates for global unicast.
  if ((bytes[0] & 0xe0) != 0x20) {
    return {AddressClass::NotGlobalUnicast, Embedding::None};
  }
  return {AddressClass::Global, Embedding::None};
}

std::string_view toString(AddressClass c) {
  // A switch, not a table, so that -Wswitch flags a class added without a name.
  switch (c) {
    case AddressClass::Global:
      return "global";
    case AddressClass::Unspecified:
      return "unspecified";
    case AddressClass::Loopback:
      return "loopback";
    case AddressClass::Private:
      return "private";
    case AddressClass::Cgnat:
      return "cgnat";
    case AddressClass::LinkLocal:
      return "link_local";
    case AddressClass::IetfProtocol:
      return "ietf_protocol";
    case AddressClass::Documentation:
      return "documentation";
    case AddressClass::Benchmarking:
      return "benchmarking";
    case AddressClass::Relay6to4:
      return "relay_6to4";
    case AddressClass::Multicast:
      return "multicast";
    case AddressClass::Reserved:
      return "reserved";
    case AddressClass::Broadcast:
      return "broadcast";
    case AddressClass::UniqueLocal:
      return "unique_local";
    case AddressClass::SiteLocal:
      return "site_local";
    case AddressClass::Discard:
      return "discard";
    case AddressClass::Teredo:
      return "teredo";
    case AddressClass::Nat64Local:
      return "nat64_local";
    case AddressClass::Srv6:
      return "srv6";
    case AddressClass::NotGlobalUnicast:
      return "not_global_unicast";
  }
  return "unknown";  // only for a value outside the enum, e.g. a corrupted byte
}

std::string_view toString(Embedding e) {
  switch (e) {
    case Embedding::None:
      return "none";
    case Embedding::Mapped:
      return "mapped";
    case Embedding::Compatible:
      return "compatible";
    case Embedding::Nat64:
      return "nat64";
    case Embedding::SixToFour:
      return "6to4";
  }
  return "unknown";
}

}  // namespace sluice::policy
