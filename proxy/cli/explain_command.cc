// sluice explain: the verdict sluice would give one hypothetical request, as one JSON object
// (docs/cli.md#sluice-explain). It walks the same decision points as the gateway, in the same
// order: first the connection (the CONNECT target, or the absolute-form URL of plain http), then
// the request inside it, then the addresses: those given with --ip, or with --resolve what the
// configured resolver answers, asked as `run` asks it (only for a name the policy allowed).
//
// Exit 0 when sluice would forward it (allow, or report in a report-mode sandbox), 1 when it
// would deny it, 2 for bad input (flags, config, sandbox name, a URL that is not absolute).
#include <uv.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/ascii.h"
#include "base/json_writer.h"
#include "policy/address_class.h"
#include "policy/authority.h"
#include "policy/decision.h"
#include "policy/package_verdict.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"
#include "proxy/config/config_files.h"
#include "proxy/dns/resolver.h"
#include "proxy/runtime/package_advisories.h"
#include "proxy/runtime/package_judgement.h"

namespace sluice::cli {

namespace {

using policy::Decision;
using policy::IpAddress;
using policy::Reason;

constexpr std::string_view kUsageLine =
    "usage: sluice explain -c FILE --sandbox NAME --url URL [--method M] [--sni NAME] "
    "[--ip ADDR]... [--resolve]\n";

int badInput(Streams streams, const std::string& problem) {
  std::fprintf(streams.err, "sluice explain: %s\n%.*s", problem.c_str(),
               static_cast<int>(kUsageLine.size()), kUsageLine.data());
  return kExitUsage;
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
  // --resolve: the resolver was asked; a failure is `dns_error`, a deny with dns_failed.
  bool asked_resolver = false;
  std::optional<proxy::dns::DnsError> dns_error;
};

// --resolve: one lookup through the configured resolver (dns.servers, else /etc/resolv.conf's
// nameservers), the Resolver `run` uses, on a loop of its own.
proxy::dns::LookupResult resolveOnce(const policy::DnsSettings& settings, std::string_view name) {
  using proxy::dns::LookupResult;
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<LookupResult> result;
  {
    proxy::dns::Resolver resolver(&loop, settings);
    auto resolution = resolver.resolve(name, [&](LookupResult r) { result = std::move(r); });
    std::unique_ptr<proxy::dns::Resolver::Lookup> lookup;
    if (auto* now = std::get_if<LookupResult>(&resolution)) {
      result = std::move(*now);
    } else {
      lookup = std::move(std::get<std::unique_ptr<proxy::dns::Resolver::Lookup>>(resolution));
    }
    while (!result && uv_run(&loop, UV_RUN_ONCE) != 0) {
    }
    lookup.reset();
    resolver.close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);  // the resolver's handles close
  }
  uv_loop_close(&loop);
  return result ? std::move(*result) : LookupResult(Err{proxy::dns::DnsError::Failed});
}

Decision explain(const Query& q) {
  if (q.url.scheme == policy::UrlScheme::Other) {
    Decision d;
    d.reason = Reason::NotAllowedScheme;
    return d;
  }
  policy::RequestFacts facts = policy::RequestFacts::of(
      q.url.authority.host, q.url.port,
      q.url.scheme == policy::UrlScheme::Https ? policy::Scheme::Https : policy::Scheme::Http);
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

// --resolve, as `run` does it: the request is decided first; only a name it allowed is resolved,
// and then decided again with the answer. No answer: a deny with dns_failed.
Decision explainResolving(Query& q, const policy::DnsSettings& settings) {
  Decision d = explain(q);
  if (!d.forwards() || d.host.isIpLiteral()) {
    return d;
  }
  q.asked_resolver = true;
  proxy::dns::LookupResult result = resolveOnce(settings, d.host.text());
  if (!result) {
    q.dns_error = result.error();
    Decision failed;
    failed.host = d.host;
    failed.rule = d.rule;
    failed.reason = Reason::DnsFailed;
    return failed;
  }
  q.addresses = result.value()->addresses;
  q.resolved = true;
  return explain(q);
}

// The package firewall after the rule allowed the request (docs/packages.md#the-decision), as
// the gateway judges it: the advisories are read as `run` reads them. nullopt: no registry rule.
Result<std::optional<proxy::PackageJudgement>, std::string> explainPackage(
    const Query& q, const policy::Config& config, Decision& d) {
  if (!d.forwards() || d.rule == nullptr || !d.rule->registry) {
    return std::optional<proxy::PackageJudgement>();
  }
  auto advisories = proxy::PolicyAdvisories::load(config);
  if (!advisories) {
    return Err{advisories.error()};
  }
  proxy::PackageJudgement judged;
  proxy::judgePackageRequest(*q.sandbox->policy, *d.rule,
                             advisories.value()->find(*q.sandbox->policy), q.method, q.target,
                             judged);
  if (judged.reason != Reason::None) {
    if (q.sandbox->mode == policy::SandboxMode::Report) {
      if (d.verdict == policy::Verdict::Allow) {
        d.verdict = policy::Verdict::Report;
        d.reason = judged.reason;
      }
    } else {
      d.verdict = policy::Verdict::Deny;
      d.reason = judged.reason;
    }
  }
  return std::optional<proxy::PackageJudgement>(std::move(judged));
}

void writePackage(JsonWriter& json, const std::optional<proxy::PackageJudgement>& judged,
                  const policy::Policy& policy) {
  if (!judged || judged->package.kind == policy::PackageRequestKind::None) {
    json.fieldNull("package");
    return;
  }
  const policy::PackageRequest& package = judged->package;
  json.key("package").beginObject();
  json.field("ecosystem", policy::toString(package.ecosystem));
  json.field("kind", policy::toString(package.kind));
  json.fieldOrNull("name", package.name);
  json.fieldOrNull("version", package.version);
  json.fieldOrNull("advisory", judged->advisory);
  json.fieldOrNull("why", judged->detail);
  // The age rule needs the registry's publish times, which only a running sluice reads
  // (docs/packages.md#the-age-rule): explain says whether it applies, not its verdict.
  json.fieldBool(
      "age_rule",
      policy.packages && policy::ageRuleApplies(*policy.packages, package.ecosystem, package.name));
  json.endObject();
}

void writeResult(std::string& out, const Query& q, const Decision& d,
                 const std::optional<proxy::PackageJudgement>& judged) {
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
  if (q.asked_resolver) {
    json.fieldOrNull("dns_error", q.dns_error ? proxy::dns::toString(*q.dns_error) : "");
  }
  json.key("addresses").beginArray();
  // An IP-literal host is checked as its own address; otherwise the --ip addresses.
  std::vector<IpAddress> shown = q.addresses;
  if (d.ip_checked && d.host.isIpLiteral()) {
    shown.assign(1, d.host.address());
  }
  for (std::size_t i = 0; i < shown.size() && d.ip_checked; ++i) {
    const bool usable = i < policy::kMaxAddresses && ((d.usable_addresses >> i) & 1u) != 0;
    json.beginObject();
    json.field("ip", shown[i].toString());
    json.fieldBool("usable", usable);
    json.field("class", policy::addressClassText(shown[i]));
    // Why it is refused, as the audit record's denied_addrs says (the first kMaxAddresses;
    // the rest are never dialled).
    if (usable || i >= policy::kMaxAddresses) {
      json.fieldNull("refused");
    } else {
      json.field("refused", policy::toString(
                                policy::addressRefusal(*q.sandbox, d.rule, shown[i], q.url.port)));
    }
    json.endObject();
  }
  json.endArray();
  writePackage(json, judged, *q.sandbox->policy);
  json.endObject();
  out += '\n';
}

}  // namespace

int explainCommand(std::span<const std::string_view> args, Streams streams) {
  std::string error;
  auto flags = Flags::parse(args, commandFlags("explain"), &error);
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
    return badInput(streams,
                    "unknown sandbox '" + std::string(sandbox_name) + "' (defined: " + known + ")");
  }

  std::string_view url_text = *flags->get("url");
  auto url = policy::parseAbsoluteUrl(url_text);
  if (!url) {
    return badInput(streams, "--url " + std::string(url_text) + ": " +
                                 std::string(policy::toString(url.error())));
  }
  q.url = *url;
  q.target =
      q.url.target.starts_with('?') ? "/" + std::string(q.url.target) : std::string(q.url.target);
  if (auto method = flags->get("method")) {
    if (!ascii::isToken(*method)) {
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
  const bool resolve = flags->has("resolve");
  if (resolve && q.resolved) {
    return badInput(streams, "--resolve and --ip are exclusive: the addresses come from one");
  }

  Decision d = resolve ? explainResolving(q, config.value()->dns) : explain(q);
  auto judged = explainPackage(q, *config.value(), d);
  if (!judged) {
    std::fprintf(streams.err, "sluice explain: %s\n", judged.error().c_str());
    return kExitUsage;
  }
  std::string out;
  writeResult(out, q, d, judged.value());
  std::fputs(out.c_str(), streams.out);
  return d.forwards() ? kExitOk : kExitFailure;
}

}  // namespace sluice::cli
