#pragma once
// The names of policy/request_header.h's table, written out again on their own (a name missing
// from the table must fail a test), with near-misses that must still be forwarded. Shared by
// the classifier's test and the head writer's; included by one file per test executable.
#include <string_view>

#include "policy/request_header.h"

namespace sluice::policy::request_header_cases {

using C = RequestHeaderClass;

struct Row {
  std::string_view name;
  C cls;
};

inline const Row kFamily[] = {
    {"Host", C::Framing},
    {"Content-Length", C::Framing},

    {"Connection", C::HopByHop},
    {"Keep-Alive", C::HopByHop},
    {"TE", C::HopByHop},
    {"Trailer", C::HopByHop},
    {"Transfer-Encoding", C::HopByHop},
    {"Upgrade", C::HopByHop},
    {"HTTP2-Settings", C::HopByHop},
    {"Proxy-Connection", C::HopByHop},
    {"Proxy-Authorization", C::HopByHop},
    {"Proxy-Authenticate", C::HopByHop},

    {"Proxy", C::ProxyControl},
    {"Proxy-Foo", C::ProxyControl},
    {"Proxy-Host", C::ProxyControl},
    {"Proxy-Url", C::ProxyControl},
    {"Proxy-Status", C::ProxyControl},
    {"Proxy-", C::ProxyControl},

    {"Forwarded", C::HostClaim},
    {"X-Forwarded-Host", C::HostClaim},
    {"X-Forwarded-Server", C::HostClaim},
    {"X-Host", C::HostClaim},
    {"X-HTTP-Host-Override", C::HostClaim},
    {"X-Original-Host", C::HostClaim},

    {"X-Original-URL", C::PathClaim},
    {"X-Original-URI", C::PathClaim},
    {"X-Rewrite-URL", C::PathClaim},
    {"X-Forwarded-Prefix", C::PathClaim},
    {"X-Forwarded-Path", C::PathClaim},
    {"X-Forwarded-Uri", C::PathClaim},
    {"X-Original-Prefix", C::PathClaim},
    {"X-Replaced-Path", C::PathClaim},
    {"X-Envoy-Original-Path", C::PathClaim},

    {"X-Forwarded-Proto", C::SchemeClaim},
    {"X-Forwarded-Protocol", C::SchemeClaim},
    {"X-Forwarded-Scheme", C::SchemeClaim},
    {"X-Forwarded-Ssl", C::SchemeClaim},
    {"X-Forwarded-Port", C::SchemeClaim},
    {"X-Original-Proto", C::SchemeClaim},
    {"X-Url-Scheme", C::SchemeClaim},
    {"X-Scheme", C::SchemeClaim},
    {"Front-End-Https", C::SchemeClaim},
    {"X-ARR-SSL", C::SchemeClaim},
    {"CloudFront-Forwarded-Proto", C::SchemeClaim},
    {"CF-Visitor", C::SchemeClaim},
    {"Fastly-SSL", C::SchemeClaim},

    {"X-HTTP-Method-Override", C::MethodClaim},
    {"X-HTTP-Method", C::MethodClaim},
    {"X-Method-Override", C::MethodClaim},
    {"X-Original-Method", C::MethodClaim},
    {"X-Forwarded-Method", C::MethodClaim},

    {"X-Forwarded-For", C::ClientClaim},
    {"X-Forwarded", C::ClientClaim},
    {"Forwarded-For", C::ClientClaim},
    {"X-Original-For", C::ClientClaim},
    {"X-Original-Forwarded-For", C::ClientClaim},
    {"X-Real-IP", C::ClientClaim},
    {"X-Client-IP", C::ClientClaim},
    {"Client-IP", C::ClientClaim},
    {"True-Client-IP", C::ClientClaim},
    {"CF-Connecting-IP", C::ClientClaim},
    {"CF-Connecting-IPv6", C::ClientClaim},
    {"Fastly-Client-IP", C::ClientClaim},
    {"X-Cluster-Client-IP", C::ClientClaim},
    {"X-Originating-IP", C::ClientClaim},
    {"X-Remote-IP", C::ClientClaim},
    {"X-Remote-Addr", C::ClientClaim},
    {"X-ProxyUser-Ip", C::ClientClaim},
    {"CloudFront-Viewer-Address", C::ClientClaim},

    {"X-Middleware-Subrequest", C::InternalClaim},
    {"X-Envoy-Internal", C::InternalClaim},
    {"X-Envoy-Retry-On", C::InternalClaim},
    {"X-Envoy-", C::InternalClaim},

    // The rest of the X-Forwarded-* and X-Original-* families, listed or not.
    {"X-Forwarded-Hostname", C::ForwardedClaim},
    {"X-Forwarded-By", C::ForwardedClaim},
    {"X-Forwarded-Client-Cert", C::ForwardedClaim},
    {"X-Forwarded-For-Original", C::ForwardedClaim},
    {"X-Forwarded-Aws-Elb", C::ForwardedClaim},
    {"X-Original-Remote-Addr", C::ForwardedClaim},
    {"X-Forwarded-", C::ForwardedClaim},
};

inline const std::string_view kNearMisses[] = {
    "Authorization",
    "Cookie",
    "User-Agent",
    "Accept",
    "Content-Type",
    "X-Api-Key",
    "X-Request-Id",
    "Hosts",
    "Host-Name",
    "X-Hostname",
    "X-Host-Id",
    "XForwarded-Host",
    "X-Forward-Host",
    "X-ForwardedHost",
    "X-Forwardedfor",
    "X-Original",
    "X-Originals",
    "X-Envoy",
    "Forwarded-Host",
    "Forwardedx",
    "Proxyx-Foo",
    "X-Proxy-Url",
    "Reproxy-Foo",
    "Proxy2",
    "X-HTTP-Method-Overrides",
    "X-Method",
    "X-Real-IPs",
    "Content-Location",
    "Trailers",
    "TE2",
    "Front-End",
    "CF-Access-Client-Id",
    "CF-Ray",
    "X-Amzn-Trace-Id",
    "Sec-WebSocket-Key",
    "Origin",
    "Referer",
    "Content_Lengthx",
    "Hostx",
    "-",
    "_",
    "x",
};

}  // namespace sluice::policy::request_header_cases
