#include "proxy/session/exchange/request_record.h"

#include <algorithm>

#include <uv.h>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"

namespace sluice::proxy::session {

void RequestRecord::reset(std::uint64_t now_ms, std::uint64_t now_ns, bool hash) {
  started_ms = now_ms;
  started_ns = now_ns;
  ts = std::chrono::system_clock::now();
  target_host.clear();
  host.clear();
  port = 0;
  scheme = policy::Scheme::Https;
  method.clear();
  origin_target.clear();
  host_header.reset();
  url.clear();
  verdict = policy::Verdict::Deny;
  policy_reason = policy::Reason::None;
  refusal = policy::Reason::None;
  rule.clear();
  answer.reset();
  upstream.reset();
  proto = audit::Proto::None;
  upstream_proto = audit::Proto::None;
  websocket = false;
  error = audit::Error::None;
  denied_addrs.clear();
  package.clear();
  status = 0;
  req_body_read = false;
  resp_body_read = false;
  req_bytes = 0;
  resp_bytes = 0;
  hashing = hash;
  if (hash) {
    if (!req_hash) {
      req_hash.reset(EVP_MD_CTX_new());
      resp_hash.reset(EVP_MD_CTX_new());
    }
    EVP_DigestInit_ex(req_hash.get(), EVP_sha256(), nullptr);
    EVP_DigestInit_ex(resp_hash.get(), EVP_sha256(), nullptr);
  }
}

void normaliseUrl(std::string& url) {
  std::string_view text = url;
  std::string_view default_port;
  std::size_t start;
  if (text.starts_with("https://")) {
    default_port = ":443";
    start = 8;
  } else if (text.starts_with("http://")) {
    default_port = ":80";
    start = 7;
  } else {
    return;
  }
  // The authority ends at the first '/', '?' or '#' (one pass; find_first_of calls memchr
  // three times per character).
  std::size_t end = start;
  while (end < text.size() && text[end] != '/' && text[end] != '?' && text[end] != '#') {
    ++end;
  }
  std::string_view authority = text.substr(start, end - start);
  if (authority.size() <= default_port.size() || !authority.ends_with(default_port)) {
    return;
  }
  std::string_view host = authority.substr(0, authority.size() - default_port.size());
  // A bare IPv6 address ("::1:80") has no port to take off; a bracketed one ends with ']'.
  if (host.find(':') != std::string_view::npos && !host.ends_with(']')) {
    return;
  }
  url.erase(start + host.size(), default_port.size());
}

void writeAuditRecord(RequestRecord& record, const ConnectionFacts& connection,
                      const SandboxView& view, SandboxRuntime& runtime, std::uint64_t now_ms,
                      policy::Verdict verdict, policy::Reason reason, int status) {
  if (view.audit == nullptr) {
    return;
  }
  audit::AuditRecord r;
  // When the request (or the CONNECT, or the refused head) began; now if nothing began.
  r.ts = record.started_ms != 0 ? record.ts : std::chrono::system_clock::now();
  r.sandbox = view.sandbox->name;
  r.conn = connection.id;
  r.client = connection.client;
  r.mode = connection.mode;
  r.orig_dst = connection.orig_dst;
  if (connection.sni_state == policy::SniState::Present) {
    r.sni = connection.sni;
  }
  if (record.host_header) {
    r.host = *record.host_header;
  }
  if (!record.method.empty()) {
    r.method = record.method;
  }
  normaliseUrl(record.url);
  r.url = record.url;
  if (record.answer) {
    r.addrs = record.answer->addresses;
  }
  r.upstream = record.upstream;
  r.decision = verdict;
  r.rule = record.rule;
  r.reason = reason;
  r.status = status;
  if (record.req_body_read) {
    r.req_bytes = record.req_bytes;
  }
  if (record.resp_body_read) {
    r.resp_bytes = record.resp_bytes;
  }
  r.denied_addrs = record.denied_addrs;
  if (const policy::PackageRequest& package = record.package.package;
      package.kind != policy::PackageRequestKind::None) {
    audit::PackageFacts& facts = r.package.emplace();
    facts.ecosystem = package.ecosystem;
    facts.kind = package.kind;
    facts.name = package.name;
    facts.version = package.version;
    facts.advisory = record.package.advisory;
    if (record.package.filtered) {
      const auto& removed = record.package.removed;
      facts.removed = removed.size();
      facts.removed_listed_count = std::min(removed.size(), audit::kMaxRemovedListed);
      for (std::size_t i = 0; i < facts.removed_listed_count; ++i) {
        facts.removed_listed[i] = {removed[i].version, removed[i].reason, removed[i].advisory};
      }
    }
  }
  r.proto = record.proto;
  // Only what reached an upstream says how it was spoken to.
  r.upstream_proto = record.upstream ? record.upstream_proto : audit::Proto::None;
  r.websocket = record.websocket;
  r.error = record.error;
  if (record.hashing) {
    r.hashed = true;
    unsigned n = 0;
    EVP_DigestFinal_ex(record.req_hash.get(), r.req_sha256.data(), &n);
    EVP_DigestFinal_ex(record.resp_hash.get(), r.resp_sha256.data(), &n);
  }
  std::uint64_t now = now_ms;
  std::uint64_t begun = record.started_ms != 0 ? record.started_ms : connection.started_ms;
  r.duration_ms = now > begun ? now - begun : 0;
  view.audit->write(r);
  // The counters follow the audit log: one request per record, its body bytes; a tunnel that
  // carried none counts only by why it ended.
  admin::SandboxMetrics& m = runtime.metrics;
  if (record.error != audit::Error::None) {
    m.countError(record.error);
  }
  if (audit::endsQuietTunnel(record.error)) {
    return;
  }
  m.countRequest(policy::toString(verdict), reason);
  m.addBytes(record.req_bytes, record.resp_bytes);
  if (record.started_ns != 0) {
    m.request_duration.observe((uv_hrtime() - record.started_ns) / 1000);
  }
}

bool takeRequestToken(RateToken& token, const SandboxView& view) {
  if (token != RateToken::NotTaken) {
    return true;
  }
  token = RateToken::Taken;
  return view.rate == nullptr || view.rate->take(uv_hrtime());
}

std::string rateLimitDetail(const policy::Sandbox& sandbox) {
  return "sandbox '" + sandbox.name + "' is over its limit of " +
         std::to_string(sandbox.limits.requests_per_second.value_or(0)) + " requests per second";
}

}  // namespace sluice::proxy::session
