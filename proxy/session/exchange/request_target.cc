#include "proxy/session/exchange/request_target.h"

#include <string>

#include "policy/authority.h"
#include "proxy/http/header_block.h"

namespace sluice::proxy::session {

std::optional<TargetRefusal> targetOf(const ConnectionFacts& connection,
                                      const http::RequestHead& head, RequestRecord& record) {
  switch (connection.route) {
    case Route::Tunnel:
      record.scheme = policy::Scheme::Https;
      record.target_host = connection.host;
      record.port = connection.port;
      // Into the record's own buffer, whose capacity outlives the request: no temporaries.
      record.url.assign("https://")
          .append(connection.authority)
          .append(urlPath(record.origin_target));
      // Inside the tunnel an absolute-form target may only name the tunnel's own https origin
      // (docs/wire.md#explicit-proxy); decide() checks its authority against H like the Host
      // header.
      if (head.absolute_form && !http::ascii::iequals(head.uri_scheme, "https")) {
        return TargetRefusal{policy::Reason::BadRequest,
                             "absolute-form target of another scheme inside TLS"};
      }
      return std::nullopt;
    case Route::Plain: {
      // Transparent plain HTTP: H is the Host, the port the one the sandbox dialled. The address
      // it dialled is never used (docs/wire.md#transparent-mode): sluice resolves the Host
      // itself.
      record.scheme = policy::Scheme::Http;
      record.port = connection.orig_dst ? connection.orig_dst->port : 80;
      record.url.assign("http://").append(head.host).append(urlPath(record.origin_target));
      if (head.host_count == 0) {
        return TargetRefusal{policy::Reason::HostMissing, "the request has no Host header"};
      }
      if (head.host_count > 1) {
        return TargetRefusal{policy::Reason::HostDuplicate,
                             "the request has more than one Host header"};
      }
      if (head.absolute_form && !http::ascii::iequals(head.uri_scheme, "http")) {
        return TargetRefusal{policy::Reason::BadRequest, "absolute-form target of another scheme"};
      }
      auto authority = policy::parseAuthority(head.host, policy::PortRule::Optional);
      record.target_host.assign(authority ? authority->host : head.host);
      return std::nullopt;
    }
    case Route::Forward:
    case Route::Undecided:
      break;
  }
  record.url.assign(head.target);
  if (!head.absolute_form) {
    return TargetRefusal{policy::Reason::BadRequest, "a request to a proxy needs an absolute URL"};
  }
  if (http::ascii::iequals(head.uri_scheme, "https")) {
    return TargetRefusal{policy::Reason::BadRequest, "https URLs go through CONNECT"};
  }
  if (!http::ascii::iequals(head.uri_scheme, "http")) {
    return TargetRefusal{policy::Reason::NotAllowedScheme, head.uri_scheme};
  }
  auto authority = policy::parseAuthority(head.uri_authority, policy::PortRule::Optional);
  if (!authority) {
    return TargetRefusal{policy::Reason::BadRequest, policy::toString(authority.error())};
  }
  record.scheme = policy::Scheme::Http;
  record.target_host.assign(authority->host);
  record.port = authority->port.value_or(80);
  return std::nullopt;
}

void recordRefusedHead(const http::RequestParser::PartialHead& seen,
                       const ConnectionFacts& connection, bool first_head, RequestRecord& record,
                       audit::Mode& mode) {
  if (!seen.method.empty()) {
    record.method.assign(seen.method);
  }
  if (!seen.host.empty()) {
    record.host_header.emplace(seen.host);
  }
  bool origin_form = seen.target.starts_with('/');
  if (connection.route == Route::Tunnel) {
    record.url = "https://" + connection.authority + (origin_form ? std::string(seen.target) : "");
  } else if (first_head || connection.mode == audit::Mode::Forward) {
    if (seen.method == "CONNECT") {
      mode = audit::Mode::Connect;
      record.url = "https://" + std::string(seen.target);
    } else if (seen.target.find("://") != std::string_view::npos) {
      mode = audit::Mode::Forward;
      record.url.assign(seen.target);
    }
  } else if (connection.mode == audit::Mode::Transparent) {
    record.url = "http://" + std::string(seen.host) + (origin_form ? std::string(seen.target) : "");
  }
}

}  // namespace sluice::proxy::session
