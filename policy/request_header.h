#pragma once
// Which request header fields may reach the origin as the sandbox sent them. One table, read by
// the head writer (proxy/http/), which drops every field that is not EndToEnd, and by the config
// loader, which refuses a rule that would inject one: a name sluice removes from the sandbox's
// requests is a name no one else may put back either.
//
// What a request is, is its Host and target as the policy checked them. The fields dropped here are
// those that make an origin, a framework or a CDN in front of it read the request otherwise: as for
// another host, path, scheme, port or method, from another client, or as the origin's own internal
// traffic (docs/wire.md#headers-the-origin-never-gets-from-the-sandbox lists them, each group with
// why). Names compare ASCII case-insensitively with '_' taken for '-': CGI, WSGI and Rack turn both
// into the same variable (X_Forwarded_Host becomes HTTP_X_FORWARDED_HOST).

#include <cstdint>
#include <string_view>

namespace sluice::policy {

enum class RequestHeaderClass : std::uint8_t {
  EndToEnd,        // forwarded as sent
  Framing,         // Host, Content-Length: sluice writes them from what it checked and parsed
  HopByHop,        // Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade, ...
  ProxyControl,    // Proxy-* (and Proxy itself): addressed to a proxy, never to the origin
  HostClaim,       // another host: Forwarded, X-Forwarded-Host, X-Host, ...
  PathClaim,       // another path: X-Original-URL, X-Rewrite-URL, X-Forwarded-Prefix, ...
  SchemeClaim,     // another scheme or port: X-Forwarded-Proto, X-Forwarded-Port, ...
  MethodClaim,     // another method: X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override
  ClientClaim,     // another client address: X-Forwarded-For, X-Real-IP, True-Client-IP, ...
  InternalClaim,   // the origin's own internal traffic: X-Envoy-*, X-Middleware-Subrequest
  ForwardedClaim,  // any other X-Forwarded-* or X-Original-*: what a front proxy saw
};

// The class of a request header field called `name`. Constant time for a name of any length (a
// few comparisons of at most the longest listed name), no allocation.
RequestHeaderClass classifyRequestHeader(std::string_view name);

// Whether the origin may receive the field as the sandbox sent it.
inline bool isEndToEndRequestHeader(std::string_view name) {
  return classifyRequestHeader(name) == RequestHeaderClass::EndToEnd;
}

// Whether a field of the sandbox's request trailers may reach the origin: an end-to-end field
// (above) that RFC 9110 section 6.5.1 does not keep out of a trailer section: no framing or
// routing, no request modifier (Cache-Control, Expect, Max-Forwards, Pragma, Range, If-*), no
// authentication (Authorization, Cookie), nothing that says how to process the content
// (Content-*). Some origins merge trailers into the head they hand an application: a trailer
// must not make a request read otherwise than the head the policy checked
// (docs/wire.md#request-trailers).
bool isForwardableRequestTrailer(std::string_view name);

// Whether two header names are the same field as the table reads names: ASCII
// case-insensitively, with '_' taken for '-'.
bool sameRequestHeaderName(std::string_view a, std::string_view b);

std::string_view toString(RequestHeaderClass c);

}  // namespace sluice::policy
