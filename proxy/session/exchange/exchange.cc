// The exchange from its head to its upstream: the record begun, the decision, the rate token,
// placeholders of secrets, the held body, and the audit record. Forwarding is
// exchange_forwarding.cc.
#include "proxy/session/exchange/exchange.h"

#include <spdlog/spdlog.h>

#include <charconv>

#include "policy/package_verdict.h"
#include "policy/secret_use.h"
#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/context/state_change.h"
#include "proxy/session/exchange/credential_brokering.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/session/exchange/request_target.h"

namespace sluice::proxy::session {

Exchange::Exchange(ExchangeHost& host, Downstream& downstream, std::size_t max_header_bytes)
    : host_(host),
      downstream_(downstream),
      relay_(downstream),
      connector_(host, *this),
      h1_(host, *this, max_header_bytes),
      h2_(host, *this, max_header_bytes) {}

bool Exchange::transition(ExchangeState next) {
  const int reading = readingClass(state_);
  const bool was_tunneling = state_ == ExchangeState::Tunneling;
  if (!changeState(host_.context(), host_.facts().id, kExchangeMachine, state_, next)) {
    return false;
  }
  if (was_tunneling != (next == ExchangeState::Tunneling)) {
    // The WebSocket sessions gauge follows the one state that is a session.
    host_.runtime().metrics.websocket_sessions_active.fetch_add(was_tunneling ? -1 : 1,
                                                                std::memory_order_relaxed);
  }
  if (readingClass(next) != reading) {
    host_.updateReading();
  }
  if (next == ExchangeState::Complete || next == ExchangeState::Denied ||
      next == ExchangeState::Failed) {
    releaseSlot();  // its upstream is parked, pooled or closed: no longer its own
    // A held document's memory and its charge to the sandbox go back now, not when the object
    // is reused (an HTTP/2 codec keeps finished streams' exchanges): what was served of it is
    // the client's transport's copy by now.
    metadata_.reset();
  }
  return true;
}

void Exchange::releaseSlot() {
  const UpstreamSlot slot = slot_;
  slot_ = UpstreamSlot::None;
  if (slot == UpstreamSlot::Held) {
    host_.budget().giveUpstream();  // (the next waiter of the connection, if any, has it)
  } else if (slot == UpstreamSlot::Waiting) {
    host_.budget().stopWaiting(*this);
  }
}

void Exchange::onUpstreamFree() {
  if (slot_ != UpstreamSlot::Waiting || state_ != ExchangeState::AwaitingUpstream) {
    host_.budget().giveUpstream();  // (not wanted any more: passed on)
    return;
  }
  slot_ = UpstreamSlot::Held;
  Cork cork(host_);
  host_.noteProgress();  // its idle time counts from its turn
  acquireUpstream(decideRequest({}, false));
}

const policy::Sandbox& Exchange::sandbox() const { return *host_.sandboxView().sandbox; }

const policy::Config& Exchange::config() const { return *host_.generation().config; }

void Exchange::beginRecord(bool hash) {
  record_.reset(uv_now(host_.context().loop), uv_hrtime(), hash);
  head_ = nullptr;
  framing_ = http::BodyFraming::None;
  matched_rule_ = nullptr;
  request_end_ = RequestEnd::Pending;
  request_trailers_ = nullptr;
  upgrade_ = http::Upgrade::None;
  origin_ = UpstreamOrigin::Dialled;
  after_ = UpstreamAfter::Keep;
  rate_ = RateToken::NotTaken;
  inject_fields_.clear();
  // The codec that reads the heads and answers: a refusal of the connection's own on a
  // redirected TLS connection (no HTTP yet) says otherwise.
  record_.proto = downstream_.protocol();
  transition(ExchangeState::Deciding);
}

void Exchange::beginRequest(const http::RequestHead& head, bool hash) {
  beginRecord(hash);
  head_ = &head;
  record_.method.assign(head.method);
  framing_ = head.framing;
  if (head.host_count >= 1) {
    record_.host_header.emplace(head.host_count == 1 ? head.host
                                                     : head.headers.find("host").value_or(""));
  }
  record_.origin_target.assign(head.absolute_form ? head.origin_target : head.target);
  record_.websocket = head.websocket_upgrade;
  metadata_.reset();
  publish_time_target_.clear();
}

void Exchange::startRequest(const http::RequestHead& head, bool hash) {
  beginRequest(head, hash);
  if (std::optional<TargetRefusal> refused = targetOf(host_.facts(), head, record_)) {
    deny(refused->reason, refused->detail);
    return;
  }
  decide();
}

void Exchange::refuseWithoutAnswer(policy::Reason reason, std::string_view detail) {
  // On record like a refused request, and it takes a token like one.
  if (!chargeRequest()) {
    reason = policy::Reason::RateLimited;
    record_.rule.clear();
  }
  normaliseUrl(record_.url);
  logDenial(host_.runtime().denial_lines, uv_now(host_.context().loop), sandbox().name,
            record_.host, record_.method, record_.url, reason, detail);
  writeRecord(policy::Verdict::Deny, reason, 0);
  transition(ExchangeState::Denied);
}

// The facts of the request, for decide(). `addresses` once H is resolved. The head stays valid
// while the exchange is in flight.
policy::Decision Exchange::decideRequest(std::span<const policy::IpAddress> addresses,
                                         bool resolved) {
  const http::RequestHead& head = *head_;
  policy::RequestHead request;
  request.method = head.method;
  request.target = record_.origin_target;
  request.host_count = static_cast<int>(head.host_count);
  request.host = head.host;
  request.absolute_form = head.absolute_form;
  request.uri_authority = head.uri_authority;
  request.websocket = head.websocket_upgrade;
  policy::RequestFacts facts =
      policy::RequestFacts::of(record_.target_host, record_.port, record_.scheme);
  const ConnectionFacts& connection = host_.facts();
  if (connection.route == Route::Tunnel) {
    facts.sni_state = connection.sni_state;
    facts.sni = connection.sni;
  }
  facts.request = &request;
  facts.resolved = resolved;
  facts.addresses = addresses;
  return policy::decide(sandbox(), facts);
}

// Every request of the sandbox takes a token, allowed or not (a refused one costs a record):
// a sandbox over its rate gets 429s, and the others keep their share of the gateway.
bool Exchange::chargeRequest() { return takeRequestToken(rate_, host_.sandboxView()); }

bool Exchange::overRequestRate() {
  if (chargeRequest()) {
    return false;
  }
  record_.rule.clear();
  deny(policy::Reason::RateLimited, rateLimitDetail(sandbox()));
  return true;
}

void Exchange::decide() {
  policy::Decision d = decideRequest({}, false);
  record_.host.assign(d.host.text());
  record_.rule = d.rule != nullptr ? d.rule->name : std::string();
  if (!record_.host.empty()) {
    // Into the record's own buffer, whose capacity outlives the request: no temporary strings.
    std::string& url = record_.url;
    url.assign(record_.scheme == policy::Scheme::Https ? "https://" : "http://");
    d.host.appendAuthorityText(url);
    if (record_.port != policy::defaultPort(record_.scheme)) {
      char digits[1 + 5];
      digits[0] = ':';
      auto [end, ec] = std::to_chars(digits + 1, digits + sizeof(digits), record_.port);
      (void)ec;  // a port has at most 5 digits
      url.append(digits, end);
    }
    url.append(urlPath(record_.origin_target));
  }
  if (overRequestRate()) {
    return;
  }
  if (host_.facts().refused_in_band != policy::Reason::None && d.forwards()) {
    // A tunnel refused in band carries no request to an origin (docs/wire.md#refusals-in-band),
    // whatever a reload has allowed since it opened: its requests get the tunnel's refusal.
    d.verdict = policy::Verdict::Deny;
    d.reason = host_.facts().refused_in_band;
  }
  if (!d.forwards()) {
    refuse(d, record_.host.empty() ? record_.target_host : record_.host, record_.method,
           record_.origin_target);
    return;
  }
  if (d.rule != nullptr && d.rule->registry && refusePackage(d)) {
    return;
  }
  if (head_->websocket_upgrade) {
    if (framing_ != http::BodyFraming::None) {
      // RFC 6455 section 4.1: the opening handshake is a GET without a body; a body here would
      // leave the origin and sluice to disagree on where the WebSocket's bytes begin.
      deny(policy::Reason::BadRequest, "a WebSocket upgrade request carries a body");
      return;
    }
    upgrade_ = http::Upgrade::WebSocket;
  }
  record_.verdict = d.verdict;
  record_.policy_reason = d.reason;
  matched_rule_ = d.rule;
  if (refuseSecretMisuse()) {
    return;  // before any DNS query or connection for it
  }
  held_body_.clear();
  if (!config().secrets.empty() && framing_ != http::BodyFraming::None) {
    // A placeholder may also be in the body (docs/wire.md#credential-brokering): its first
    // 64 KiB is read and looked at before anything is forwarded or even resolved. A client
    // waiting for 100-continue gets it from sluice, or it would wait for an upstream that is
    // not asked yet.
    transition(ExchangeState::HoldingBody);
    if (head_->expect_continue) {
      downstream_.sendContinue();
    }
    return;  // the codec reads the body on, then finishHolding()
  }
  acquireUpstream(d);
}

// A request of a registry rule: the package it names is judged (docs/packages.md). A
// report-mode sandbox records the refusal and forwards, as for its rules.
bool Exchange::refusePackage(policy::Decision& d) {
  PackageJudgement& judged = record_.package;
  judgePackageRequest(*sandbox().policy, *d.rule, host_.sandboxView().advisories, record_.method,
                      record_.origin_target, judged);
  const bool report = sandbox().mode == policy::SandboxMode::Report;
  const bool filters = filtersMetadata(*sandbox().policy, host_.sandboxView().advisories,
                                       judged.package, record_.method);
  // (A GET of a version document is held and filtered. A HEAD of a PyPI one is judged by the
  // time the sandbox knows; of an npm one it is not: it may name a dist-tag, not a version.)
  const bool names_one_version =
      judged.package.kind == policy::PackageRequestKind::File ||
      (judged.package.kind == policy::PackageRequestKind::VersionMetadata &&
       judged.package.ecosystem == policy::Ecosystem::Pypi);
  if (judged.reason == policy::Reason::None && !filters && names_one_version &&
      sandbox().policy->packages) {
    // A version with no time of its own: the age rule reads what the sandbox's metadata said,
    // or learns it first.
    judgePackageAge(*sandbox().policy->packages, host_.runtime().publish_times.get(), unixTimeMs(),
                    judged);
    if (judged.age_unknown && !report && planPublishTimeFetch(*d.rule)) {
      judged.reason = policy::Reason::None;
      judged.detail.clear();
    }
  }
  if (judged.reason == policy::Reason::None) {
    // Report mode forwards metadata as the origin sent it: nothing is held.
    if (!report && filters) {
      if (framing_ != http::BodyFraming::None) {
        deny(policy::Reason::BadRequest, "a GET of a package's metadata carries a body");
        return true;
      }
      const policy::PackageSettings& settings = *sandbox().policy->packages;
      metadata_.plan(
          judged.package, head_->headers.find("Accept").value_or(""), settings.max_metadata,
          host_.runtime().metadata_held.get(),
          policy::ageRuleApplies(settings, judged.package.ecosystem, judged.package.name),
          head_->headers.find("Accept-Encoding").value_or(""));
    }
    return false;
  }
  if (report) {
    if (d.verdict == policy::Verdict::Allow) {
      d.verdict = policy::Verdict::Report;
      d.reason = judged.reason;
    }
    return false;
  }
  deny(judged.reason, judged.detail);
  return true;
}

bool Exchange::holdingDone() const {
  return state_ == ExchangeState::HoldingBody &&
         (request_end_ == RequestEnd::Read || held_body_.size() >= kBodyScanBytes);
}

void Exchange::finishHolding() {
  std::string_view scanned(held_body_);
  scanned = scanned.substr(0, kBodyScanBytes);
  const policy::Rule* rule = matched_rule_;
  if (const policy::Secret* misused = policy::misusedSecret(config().secrets, rule, scanned)) {
    deny(policy::Reason::SecretMisuse, misuseDetail("the request body carries", *misused));
    return;
  }
  acquireUpstream(decideRequest({}, false));
}

// A placeholder in any header value or in the target, of a secret the allowing rule does not
// inject, is `secret_misuse`: denied before anything is forwarded, and on record.
bool Exchange::refuseSecretMisuse() {
  const auto& secrets = config().secrets;
  if (secrets.empty()) {
    return false;
  }
  const policy::Secret* misused = misusedInHead(secrets, matched_rule_, *head_);
  if (misused == nullptr) {
    return false;
  }
  deny(policy::Reason::SecretMisuse, misuseDetail("the request carries", *misused));
  return true;
}

// The request's head and perhaps its body went upstream already: before its answer began, the
// sandbox gets 403 secret_misuse; after, its stream is cut. Either way the upstream never gets
// the request's end (an HTTP/1.1 connection is closed mid-body, an HTTP/2 stream reset), so
// an origin never acts on a request whose trailers carried the placeholder.
bool Exchange::refuseMisusedTrailers(const http::HeaderBlock& trailers) {
  const auto& secrets = config().secrets;
  if (secrets.empty() || state_ == ExchangeState::FinishingRequest) {
    return false;  // (FinishingRequest: the rest of the request goes nowhere)
  }
  const policy::Secret* misused = misusedInFields(secrets, matched_rule_, trailers);
  if (misused == nullptr) {
    return false;
  }
  const std::string detail = misuseDetail("the request's trailers carry", *misused);
  if (!responseBegun()) {
    deny(policy::Reason::SecretMisuse, detail);
    return true;
  }
  record_.verdict = policy::Verdict::Deny;
  upstreamFailed(policy::Reason::SecretMisuse, detail);
  return true;
}

std::string Exchange::misuseDetail(std::string_view where, const policy::Secret& secret) const {
  const policy::Rule* rule = matched_rule_;
  return std::string(where) + " the placeholder of secret '" + secret.name + "', which " +
         (rule != nullptr ? "rule '" + rule->name + "' does not inject"
                          : std::string("no rule injects here"));
}

bool Exchange::holdsMore() const {
  return state_ == ExchangeState::HoldingBody && request_end_ == RequestEnd::Pending &&
         held_body_.size() < kBodyScanBytes;
}

void Exchange::refuse(const policy::Decision& decision, std::string_view host,
                      std::string_view method, std::string_view target) {
  if (decision.reason != policy::Reason::IpDenied) {
    deny(decision.reason, explainDenial(decision.reason, {.sandbox = sandbox().name,
                                                          .host = host,
                                                          .port = record_.port,
                                                          .scheme = record_.scheme,
                                                          .method = method,
                                                          .target = target}));
    return;
  }
  // The addresses decide() checked: an IP-literal H is its own; else what the connector
  // resolved.
  std::span<const policy::IpAddress> addresses;
  if (decision.host.isIpLiteral()) {
    addresses = std::span<const policy::IpAddress>(&decision.host.address(), 1);
  } else if (record_.answer) {
    addresses = record_.answer->addresses;
  }
  listDeniedAddresses(sandbox(), decision.rule, addresses, record_.port, record_.denied_addrs);
  deny(decision.reason, explainIpDenied(host, record_.denied_addrs, decision.rule));
}

void Exchange::deny(policy::Reason reason, std::string_view detail) {
  // A request refused before it took its token (a bad head, a refused CONNECT) takes one now:
  // beyond the sandbox's rate every request is a 429, whatever else was wrong with it.
  std::string over_rate;
  if (!chargeRequest()) {
    reason = policy::Reason::RateLimited;
    over_rate = rateLimitDetail(sandbox());
    detail = over_rate;
    record_.rule.clear();
  }
  if (reason != policy::Reason::IpDenied) {
    record_.denied_addrs.clear();  // (refuse() listed them for an ip_denied the rate overrode)
  }
  const policy::ReasonInfo& info = policy::reasonInfo(reason);
  SPDLOG_DEBUG("[C{}] deny {}: {}", host_.facts().id, info.token, detail);
  normaliseUrl(record_.url);
  logDenial(host_.runtime().denial_lines, uv_now(host_.context().loop), sandbox().name,
            record_.host, record_.method, record_.url, reason, detail);
  const bool head_sent = responseBegun();
  int status = head_sent ? record_.status : info.http_status;
  if (!head_sent) {
    // Writing the answer may fail and close the connection, whose close records the exchange
    // cut short: as the refusal it was.
    record_.verdict = policy::Verdict::Deny;
    record_.refusal = reason;
    status = downstream_.sendDenial(reason, detail);
  }
  if (host_.closing()) {
    return;
  }
  writeRecord(policy::Verdict::Deny, reason, status);
  transition(ExchangeState::Denied);
  connector_.cancel();
  channel_->release(false, after_ == UpstreamAfter::Keep);
  host_.onExchangeOver(ExchangeState::Denied);
}

void Exchange::onClientClosed() {
  if (state_ == ExchangeState::Tunneling) {
    // The client ended its side of the WebSocket: so does sluice toward the origin, after what
    // it still had for it, and what the origin sends until it closes still reaches the client
    // (docs/wire.md#websocket). idle_timeout bounds an origin that never closes.
    channel_->endWriting();
    return;
  }
  if (state_ == ExchangeState::HoldingBody && request_end_ == RequestEnd::Pending) {
    deny(policy::Reason::BadRequest, "client closed mid-request");
    return;
  }
  if (readingRequestBody(state_)) {
    // The body will never complete: the upstream cannot get a valid request.
    upstreamFailed(policy::Reason::BadRequest, "client closed mid-request");
  }
}

void Exchange::abandon() {
  if (!inFlight()) {
    return;
  }
  // Cut short (the client reset, shutdown_grace ran out): the request still gets its record,
  // with what was sent so far.
  writeRecord(record_.verdict, record_.outcomeReason(), responseBegun() ? record_.status : 0);
  transition(ExchangeState::Failed);
}

bool Exchange::onTimeout(bool connector_deadline_over) {
  if (connector_.state() == ConnectorState::Connecting && connector_deadline_over) {
    connector_.onConnectTimeout();
    return true;
  }
  if (state_ != ExchangeState::AwaitingUpstream && !forwarding(state_) &&
      state_ != ExchangeState::FinishingRequest) {
    return false;
  }
  if (!responseBegun()) {
    connector_.expire();
    upstreamFailed(policy::Reason::UpstreamTimeout, "no answer in time");
  } else {
    host_.close("idle during the response");
  }
  return true;
}

void Exchange::releaseUpstream() {
  connector_.cancel();
  channel_->release(false, after_ == UpstreamAfter::Keep);
}

void Exchange::dropUpstream() {
  connector_.cancel();
  channel_->drop();
}

void Exchange::updateUpstreamReading(bool client_backed_up) {
  connector_.updateReading();
  channel_->setReading(forwarding(state_) && !client_backed_up);
}

void Exchange::releaseBuffers() {
  h1_.releaseBuffers();
  h2_.releaseBuffers();
}

void Exchange::writeRecord(policy::Verdict verdict, policy::Reason reason, int status) {
  if (host_.sandboxView().audit == nullptr) {
    return;
  }
  writeAuditRecord(record_, host_.facts(), host_.sandboxView(), host_.runtime(),
                   uv_now(host_.context().loop), verdict, reason, status);
  host_.noteAudited();
}

}  // namespace sluice::proxy::session
