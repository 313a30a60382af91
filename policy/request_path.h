#pragma once
// Request targets and the `paths` prefixes of a rule (docs/policy.md#paths). Paths are compared as
// the origin will see them, and a path that origins could read in more than one way cannot match a
// prefix: "/simple/../admin", "/simple/%2e%2e/admin", "/simple/..%2fadmin", "/simple/..;/admin"
// and "/simple//x" are refused by a rule that lists paths, since one server removes the dot
// segment, another decodes %2F first, a third merges slashes or drops ";params".

#include <cstdint>
#include <string_view>

namespace sluice::policy {

enum class PathShape : std::uint8_t {
  Plain,      // may be matched against prefixes
  Ambiguous,  // valid HTTP, but dot segments, empty segments, encoded '/' or '\', %00, or ';'
              // parameters on a dot segment: matches no prefix
  Invalid,    // not an origin-form target: no leading '/', bytes outside RFC 3986, a bad
              // %-escape, a '#'. The request is refused as bad_request.
};

// `target` is a request target in origin form, "/path?query", or "*" (OPTIONS). The query is
// not examined beyond its bytes.
PathShape checkRequestTarget(std::string_view target);

// Prefix semantics are segment-wise: "/simple/" matches "/simple/" and "/simple/x";
// "/simple" matches "/simple", "/simple/" and "/simple/x" but not "/simplex". Escapes of
// unreserved characters in the target are decoded before comparing ("/%73imple/" is
// "/simple/"). Only call with a Plain target; the query is ignored.
bool pathHasPrefix(std::string_view target, std::string_view prefix);

// A prefix as written in a policy: starts with '/', Plain, no query, no escapes.
bool isValidPathPrefix(std::string_view prefix);

}  // namespace sluice::policy
