#pragma once
// Authorities ("host:port") as they arrive in CONNECT targets, Host headers and absolute URIs,
// and the URLs `sluice explain` takes. Syntax here; the host is canonicalised by
// canonicalizeHost() when it is compared, as sameAuthority() compares two of them.

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/result.h"

namespace sluice::policy {

// A port as RFC 3986 writes it and nothing else: 1-5 ASCII digits, no sign, no leading zero,
// 1-65535. `0443`, `+443`, `0x1bb`, `https`, `443 `, `65979` are all refused, so the number
// compared with the policy is the number dialled (glibc truncates 65979 to 443).
std::optional<std::uint16_t> parsePort(std::string_view text);

enum class AuthorityError : std::uint8_t {
  Empty,
  MissingPort,  // CONNECT needs host:port
  BadPort,
  UserInfo,     // "user@host": never valid in a target sluice checks
  BadBrackets,  // "[::1", "::1]", "[::1]x", and "::1:443" (IPv6 must be bracketed)
};

std::string_view toString(AuthorityError e);

struct Authority {
  std::string_view host;  // as written; an IPv6 literal keeps its brackets
  std::optional<std::uint16_t> port;
};

enum class PortRule : std::uint8_t { Required, Optional };

Result<Authority, AuthorityError> parseAuthority(std::string_view text, PortRule rule);

// Whether two authorities name the same place: hosts equal once canonicalised
// (docs/policy.md#names: letter case, one trailing dot, the spelling of an IPv6 literal) and
// ports equal once an absent one is `default_port`, the scheme's (RFC 9110 §4.2.2: 443 for
// https). An authority that does not parse, or whose host does not canonicalise, names nothing,
// and so is the same as none, not even its own copy: a comparison of what cannot be read fails
// safe.
bool sameAuthority(std::string_view a, std::string_view b, std::uint16_t default_port);

enum class UrlScheme : std::uint8_t { Https, Http, Other };

// An absolute URL, "https://host[:port]/path?query". Used by `sluice explain` and for
// absolute-form request targets. The scheme is compared case-insensitively; a scheme other
// than http and https parses as `Other` (the caller refuses it); a fragment, a missing "//" or
// a bad authority is an error.
struct Url {
  UrlScheme scheme = UrlScheme::Https;
  std::string_view scheme_text;  // as written
  Authority authority;
  std::uint16_t port = 0;        // explicit, or 443/80 for https/http; 0 for Other without one
  // "/path?query"; "/" when the URL has neither path nor query. A URL with a query but no path
  // ("http://h?q") leaves "?q": the request line for it is "/?q", which the caller writes.
  std::string_view target;
};

enum class UrlError : std::uint8_t { NotAbsolute, BadAuthority, Fragment };

std::string_view toString(UrlError e);

Result<Url, UrlError> parseAbsoluteUrl(std::string_view text);

}  // namespace sluice::policy
