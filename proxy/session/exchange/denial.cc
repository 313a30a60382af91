#include "proxy/session/exchange/denial.h"

#include <spdlog/spdlog.h>

#include "proxy/http/status_phrase.h"

namespace sluice::proxy::session {

std::string_view reasonPhrase(int status) {
  const std::string_view phrase = http::statusPhrase(status);
  return phrase.empty() ? "Error" : phrase;
}

std::string denialPhrase(int status, policy::Reason reason) {
  std::string phrase(reasonPhrase(status));
  phrase += " by sluice: ";
  phrase += policy::reasonInfo(reason).token;
  return phrase;
}

std::string explainDenial(policy::Reason reason, const DeniedRequest& request) {
  std::string h(request.host);
  // What was asked, and the one key of a rule that would allow it.
  auto wouldNeed = [&](std::string_view asked, std::string_view key, std::string_view value,
                       std::string_view tail = {}) {
    std::string text(asked);
    text.append(" is not allowed for ").append(h).append(" in sandbox ").append(request.sandbox);
    text.append("; a rule would need ").append(key).append(": [").append(value).append("]");
    return text.append(tail);
  };
  switch (reason) {
    case policy::Reason::NotAllowedHost:
      return h + " is not in the policy of sandbox " + std::string(request.sandbox) +
             "; a rule would need hosts: [" + h + "]";
    case policy::Reason::NotAllowedPort: {
      const std::string port = std::to_string(request.port);
      return wouldNeed("port " + port, "ports", port);
    }
    case policy::Reason::NotAllowedScheme:
      return wouldNeed(policy::toString(request.scheme), "schemes",
                       policy::toString(request.scheme));
    case policy::Reason::NotAllowedMethod:
      return wouldNeed(request.method, "methods", request.method);
    case policy::Reason::NotAllowedPath:
      // A rule's paths are prefixes of the path, never of the query.
      return wouldNeed(request.target, "paths",
                       request.target.substr(0, request.target.find('?')), " or a prefix of it");
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
    case policy::Reason::UpgradeNotAllowed:
      // The rule that allows the request lacks the key (docs/wire.md#websocket): say which.
      return "a WebSocket to " + h + " needs a rule with websocket: true";
    default:
      return h;
  }
}

void listDeniedAddresses(const policy::Sandbox& sandbox, const policy::Rule* rule,
                         std::span<const policy::IpAddress> addresses, std::uint16_t port,
                         std::vector<audit::DeniedAddress>& out) {
  out.clear();
  for (std::size_t i = 0; i < addresses.size() && i < policy::kMaxAddresses; ++i) {
    policy::AddressRefusal why = policy::addressRefusal(sandbox, rule, addresses[i], port);
    if (why != policy::AddressRefusal::None) {
      out.push_back({addresses[i], why});
    }
  }
}

std::string explainIpDenied(std::string_view host, std::span<const audit::DeniedAddress> denied,
                            const policy::Rule* rule) {
  // Enough to see what the resolver answered; a long answer is the same few classes again.
  constexpr std::size_t kShown = 4;
  std::string text(host);
  text += " resolves only to addresses sluice does not connect to";
  for (std::size_t i = 0; i < denied.size() && i < kShown; ++i) {
    text += i == 0 ? ": " : ", ";
    text += denied[i].ip.toString();
    text += " (";
    text += policy::addressClassText(denied[i].ip);
    switch (denied[i].why) {
      case policy::AddressRefusal::SluiceListener:
        text += ", sluice's own listener";
        break;
      case policy::AddressRefusal::OutsideRuleIps:
        text += ", outside the ips of rule ";
        text += rule != nullptr ? std::string_view(rule->name) : std::string_view("?");
        break;
      case policy::AddressRefusal::NotGlobal:
        text += ", not globally reachable";
        break;
      case policy::AddressRefusal::None:
        break;
    }
    text += ')';
  }
  if (denied.size() > kShown) {
    text += " and " + std::to_string(denied.size() - kShown) + " more";
  }
  return text;
}

namespace {

// `text` for a log line: printable ASCII as it is, anything else '?', at most `cap` bytes (then
// "...").
void appendPrintable(std::string& out, std::string_view text, std::size_t cap) {
  for (std::size_t i = 0; i < text.size() && i < cap; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  if (text.size() > cap) {
    out += "...";
  }
}

}  // namespace

void logDenial(limits::LogBudget& budget, std::uint64_t now_ms, std::string_view sandbox,
               std::string_view host, std::string_view method, std::string_view url,
               policy::Reason reason, std::string_view detail) {
  if (!spdlog::should_log(spdlog::level::info)) {
    return;
  }
  // The key: a host that did not canonicalise is one key, whatever its bytes (the budget's
  // memory stays bounded by names, not by what a sandbox can invent).
  std::string key;
  key.reserve(host.size() + 32);
  key.append(host.empty() ? std::string_view("\n?") : host).push_back('\n');
  key += policy::reasonInfo(reason).token;
  std::uint64_t suppressed = 0;
  if (!budget.take(key, now_ms, suppressed)) {
    return;
  }
  std::string line;
  appendPrintable(line, method.empty() ? std::string_view("-") : method, 32);
  line += ' ';
  appendPrintable(line, url.empty() ? std::string_view("-") : url, 300);
  line += ": ";
  line += policy::reasonInfo(reason).token;
  if (!detail.empty()) {
    line += " (";
    appendPrintable(line, detail, 400);
    line += ')';
  }
  if (suppressed != 0) {
    line += " [" + std::to_string(suppressed) + " more like it since the last such line]";
  }
  spdlog::info("sandbox '{}': denied {}", sandbox, line);
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
