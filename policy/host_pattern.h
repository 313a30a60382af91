#pragma once
// The entries of a rule's `hosts` (docs/policy.md#host-patterns): "example.com" matches only
// itself; "*.example.com" matches one or more labels under example.com, never example.com itself;
// an IP literal matches only that address. Matching is on canonical hosts, label-wise, never by
// string suffix ("evilexample.com" is not under "example.com").

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "policy/host_name.h"

namespace sluice::policy {

class HostPattern {
 public:
  enum class Kind : std::uint8_t { Exact, Wildcard, Address };

  // Refused, with a message: anything canonicalizeHost() refuses; "*" anywhere but as the whole
  // first label ("*", "a.*.com", "*foo.com", "foo*.com"); a wildcard over a single label
  // ("*.com") or over a public or multi-tenant suffix ("*.co.uk", "*.github.io"), where anyone
  // can register a name. IPv6 literals may be written with or without brackets.
  static Result<HostPattern, std::string> parse(std::string_view text);

  Kind kind() const { return kind_; }
  // Exact: the name. Wildcard: the base under which names match ("example.com"). Address: the
  // canonical address text.
  const std::string& base() const { return base_; }
  // As the operator would write it, canonicalised: "*.example.com", "10.0.0.1", "2001:db8::1".
  std::string text() const;
  const IpAddress& address() const { return address_; }

  bool matches(const CanonicalHost& host) const;

 private:
  Kind kind_ = Kind::Exact;
  std::string base_;
  IpAddress address_;
};

// Whether `name` is a suffix under which the public registers names (ICANN suffixes of more
// than one label such as "co.uk", and multi-tenant hosting domains such as "github.io"). The
// list is curated, not the full Public Suffix List: Debian 12 ships no PSL library for C++
// that the project depends on. Single-label names are treated as public by the caller.
bool isPublicSuffix(std::string_view name);

}  // namespace sluice::policy
