// libFuzzer: the parsers a sandbox's bytes reach before any decision (names, authorities,
// request targets) and decide() itself, with invariants checked on every input:
//   - canonicalizeHost() is idempotent, and its output is lower-case LDH or a literal;
//   - a parsed authority's port is 1-65535 and its host is a prefix of the input;
//   - a Plain target never holds a dot or empty segment once unreserved escapes are decoded;
//   - decide() never allows what does not name an allowed host, SNI and Host consistently.
// The input is split at '\n' into: H, SNI, Host, method, target, port, one address.
//
// Parser files: policy/authority.cc policy/host_name.cc policy/request_path.cc
//   policy/decision.cc
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/authority.h"
#include "policy/config_loader.h"
#include "policy/decision.h"
#include "policy/request_path.h"

namespace {

using namespace sluice::policy;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

const Config& config() {
  static const std::shared_ptr<const Config> c = [] {
    auto loaded = loadConfig({"fuzz.yaml", R"(version: 1
sandboxes:
  - name: s
    listen: 127.0.0.2:3128
    policy: p
  - name: r
    listen: 127.0.0.2:3129
    policy: p
    mode: report
policies:
  p:
    rules:
      - name: a
        hosts: [allowed.test, "*.wild.test", "93.184.216.34"]
        schemes: [https, http]
        ports: [443, 80]
        methods: [GET]
        paths: [/simple/, /x]
      - name: b
        hosts: [cdn.test]
        ips: [127.0.0.20/32]
)"},
                              {});
    if (!loaded) {
      __builtin_trap();
    }
    return std::move(loaded).value();
  }();
  return *c;
}

void checkHost(std::string_view raw) {
  auto h = canonicalizeHost(raw);
  if (!h) {
    return;
  }
  auto again = canonicalizeHost(h->authorityText());
  check(again && *again == *h);
  if (!h->isIpLiteral()) {
    for (char c : h->text()) {
      check((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
    }
  }
}

void checkAuthority(std::string_view raw) {
  for (PortRule rule : {PortRule::Required, PortRule::Optional}) {
    auto a = parseAuthority(raw, rule);
    if (a) {
      check(raw.starts_with(a->host));
      check(!a->port || *a->port != 0);
      check(rule == PortRule::Optional || a->port.has_value());
    }
  }
  (void)parseAbsoluteUrl(raw);
}

void checkTarget(std::string_view target) {
  // An encoded '/' matches only a "%2f" a prefix spells out (docs/policy.md#paths).
  const TargetCheck examined = examineRequestTarget(target);
  if (examined.ambiguities == kEncodedSlash) {
    check(!pathHasPrefix(target, "/"));
  }
  PathShape shape = checkRequestTarget(target);
  if (shape == PathShape::Plain && target != "*") {
    check(target.front() == '/');
    std::string_view path = target.substr(0, target.find('?'));
    check(path.find("/./") == std::string_view::npos);
    check(path.find("/../") == std::string_view::npos);
    check(path.find("//") == std::string_view::npos);
    check(pathHasPrefix(target, "/"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> f;
  while (f.size() < 7) {
    std::size_t nl = input.find('\n');
    f.push_back(input.substr(0, nl));
    input = nl == std::string_view::npos ? std::string_view{} : input.substr(nl + 1);
  }
  for (std::string_view s : f) {
    checkHost(s);
    checkAuthority(s);
    checkTarget(s);
  }

  RequestHead head;
  head.method = f[3];
  head.target = f[4];
  head.host_count = 1;
  head.host = f[2];
  RequestFacts facts;
  facts.target_host = f[0];
  facts.port = static_cast<std::uint16_t>(f[5].empty() ? 443 : (f[5][0] == 'h' ? 80 : 443));
  facts.scheme = facts.port == 80 ? Scheme::Http : Scheme::Https;
  facts.sni_state = f[1].empty() ? SniState::Absent : SniState::Present;
  facts.sni = f[1];
  facts.request = f[3].empty() ? nullptr : &head;
  std::vector<IpAddress> addresses;
  if (auto a = IpAddress::parse(f[6])) {
    addresses.push_back(*a);
  }
  facts.resolved = !addresses.empty();
  facts.addresses = addresses;

  for (const Sandbox& sandbox : config().sandboxes) {
    Decision d = decide(sandbox, facts);
    if (d.verdict == Verdict::Allow) {
      // Allowed: H, SNI and Host all canonicalise to one allowed name.
      auto h = canonicalizeHost(f[0]);
      check(h && *h == d.host && d.rule != nullptr);
      if (facts.scheme == Scheme::Https) {
        auto sni = canonicalizeHost(f[1]);
        check(sni && *sni == *h);
      }
      if (facts.request != nullptr) {
        check(checkRequestTarget(head.target) == PathShape::Plain ||
              d.rule->paths.empty());
      }
    }
    if (d.forwards() && d.ip_checked) {
      check(d.usable_addresses != 0);
    }
  }
  return 0;
}
