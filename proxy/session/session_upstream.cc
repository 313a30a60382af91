// The upstream half of the session: an idle pooled connection re-checked for this request, or
// H resolved by sluice's own resolver, decided again on its addresses, and the usable ones
// dialled in turn; then upstream TLS with SNI H, verified for H.
#include <spdlog/spdlog.h>

#include "proxy/gateway_state.h"
#include "proxy/generation.h"
#include "proxy/session/denial.h"
#include "proxy/session/session.h"

namespace sluice::proxy::session {

// ---------------------------------------------------------------------------------------------
// Getting an upstream connection: the pool, or DNS and connect.

// This client's parked upstream or an idle pooled connection for `key`, if one passes this
// request's own checks: it was opened for an earlier request, perhaps under another rule with
// other `ips` (or under none, in report mode).
UpstreamKey Session::upstreamKey() const {
  return UpstreamKey{runtime_->id, generation_->upstream_trust_id, exchange_.host, exchange_.port,
                     exchange_.scheme == policy::Scheme::Https};
}

bool Session::takePooled(const UpstreamKey& key) {
  if (exchange_.origin == UpstreamOrigin::Redialled) {
    // Sent again because a reused connection closed unanswered: the origin may have closed
    // its other idle connections too. This one is dialled.
    return false;
  }
  std::unique_ptr<UpstreamConnection> pooled;
  if (parked_ && parked_->key == key) {
    pooled = std::move(parked_);
  } else {
    unpark();
    pooled = ctx_.pool->take(key, static_cast<io::TcpStream::Handler*>(this));
  }
  if (!pooled) {
    return false;
  }
  policy::IpAddress address = pooled->address.ip;
  policy::Decision d = decideRequest(std::span<const policy::IpAddress>(&address, 1), true);
  if (!d.forwards() || (d.usable_addresses & 1u) == 0) {
    ctx_.pool->put(std::move(pooled));  // still good for the requests it was checked for
    return false;
  }
  upstream_ = std::move(pooled);
  exchange_.matched_rule = d.rule;
  exchange_.origin = UpstreamOrigin::Reused;
  exchange_.upstream = upstream_->address;
  transition(ConnectorState::Ready);
  startExchange();
  return true;
}

// original_dst: require_match (SPEC §5.2): the address the sandbox dialled must be one of
// sluice's own answers for H, or the address sluice's resolver gave the sandbox for every name.
bool Session::originalDestinationMatches() const {
  if (!orig_dst_) {
    return false;
  }
  const policy::Sandbox& s = sandbox();
  for (const auto& own : {s.dns_listen, s.transparent}) {
    if (own && own->ip == orig_dst_->ip) {
      return true;
    }
  }
  if (exchange_.answer) {
    for (const policy::IpAddress& address : exchange_.answer->addresses) {
      if (address.bytes() == orig_dst_->ip.bytes()) {
        return true;
      }
    }
  }
  return false;
}

void Session::acquireUpstream(const policy::Decision& decision) {
  transition(ExchangeState::AwaitingUpstream);
  if (connector_state_ != ConnectorState::Idle) {
    transition(ConnectorState::Idle);  // the last exchange's outcome (or this one's, retried)
  }
  UpstreamKey key = upstreamKey();
  bool must_match = mode_ == audit::Mode::Transparent &&
                    sandbox().original_dst == policy::OriginalDst::RequireMatch;
  if (!must_match && takePooled(key)) {
    return;
  }
  if (decision.host.isIpLiteral()) {
    // An allowed literal is its own, already checked, address: no DNS.
    auto answer = std::make_shared<dns::Answer>();
    answer->addresses.push_back(decision.host.address());
    exchange_.answer = std::move(answer);
    if (mode_ == audit::Mode::Transparent &&
        sandbox().original_dst == policy::OriginalDst::RequireMatch &&
        !originalDestinationMatches()) {
      transition(ConnectorState::Failed);
      deny(policy::Reason::DnsMismatch,
           "the sandbox dialled another address than " + exchange_.host);
      return;
    }
    exchange_.usable.push_back(decision.host.address());
    connectNext();
    return;
  }
  transition(ConnectorState::Resolving);
  exchange_.phase_started_ns = uv_hrtime();
  auto resolution = ctx_.resolver->resolve(exchange_.host, [this](dns::LookupResult result) {
    Cork cork(*this);
    lookup_.reset();
    countLookup(result, false);
    onResolved(std::move(result));
  });
  if (auto* now = std::get_if<dns::LookupResult>(&resolution)) {
    countLookup(*now, true);
    onResolved(std::move(*now));
  } else {
    lookup_ = std::move(std::get<std::unique_ptr<dns::Resolver::Lookup>>(resolution));
  }
}

void Session::countLookup(const dns::LookupResult& result, bool at_once) {
  admin::GatewayMetrics& m = ctx_.state->metrics;
  m.dns_lookup.observe((uv_hrtime() - exchange_.phase_started_ns) / 1000);
  if (result) {
    m.countDnsQuery(at_once ? admin::DnsResult::Cached : admin::DnsResult::Ok);
    return;
  }
  switch (result.error()) {
    case dns::DnsError::NotFound:
      m.countDnsQuery(admin::DnsResult::NxDomain);
      break;
    case dns::DnsError::NoAddresses:
      m.countDnsQuery(admin::DnsResult::NoData);
      break;
    case dns::DnsError::Timeout:
      m.countDnsQuery(admin::DnsResult::Timeout);
      break;
    case dns::DnsError::Refused:
    case dns::DnsError::Failed:
    case dns::DnsError::Cancelled:
      m.countDnsQuery(admin::DnsResult::Error);
      break;
  }
}

void Session::onResolved(dns::LookupResult result) {
  if (connector_state_ != ConnectorState::Resolving) {
    return;
  }
  if (!result) {
    transition(ConnectorState::Failed);
    deny(policy::Reason::DnsFailed, "could not resolve " + exchange_.host + " (" +
                                        std::string(dns::toString(result.error())) + ")");
    return;
  }
  exchange_.answer = std::move(result).value();
  const auto& addresses = exchange_.answer->addresses;
  policy::Decision d = decideRequest(addresses, true);
  if (!d.forwards()) {
    transition(ConnectorState::Failed);
    deny(d.reason, explainDenial(d.reason, sandbox().name, exchange_.host, exchange_.method,
                                 exchange_.origin_target));
    return;
  }
  exchange_.matched_rule = d.rule;
  if (mode_ == audit::Mode::Transparent &&
      sandbox().original_dst == policy::OriginalDst::RequireMatch) {
    if (!originalDestinationMatches()) {
      transition(ConnectorState::Failed);
      deny(policy::Reason::DnsMismatch,
           "the sandbox dialled " + (orig_dst_ ? orig_dst_->ip.toString() : std::string("?")) +
               ", which is not an address of " + exchange_.host);
      return;
    }
    UpstreamKey key = upstreamKey();
    if (takePooled(key)) {
      return;
    }
  }
  for (std::size_t i = 0; i < addresses.size() && i < policy::kMaxAddresses; ++i) {
    if ((d.usable_addresses >> i) & 1u) {
      exchange_.usable.push_back(addresses[i]);
    }
  }
  connectNext();
}

// Dials the usable addresses in turn: exactly those, never a name, never resolved again.
void Session::connectNext() {
  if (closing()) {
    return;
  }
  if (exchange_.next_address >= exchange_.usable.size()) {
    transition(ConnectorState::Failed);
    upstreamFailed(
        exchange_.saw_timeout ? policy::Reason::UpstreamTimeout : policy::Reason::UpstreamConnect,
        "no usable address accepted the connection");
    return;
  }
  policy::Endpoint to{exchange_.usable[exchange_.next_address++], exchange_.port};
  UpstreamKey key = upstreamKey();
  upstream_ = std::make_unique<UpstreamConnection>(
      ctx_.loop, static_cast<io::TcpStream::Handler*>(this), std::move(key));
  upstream_->address = to;
  upstream_->sandbox_idle = runtime_->idle_upstreams;
  if (connector_state_ != ConnectorState::Connecting) {
    transition(ConnectorState::Connecting);
  }
  SPDLOG_DEBUG("[C{}] connecting to {} for {}", id_, to.toString(), exchange_.host);
  exchange_.phase_started_ns = uv_hrtime();
  if (int rc = upstream_->stream.connect(to); rc != 0) {
    SPDLOG_DEBUG("[C{}] connect {}: {}", id_, to.toString(), uv_strerror(rc));
    retireUpstream();
    connectNext();
    return;
  }
  phase_deadline_ms_ =
      uv_now(ctx_.loop) + static_cast<std::uint64_t>(config().upstream.connect_timeout.count());
  armTimer();
}

void Session::onConnected(io::TcpStream& stream, int status) {
  Cork cork(*this);
  if (!upstream_ || &stream != &upstream_->stream ||
      connector_state_ != ConnectorState::Connecting) {
    return;
  }
  ctx_.state->metrics.upstream_connect.observe((uv_hrtime() - exchange_.phase_started_ns) / 1000);
  if (status != 0) {
    SPDLOG_DEBUG("[C{}] connect {}: {}", id_, upstream_->address.toString(), uv_strerror(status));
    if (status == UV_ETIMEDOUT) {
      exchange_.saw_timeout = true;
    }
    retireUpstream();
    connectNext();
    return;
  }
  phase_deadline_ms_ = 0;
  exchange_.upstream = upstream_->address;
  if (exchange_.scheme == policy::Scheme::Http) {
    transition(ConnectorState::Ready);
    startExchange();
    return;
  }
  // Upstream TLS: SNI H, the chain and the name H verified against upstream.ca_file.
  auto session = tls::TlsSession::client(generation_->upstream_tls.get(), exchange_.host,
                                         ctx_.pool->resumption(upstream_->key));
  if (!session) {
    transition(ConnectorState::Failed);
    upstreamFailed(policy::Reason::UpstreamConnect, session.error());
    return;
  }
  upstream_->tls.emplace(std::move(session).value());
  transition(ConnectorState::Handshaking);
  phase_deadline_ms_ =
      uv_now(ctx_.loop) + static_cast<std::uint64_t>(config().upstream.connect_timeout.count());
  armTimer();
  pumpUpstreamTls();
}

void Session::flushUpstreamTls() {
  if (!upstream_ || !upstream_->tls) {
    return;
  }
  std::span<const char> out = upstream_->tls->peekCiphertext();
  upstream_->stream.write(out);
  upstream_->tls->consumeCiphertext(out.size());
}

void Session::pumpUpstreamTls() {
  tls::HandshakeStatus status = upstream_->tls->handshake();
  flushUpstreamTls();
  if (status == tls::HandshakeStatus::WantIo) {
    return;
  }
  if (status == tls::HandshakeStatus::Failed) {
    transition(ConnectorState::Failed);
    const tls::Failure& failure = upstream_->tls->failure();
    upstreamFailed(failure.kind == tls::FailureKind::Certificate ? policy::Reason::UpstreamCert
                                                                 : policy::Reason::UpstreamConnect,
                   failure.detail);
    return;
  }
  phase_deadline_ms_ = 0;
  transition(ConnectorState::Ready);
  startExchange();
}

}  // namespace sluice::proxy::session
