// sluice explain: the verdict sluice would give one hypothetical request, as one JSON object
// (docs/cli.md#sluice-explain). It walks the same decision points as the gateway, in the same
// order: first the connection (the CONNECT target, or the absolute-form URL of plain http), then
// the request inside it, then the addresses (only those given with --ip: explain never resolves).
//
// Exit 0 when sluice would forward it (allow, or report in a report-mode sandbox), 1 when it
// would deny it, 2 for bad input (flags, config, sandbox name, a URL that is not absolute).
#include <cstdio>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "policy/address_class.h"
#include "policy/authority.h"
#include "policy/decision.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/flags.h"
#include "proxy/config/config_files.h"

namespace sluice::cli {

namespace {

using policy::Decision;
using policy::IpAddress;
using policy::Reason;

constexpr std::string_view kUsageLine =
    "usage: sluice explain -c FILE --sandbox NAME --url URL [--method M] [--sni NAME] "
    "[--ip ADDR]...\n";

int badInput(Streams streams, const std::string& problem) {
  std::fprintf(streams.err, "sluice explain: %s\n%.*s", problem.c_str(),
               static_cast<int>(kUsageLine.size()), kUsageLine.data());
  return kExitUsage;
}

bool isToken(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (char c : s) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

struct Query {
  const policy::Sandbox* sandbox = nullptr;
  policy::Url url;
  std::string target;  // the request target, "/" added before a bare "?query"
  std::string_view method = "GET";
  policy::SniState sni_state = policy::SniState::Unknown;
  std::string_view sni;
  std::vector<IpAddress> addresses;
  bool resolved = false;
};

Decision explain(const Query& q) {
  if (q.url.scheme == policy::UrlScheme::Other) {
    Decision d;
    d.reason = Reason::NotAllowedScheme;
    return d;
  }
  policy::RequestFacts facts;
  facts.target_host = q.url.authority.host;
  facts.port = q.url.port;
  facts.scheme = q.url.scheme == policy::UrlScheme::Https ? policy::Scheme::Https
                                                          : policy::Scheme::Http;
  // The connection first: CONNECT host:port (https) or the absolute-form target (http).
  Decision d = policy::decide(*q.sandbox, facts);
  if (!d.forwards()) {
    return d;
  }
  // Then the request inside it. Plain http through an explicit proxy is absolute-form; https
  // inside the tunnel is origin-form with the same Host.
  policy::RequestHead head;
  head.method = q.method;
  head.target = q.target;
  head.host_count = 1;
  std::string_view url_text = q.url.authority.host;
  std::string host_header(url_text);
  if (q.url.authority.port) {
    host_header += ':' + std::to_string(*q.url.authority.port);
  }
  head.host = host_header;
  head.absolute_form = facts.scheme == policy::Scheme::Http;
  head.uri_authority = host_header;
  facts.sni_state = q.sni_state;
  facts.sni = q.sni;
  facts.request = &head;
  facts.resolved = q.resolved;
  facts.addresses = q.addresses;
  return policy::decide(*q.sandbox, facts);
}

void writeResult(std::string& out, const Query& q, const Decision& d) {
  JsonWriter json(out);
  json.beginObject();
  json.field("decision", policy::toString(d.verdict));
  json.fieldOrNull("rule", d.rule != nullptr ? std::string_view(d.rule->name) : "");
  json.fieldOrNull("reason", d.reason == Reason::None ? "" : policy::toString(d.reason));
  if (d.verdict == policy::Verdict::Deny && policy::reasonInfo(d.reason).http_status != 0) {
    json.field("status", std::int64_t{policy::reasonInfo(d.reason).http_status});
  } else {
    json.fieldNull("status");
  }
  json.field("sandbox", q.sandbox->name);
  json.field("mode", policy::toString(q.sandbox->mode));
  json.fieldOrNull("host", d.host.text());
  json.field("scheme", q.url.scheme_text);
  json.field("port", std::int64_t{q.url.port});
  json.field("method", q.method);
  json.field("path", q.target);
  if (q.sni_state == policy::SniState::Present) {
    json.field("sni", q.sni);
  } else {
    json.fieldNull("sni");
  }
  json.fieldBool("ip_checked", d.ip_checked);
  json.key("addresses").beginArray();
  // An IP-literal host is checked as its own address; otherwise the --ip addresses.
  std::vector<IpAddress> shown = q.addresses;
  if (d.ip_checked && d.host.isIpLiteral()) {
    shown.assign(1, d.host.address());
  }
  for (std::size_t i = 0; i < shown.size() && d.ip_checked; ++i) {
    policy::AddressClassification c = policy::classifyAddress(shown[i]);
    std::string klass(policy::toString(c.address_class));
    if (c.embedding != policy::Embedding::None) {
      klass = std::string(policy::toString(c.embedding)) + ":" + klass;
    }
    json.beginObject();
    json.field("ip", shown[i].toString());
    json.fieldBool("usable", i < policy::kMaxAddresses && ((d.usable_addresses >> i) & 1u) != 0);
    json.field("class", klass);
    json.endObject();
  }
  json.endArray();
  json.endObject();
  out += '\n';
}

}  // namespace

int explainCommand(std::span<const std::string_view> args, Streams streams) {
  static constexpr FlagSpec kSpecs[] = {
      {"config", "c", false, true}, {"sandbox", "", false, true}, {"url", "", false, true},
      {"method", "", false, true},  {"sni", "", false, true},     {"ip", "", true, true},
  };
  std::string error;
  auto flags = Flags::parse(args, kSpecs, &error);
  if (!flags) {
    return badInput(streams, error);
  }
  for (std::string_view required : {"config", "sandbox", "url"}) {
    if (!flags->get(required)) {
      return badInput(streams, "--" + std::string(required) + " is required");
    }
  }

  auto config = proxy::loadConfigFile(std::string(*flags->get("config")));
  if (!config) {
    proxy::printConfigErrors(streams.err, config.error());
    return kExitUsage;
  }
  Query q;
  std::string_view sandbox_name = *flags->get("sandbox");
  q.sandbox = config.value()->findSandbox(sandbox_name);
  if (q.sandbox == nullptr) {
    std::string known;
    for (const auto& s : config.value()->sandboxes) {
      known += (known.empty() ? "" : ", ") + s.name;
    }
    return badInput(streams, "unknown sandbox '" + std::string(sandbox_name) +
                                 "' (defined: " + known + ")");
  }

  std::string_view url_text = *flags->get("url");
  auto url = policy::parseAbsoluteUrl(url_text);
  if (!url) {
    return badInput(streams, "--url " + std::string(url_text) + ": " +
                                 std::string(policy::toString(url.error())));
  }
  q.url = *url;
  q.target = q.url.target.starts_with('?') ? "/" + std::string(q.url.target)
                                           : std::string(q.url.target);
  if (auto method = flags->get("method")) {
    if (!isToken(*method)) {
      return badInput(streams, "--method " + std::string(*method) + " is not an HTTP method");
    }
    q.method = *method;
  }
  if (auto sni = flags->get("sni")) {
    if (q.url.scheme != policy::UrlScheme::Https) {
      return badInput(streams, "--sni applies to https URLs only");
    }
    q.sni_state = sni->empty() ? policy::SniState::Absent : policy::SniState::Present;
    q.sni = *sni;
  } else if (q.url.scheme == policy::UrlScheme::Https) {
    q.sni_state = policy::SniState::Present;
    q.sni = q.url.authority.host;
  }
  for (std::string_view text : flags->all("ip")) {
    auto address = IpAddress::parse(text);
    if (!address) {
      return badInput(streams, "--ip " + std::string(text) + " is not an IP address");
    }
    q.addresses.push_back(*address);
  }
  q.resolved = !q.addresses.empty();

  Decision d = explain(q);
  std::string out;
  writeResult(out, q, d);
  std::fputs(out.c_str(), streams.out);
  return d.forwards() ? kExitOk : kExitFailure;
}

}  // namespace sluice::cli
