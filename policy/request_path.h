#pragma once
// Request targets and the `paths` prefixes of a rule. Paths are compared as the origin will see
// them, and a path that origins could read in more than one way cannot match a prefix:
// "/simple/../admin", "/simple/%2e%2e/admin", "/simple/..%2fadmin", "/simple/..;/admin",
// "/simple//x" and "/simple/%252e%252e/admin" are refused by a rule that lists paths, since one
// server removes the dot segment, another decodes %2F first, a third merges slashes or drops
// ";params", a fourth decodes twice. The one ambiguity a prefix can accept is an encoded '/'
// it spells out itself ("/@myorg%2f", for npm's scoped packages: docs/policy.md#paths).

#include <cstdint>
#include <string_view>

namespace sluice::policy {

enum class PathShape : std::uint8_t {
  Plain,      // may be matched against prefixes
  Ambiguous,  // valid HTTP, but with one of the PathAmbiguity kinds below: matches no prefix
  Invalid,    // not an origin-form target: no leading '/', bytes outside RFC 3986, a bad
              // %-escape, a '#'. The request is refused as bad_request.
};

// The ways a valid path can read otherwise at the origin, one bit each, so that a matcher can
// tell them apart: a prefix may accept an encoded '/' where it spells one out, as npm's
// "/@scope%2fname" needs, and every other kind still matches nothing.
enum PathAmbiguity : std::uint8_t {
  kDotSegment = 1 << 0,        // ".", "..", escaped or not, also with ";params" ("..;"), also
                               // between encoded slashes ("..%2f")
  kEmptySegment = 1 << 1,      // "//" or "/%2f": some servers merge slashes, some do not
  kEncodedSlash = 1 << 2,      // %2F: a separator to a server that decodes before routing
  kEncodedBackslash = 1 << 3,  // %5C: a separator on Windows servers
  kEncodedNul = 1 << 4,        // %00: ends the path for C code
  kDoubleEncoded = 1 << 5,     // reads otherwise after one more decoding: "%252e" is "%2e"
};

struct TargetCheck {
  PathShape shape = PathShape::Invalid;
  std::uint8_t ambiguities = 0;  // PathAmbiguity bits; non-zero exactly when Ambiguous

  bool has(PathAmbiguity kind) const { return (ambiguities & kind) != 0; }
};

// `target` is a request target in origin form, "/path?query", or "*" (OPTIONS). The query is
// not examined beyond its bytes: it is not matched, so how an origin decodes it changes nothing
// a rule decided.
//
// Double encoding: after the escapes of unreserved characters are decoded (as for matching), a
// '%' that came from "%25" and is followed by two hex digits ("%252e", "%25%32%65", any case)
// or by 'u' and four hex digits (IIS's "%u002e") is kDoubleEncoded: an origin or framework that
// decodes twice reads another path than the one checked ("/v1/public/%252e%252e/admin" becomes
// "/v1/public/../admin"). A "%25" followed by anything else ("/100%25off") reads the same
// however often it is decoded and is Plain. A '%' not followed by two hex digits is Invalid.
TargetCheck examineRequestTarget(std::string_view target);
PathShape checkRequestTarget(std::string_view target);

// Prefix semantics are segment-wise: "/simple/" matches "/simple/" and "/simple/x";
// "/simple" matches "/simple", "/simple/" and "/simple/x" but not "/simplex". Escapes of
// unreserved characters in the target are decoded before comparing ("/%73imple/" is
// "/simple/"). A "%2f" in the prefix (either case) matches an encoded '/' and nothing else,
// and the target may hold no encoded '/' the prefix does not spell out: "/@myorg%2f" matches
// "/@myorg%2fpkg" but not "/@myorg/pkg" nor "/@myorg%2fpkg%2fx". Only call with a valid target
// whose only ambiguity, if any, is kEncodedSlash; the query is ignored.
bool pathHasPrefix(std::string_view target, std::string_view prefix);

// A prefix as written in a policy: starts with '/', no query, no escape but "%2f" (either
// case), and no ambiguity but those encoded slashes (no dot or empty segment, read either way).
bool isValidPathPrefix(std::string_view prefix);

}  // namespace sluice::policy
