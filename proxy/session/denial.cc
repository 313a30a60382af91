#include "proxy/session/denial.h"

namespace sluice::proxy::session {

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

std::string denialPhrase(int status, policy::Reason reason) {
  std::string phrase(reasonPhrase(status));
  phrase += " by sluice: ";
  phrase += policy::reasonInfo(reason).token;
  return phrase;
}

std::string explainDenial(policy::Reason reason, std::string_view sandbox, std::string_view host,
                          std::string_view method, std::string_view target) {
  std::string h(host);
  std::string s(sandbox);
  switch (reason) {
    case policy::Reason::NotAllowedHost:
      return h + " is not in the policy of sandbox " + s;
    case policy::Reason::NotAllowedPort:
      return "this port is not allowed for " + h;
    case policy::Reason::NotAllowedScheme:
      return "this scheme is not allowed for " + h;
    case policy::Reason::NotAllowedMethod:
      return std::string(method) + " is not allowed for " + h;
    case policy::Reason::NotAllowedPath:
      return std::string(target) + " is not allowed for " + h;
    case policy::Reason::BadHost:
      return "not a valid host name: " + h;
    case policy::Reason::IpLiteral:
      return "IP addresses are not allowed as targets; use the host name";
    case policy::Reason::IpDenied:
      return h + " resolves only to addresses sluice does not connect to";
    case policy::Reason::SniMissing:
      return "the TLS ClientHello named no server";
    case policy::Reason::SniMismatch:
      return "the TLS server name is not " + h;
    case policy::Reason::HostMissing:
      return "the request has no Host header";
    case policy::Reason::HostDuplicate:
      return "the request has more than one Host header";
    case policy::Reason::HostMismatch:
      return "the Host header does not name " + h;
    case policy::Reason::DnsFailed:
      return "could not resolve " + h;
    default:
      return h;
  }
}

std::string denialBody(policy::Reason reason, std::string_view detail) {
  std::string body = "sluice: ";
  body += policy::reasonInfo(reason).token;
  if (!detail.empty()) {
    body += ": ";
    for (char c : detail) {
      unsigned char u = static_cast<unsigned char>(c);
      body += (u < 0x20 || u >= 0x7f) ? '?' : c;
    }
  }
  body += '\n';
  return body;
}

std::string proxyStatusValue(policy::Reason reason) {
  const policy::ReasonInfo& info = policy::reasonInfo(reason);
  std::string value = "sluice; error=";
  value += info.proxy_status;
  value += "; details=\"";
  value += info.token;  // a token: nothing to escape in an sf-string
  value += '"';
  return value;
}

void appendDenial(std::string& out, policy::Reason reason, std::string_view detail) {
  const policy::ReasonInfo& info = policy::reasonInfo(reason);
  int status = info.http_status != 0 ? info.http_status : 400;
  const std::string body = denialBody(reason, detail);
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += denialPhrase(status, reason);
  out += "\r\nSluice-Reason: ";
  out += info.token;
  out += "\r\nProxy-Status: ";
  out += proxyStatusValue(reason);
  out += "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
  out += body;
}

}  // namespace sluice::proxy::session
