#include "proxy/session/exchange/connector.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/upstream/http2_upstream_session.h"
#include "proxy/session/context/state_change.h"

namespace sluice::proxy::session {

Connector::Connector(ClientSide& host, ConnectorClient& client) : host_(host), client_(client) {}

Connector::~Connector() {
  lookup_.reset();  // cancel-on-destroy: the resolver will not call back
  if (state_ == ConnectorState::Joining) {
    host_.context().h2_upstreams->leave(key(), *this);
  }
  endSharedDial();
}

bool Connector::transition(ConnectorState next) {
  const bool was_working = working();
  const bool was_handshaking = state_ == ConnectorState::Handshaking;
  if (!changeState(host_.context(), host_.facts().id, kConnectorMachine, state_, next)) {
    return false;
  }
  if (!working()) {
    deadline_ms_ = 0;
  }
  if (next == ConnectorState::Failed || next == ConnectorState::Idle) {
    endSharedDial();  // (a dial that is ready ends it once its exchange adopted it: ready())
  }
  // The client is not read while the connector works, the connection being handshaken is.
  if (working() != was_working || was_handshaking || next == ConnectorState::Handshaking) {
    host_.updateReading();
  }
  return true;
}

UpstreamKey Connector::key() const {
  return UpstreamKey{host_.runtime().id, host_.generation().upstream_trust_id, name_, target_.port,
                     target_.tls};
}

void Connector::start(const Target& target) {
  if (state_ != ConnectorState::Idle) {
    transition(ConnectorState::Idle);  // the last exchange's outcome (or this one's, retried)
  }
  target_ = target;
  name_.assign(target.host);
  target_.host = name_;
  rule_.reset();
  answer_.reset();
  usable_.clear();
  next_address_ = 0;
  saw_timeout_ = false;
  waited_ = false;
  const policy::Sandbox& sandbox = *host_.sandboxView().sandbox;
  const bool must_match = host_.facts().mode == audit::Mode::Transparent &&
                          sandbox.original_dst == policy::OriginalDst::RequireMatch;
  if (!must_match && takeReused()) {
    return;
  }
  const policy::Decision& decision = *target.decision;
  target_.decision = nullptr;  // (valid only during start())
  literal_.reset();
  if (decision.host.isIpLiteral()) {
    literal_ = decision.host.address();
  }
  if (!must_match && !target_.fresh && target_.h2 && joinDial(false)) {
    transition(ConnectorState::Joining);  // another request of this worker dials the key
    return;
  }
  dial();
}

bool Connector::joinDialBeforeConnecting(bool may_join) {
  if (may_join && !target_.fresh && target_.h2 && joinDial(waited_)) {
    transition(ConnectorState::Joining);
    return true;
  }
  if (target_.h2 && host_.context().h2_upstreams != nullptr) {
    shareDial();
  }
  return false;
}

void Connector::onDialOver() {
  if (state_ != ConnectorState::Joining) {
    return;
  }
  Cork cork(host_);
  waited_ = true;
  if (takeSession(key())) {
    return;
  }
  if (joinDial(true)) {
    return;  // another dial to the key is still under way
  }
  if (!usable_.empty()) {
    // It waited with its own answer (it joined once resolved): no second lookup.
    shareDial();
    connectNext();
    return;
  }
  dial();
}

bool Connector::joinDial(bool again) {
  Http2UpstreamSessions* sessions = host_.context().h2_upstreams;
  if (sessions == nullptr) {
    return false;
  }
  // Known to the sandbox, not only to this worker: the client's connection may be another
  // worker's than the one that dialled the origin (SandboxRuntime::origin_protocols).
  const OriginProtocol chose = host_.runtime().origin_protocols.chose(
      host_.generation().upstream_trust_id, name_, target_.port);
  if (chose == OriginProtocol::Http1 || (again && chose != OriginProtocol::H2)) {
    return false;
  }
  return sessions->join(key(), *this);
}

void Connector::dial() {
  const bool must_match = host_.facts().mode == audit::Mode::Transparent &&
                          host_.sandboxView().sandbox->original_dst ==
                              policy::OriginalDst::RequireMatch;
  if (literal_) {
    // An allowed literal is its own, already checked, address: no DNS.
    auto answer = std::make_shared<dns::Answer>();
    answer->addresses.push_back(*literal_);
    answer_ = std::move(answer);
    client_.onAnswer(answer_);
    if (must_match && !originalDestinationMatches()) {
      transition(ConnectorState::Failed);
      client_.onUpstreamRefused(policy::Reason::DnsMismatch,
                                "the sandbox dialled another address than " + name_);
      return;
    }
    usable_.push_back(*literal_);
    if (target_.h2 && host_.context().h2_upstreams != nullptr) {
      shareDial();
    }
    connectNext();
    return;
  }
  transition(ConnectorState::Resolving);
  phase_started_ns_ = uv_hrtime();
  auto resolution = host_.context().resolver->resolve(name_, [this](dns::LookupResult result) {
    Cork cork(host_);
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

void Connector::cancel() {
  lookup_.reset();  // cancel-on-destroy: the resolver will not call back
  if (state_ == ConnectorState::Joining) {
    host_.context().h2_upstreams->leave(key(), *this);
  }
  closeDialled();
  if (working()) {
    transition(ConnectorState::Idle);
  }
}

void Connector::expire() {
  if (!working()) {
    return;
  }
  if (state_ == ConnectorState::Joining) {
    host_.context().h2_upstreams->leave(key(), *this);
  }
  lookup_.reset();
  closeDialled();
  transition(ConnectorState::Failed);
}

void Connector::closeDialled() {
  if (dialled_) {
    host_.retire(std::move(dialled_));
  }
}

// This client's parked upstream or an idle pooled connection for the key, if one passes this
// request's own checks: it was opened for an earlier request, perhaps under another rule with
// other `ips` (or under none, in report mode).
bool Connector::takeReused() {
  if (target_.fresh) {
    // Sent again because a reused connection closed unanswered: the origin may have closed
    // its other idle connections too. This one is dialled.
    return false;
  }
  const UpstreamKey k = key();
  if (target_.h2 && takeSession(k)) {
    return true;
  }
  std::unique_ptr<UpstreamConnection> reused = host_.takeParked(k);
  if (!reused) {
    reused = host_.context().pool->take(k, this);
  }
  if (!reused) {
    return false;
  }
  policy::IpAddress address = reused->address.ip;
  policy::Decision d =
      client_.decideWith(std::span<const policy::IpAddress>(&address, 1), target_.decision);
  if (!d.forwards() || (d.usable_addresses & 1u) == 0) {
    host_.context().pool->put(std::move(reused));  // still good for the requests it was checked
    return false;                                  // for
  }
  rule_ = d.rule;
  client_.onConnectedTo(reused->address);
  ready(std::move(reused), UpstreamOrigin::Reused);
  return true;
}

// A shared h2 session for the key, if its address passes this request's own checks (as a pooled
// connection's must).
bool Connector::takeSession(const UpstreamKey& key) {
  Http2UpstreamSessions* sessions = host_.context().h2_upstreams;
  Http2UpstreamSession* session = sessions != nullptr ? sessions->find(key) : nullptr;
  if (session == nullptr) {
    return false;
  }
  policy::IpAddress address = session->address().ip;
  policy::Decision d =
      client_.decideWith(std::span<const policy::IpAddress>(&address, 1), target_.decision);
  if (!d.forwards() || (d.usable_addresses & 1u) == 0) {
    return false;
  }
  rule_ = d.rule;
  client_.onConnectedTo(session->address());
  transition(ConnectorState::Ready);
  client_.onSessionReady(*session, rule_);
  return true;
}

// original_dst: require_match (docs/wire.md#transparent-mode): the address the sandbox dialled
// must be one of sluice's own answers for H, or the address sluice's resolver gave the sandbox
// for every name.
bool Connector::originalDestinationMatches() const {
  const std::optional<policy::Endpoint>& orig_dst = host_.facts().orig_dst;
  if (!orig_dst) {
    return false;
  }
  const policy::Sandbox& s = *host_.sandboxView().sandbox;
  for (const auto& own : {s.dns_listen, s.transparent}) {
    if (own && own->ip == orig_dst->ip) {
      return true;
    }
  }
  if (answer_) {
    for (const policy::IpAddress& address : answer_->addresses) {
      if (address.bytes() == orig_dst->ip.bytes()) {
        return true;
      }
    }
  }
  return false;
}

void Connector::countLookup(const dns::LookupResult& result, bool at_once) {
  admin::GatewayMetrics& m = host_.context().state->metrics;
  m.dns_lookup.observe((uv_hrtime() - phase_started_ns_) / 1000);
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

void Connector::onResolved(dns::LookupResult result) {
  if (state_ != ConnectorState::Resolving) {
    return;
  }
  if (!result) {
    transition(ConnectorState::Failed);
    client_.onUpstreamRefused(
        policy::Reason::DnsFailed,
        "could not resolve " + name_ + " (" + std::string(dns::toString(result.error())) + ")");
    return;
  }
  answer_ = std::move(result).value();
  client_.onAnswer(answer_);
  const auto& addresses = answer_->addresses;
  policy::Decision d = client_.decideWith(addresses, nullptr);  // (start() has returned)
  if (!d.forwards()) {
    transition(ConnectorState::Failed);
    client_.onUpstreamRefused(d);
    return;
  }
  rule_ = d.rule;
  const std::optional<policy::Endpoint>& orig_dst = host_.facts().orig_dst;
  const bool must_match =
      host_.facts().mode == audit::Mode::Transparent &&
      host_.sandboxView().sandbox->original_dst == policy::OriginalDst::RequireMatch;
  if (must_match) {
    if (!originalDestinationMatches()) {
      transition(ConnectorState::Failed);
      client_.onUpstreamRefused(policy::Reason::DnsMismatch,
                                "the sandbox dialled " +
                                    (orig_dst ? orig_dst->ip.toString() : std::string("?")) +
                                    ", which is not an address of " + name_);
      return;
    }
    if (takeReused()) {
      return;
    }
  }
  for (std::size_t i = 0; i < addresses.size() && i < policy::kMaxAddresses; ++i) {
    if ((d.usable_addresses >> i) & 1u) {
      usable_.push_back(addresses[i]);
    }
  }
  // A dial is shared once past its lookup, never before: a request that waited for another's
  // lookup would, if it failed, look up again and fail at twice the time (every request's
  // lookup of a name is one query anyway: the resolver joins them).
  if (joinDialBeforeConnecting(!must_match)) {
    return;
  }
  connectNext();
}

// Dials the usable addresses in turn: exactly those, never a name, never resolved again.
void Connector::connectNext() {
  if (host_.closing()) {
    return;
  }
  if (next_address_ >= usable_.size()) {
    fail(saw_timeout_ ? policy::Reason::UpstreamTimeout : policy::Reason::UpstreamConnect,
         "no usable address accepted the connection");
    return;
  }
  policy::Endpoint to{usable_[next_address_++], target_.port};
  dialled_ = std::make_unique<UpstreamConnection>(
      host_.context().loop, static_cast<io::TcpStream::Handler*>(this), key());
  dialled_->address = to;
  dialled_->sandbox_idle = host_.runtime().idle_upstreams;
  if (state_ != ConnectorState::Connecting) {
    transition(ConnectorState::Connecting);
  }
  SPDLOG_DEBUG("[C{}] connecting to {} for {}", host_.facts().id, to.toString(), name_);
  phase_started_ns_ = uv_hrtime();
  if (int rc = dialled_->stream.connect(to); rc != 0) {
    SPDLOG_DEBUG("[C{}] connect {}: {}", host_.facts().id, to.toString(), uv_strerror(rc));
    closeDialled();
    connectNext();
    return;
  }
  const auto& timeout = host_.generation().config->upstream.connect_timeout;
  deadline_ms_ = uv_now(host_.context().loop) + static_cast<std::uint64_t>(timeout.count());
  host_.armTimer();
}

void Connector::onConnectTimeout() {
  saw_timeout_ = true;  // this address took connect_timeout: try the next
  closeDialled();
  connectNext();
}

void Connector::onConnected(io::TcpStream& stream, int status) {
  Cork cork(host_);
  if (!dialled_ || &stream != &dialled_->stream || state_ != ConnectorState::Connecting) {
    return;
  }
  host_.context().state->metrics.upstream_connect.observe((uv_hrtime() - phase_started_ns_) / 1000);
  if (status != 0) {
    SPDLOG_DEBUG("[C{}] connect {}: {}", host_.facts().id, dialled_->address.toString(),
                 uv_strerror(status));
    if (status == UV_ETIMEDOUT) {
      saw_timeout_ = true;
    }
    closeDialled();
    connectNext();
    return;
  }
  deadline_ms_ = 0;
  client_.onConnectedTo(dialled_->address);
  const UpstreamOrigin origin = target_.fresh ? UpstreamOrigin::Redialled : UpstreamOrigin::Dialled;
  if (!target_.tls) {
    ready(std::move(dialled_), origin);
    return;
  }
  // Upstream TLS: SNI H, the chain and the name H verified against upstream.ca_file.
  const bool h2 = target_.h2 && host_.context().h2_upstreams != nullptr;
  auto session = tls::TlsSession::client(host_.generation().upstream_tls.get(), name_,
                                         host_.context().pool->resumption(dialled_->key),
                                         h2 ? tls::OfferAlpn::H2AndHttp11 : tls::OfferAlpn::Http11);
  if (!session) {
    fail(policy::Reason::UpstreamConnect, session.error());
    return;
  }
  dialled_->tls.emplace(std::move(session).value());
  transition(ConnectorState::Handshaking);
  const auto& timeout = host_.generation().config->upstream.connect_timeout;
  deadline_ms_ = uv_now(host_.context().loop) + static_cast<std::uint64_t>(timeout.count());
  host_.armTimer();
  handshake();
}

void Connector::flushTls() {
  std::span<const char> out = dialled_->tls->peekCiphertext();
  dialled_->stream.write(out);
  dialled_->tls->consumeCiphertext(out.size());
}

void Connector::handshake() {
  tls::HandshakeStatus status = dialled_->tls->handshake();
  flushTls();
  if (status == tls::HandshakeStatus::WantIo) {
    return;
  }
  if (status == tls::HandshakeStatus::Failed) {
    const tls::Failure& failure = dialled_->tls->failure();
    fail(failure.kind == tls::FailureKind::Certificate ? policy::Reason::UpstreamCert
                                                       : policy::Reason::UpstreamConnect,
         failure.detail);
    return;
  }
  ready(std::move(dialled_), target_.fresh ? UpstreamOrigin::Redialled : UpstreamOrigin::Dialled);
}

void Connector::ready(std::unique_ptr<UpstreamConnection> connection, UpstreamOrigin origin) {
  if (shared_dial_ && connection->tls) {
    // A dial that offered h2: what the origin chose decides whether the sandbox's next bursts
    // to it wait for one dial (joinDial).
    host_.runtime().origin_protocols.learn(
        shared_dial_->trust, shared_dial_->host, shared_dial_->port,
        connection->tls->alpn() == tls::kAlpnH2 ? OriginProtocol::H2 : OriginProtocol::Http1);
  }
  transition(ConnectorState::Ready);
  client_.onUpstreamReady(std::move(connection), origin, rule_);
  // Its exchange has adopted the connection as a session if the origin chose h2: the requests
  // that waited for this dial find it now (or dial their own).
  endSharedDial();
}

void Connector::shareDial() {
  if (!shared_dial_) {
    shared_dial_ = key();
    host_.context().h2_upstreams->dialStarted(*shared_dial_);
  }
}

void Connector::endSharedDial() {
  if (shared_dial_) {
    const UpstreamKey dialled = std::move(*shared_dial_);
    shared_dial_.reset();
    host_.context().h2_upstreams->dialOver(dialled);
  }
}

void Connector::fail(policy::Reason reason, std::string_view detail) {
  // `detail` may point into the connection being closed.
  std::string why(detail);
  transition(ConnectorState::Failed);
  closeDialled();
  client_.onUpstreamFailed(reason, why);
}

void Connector::updateReading() {
  if (!dialled_) {
    return;
  }
  if (state_ == ConnectorState::Handshaking && !dialled_->stream.backedUp()) {
    dialled_->stream.startReading();
  } else {
    dialled_->stream.stopReading();
  }
}

void Connector::onRead(io::TcpStream& stream, std::span<const char> data) {
  Cork cork(host_);
  if (state_ == ConnectorState::Handshaking && dialled_ && &stream == &dialled_->stream) {
    dialled_->tls->feed(data);
    handshake();
  }
  host_.updateReading();
}

void Connector::onEof(io::TcpStream& stream) {
  Cork cork(host_);
  if (dialled_ && &stream == &dialled_->stream) {
    fail(policy::Reason::UpstreamConnect, "upstream closed the connection");
  }
}

void Connector::onError(io::TcpStream& stream, int status) {
  Cork cork(host_);
  if (dialled_ && &stream == &dialled_->stream) {
    fail(policy::Reason::UpstreamConnect, uv_strerror(status));
  }
}

void Connector::onDrained(io::TcpStream&) { host_.onPeerDrained(); }

}  // namespace sluice::proxy::session
