#pragma once
// Host names as sluice compares them (docs/policy.md#names). One function canonicalises every name
// that reaches a decision: the CONNECT authority, the SNI, the Host header, the absolute-URI
// authority, and the names written in a policy. Two code paths that normalise differently are
// how smokescreen's trailing-dot/letter-case bypass happened (CVE-2022-24825).
//
// Canonical form: ASCII lower case, one trailing dot removed, LDH labels of 1-63 characters
// (letters, digits, hyphens; no hyphen at either end), at most 253 characters in all. Or an IP
// literal: a canonical dotted quad, or an IPv6 address in brackets. A name whose last label is
// numeric ("2130706433", "0x7f.1", "127.1", "0177.0.0.1") looks like an IPv4 address to some
// library, so it is an address in canonical form or it is refused; it is never a name.

#include <cstdint>
#include <string_view>

#include "base/result.h"
#include "policy/ip_address.h"

namespace sluice::policy {

enum class HostKind : std::uint8_t { Name, Ipv4Literal, Ipv6Literal };

enum class HostError : std::uint8_t {
  Empty,
  TooLong,         // over 253 characters
  EmptyLabel,      // "a..b", ".a", "a.."
  LabelTooLong,    // over 63 characters
  BadCharacter,    // outside [A-Za-z0-9-.], e.g. "_", "%", "@", " ", NUL, ":"
  NonAscii,        // a byte >= 0x80: names arrive as A-labels (punycode) or not at all
  HyphenAtEdge,    // "-a.example", "a-.example"
  NumericNotIpv4,  // last label numeric, but not a canonical dotted quad
  BadIpv6,         // "[...]" that is not an IPv6 address (zone indexes included)
};

std::string_view toString(HostError e);

// A canonical host, stored inline: canonicalising on the request path allocates nothing.
class CanonicalHost {
 public:
  static constexpr std::size_t kMaxLength = 253;

  CanonicalHost() = default;

  HostKind kind() const { return kind_; }
  bool isIpLiteral() const { return kind_ != HostKind::Name; }
  // For literals: the address. Undefined for names.
  const IpAddress& address() const { return address_; }
  // The canonical text: "example.com", "127.0.0.1", "2001:db8::1" (no brackets).
  std::string_view text() const { return {text_, length_}; }
  // The text as it appears in an authority: IPv6 in brackets.
  std::string authorityText() const;
  // The same, appended to `out` (a buffer kept across requests: no temporary string).
  void appendAuthorityText(std::string& out) const;

  friend bool operator==(const CanonicalHost& a, const CanonicalHost& b) {
    return a.kind_ == b.kind_ && a.text() == b.text();
  }

 private:
  friend Result<CanonicalHost, HostError> canonicalizeHost(std::string_view raw);
  char text_[kMaxLength + 1] = {};
  std::uint8_t length_ = 0;
  HostKind kind_ = HostKind::Name;
  IpAddress address_;
};

// `raw` is a name or IPv4 literal, or an IPv6 literal in brackets ("[::1]"). An unbracketed
// IPv6 address is refused (BadCharacter): on the wire it only ever appears bracketed.
Result<CanonicalHost, HostError> canonicalizeHost(std::string_view raw);

}  // namespace sluice::policy
