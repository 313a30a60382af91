#include "proxy/session/http1/http1_server_codec.h"

#include <spdlog/spdlog.h>

#include "proxy/http/head_writer.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/session/exchange/request_target.h"
#include "proxy/session/exchange/secret_mask.h"

namespace sluice::proxy::session {

Http1ServerCodec::Http1ServerCodec(CodecHost& host, std::size_t max_header_bytes)
    : CodecExchangeHost(host),
      host_(host),
      exchange_(static_cast<ExchangeHost&>(*this), *this, max_header_bytes),
      parser_(max_header_bytes) {}

bool Http1ServerCodec::feed(std::span<const char> plaintext) {
  if (tunneling() && pending() == 0) {
    host_.noteProgress();
    exchange_.onRequestBody(plaintext);  // no copy: the upstream channel writes it on
    return true;
  }
  plain_.append(plaintext.data(), plaintext.size());
  return true;
}

bool Http1ServerCodec::tunneling() const {
  return host_.takesRequests() && exchange_.state() == ExchangeState::Tunneling;
}

void Http1ServerCodec::relayHeld() {
  if (pending() == 0) {
    return;
  }
  // Emptied after the upstream channel took the bytes (it writes or copies them before anything
  // it calls can close the connection; closing frees no codec buffer: only releaseBuffers()
  // does, between requests).
  exchange_.onRequestBody(std::span<const char>(plain_.data() + offset_, pending()));
  plain_.clear();
  offset_ = 0;
  host_.noteProgress();
}

bool Http1ServerCodec::mayParse() const {
  if (!host_.takesRequests()) {
    return false;
  }
  switch (exchange_.state()) {
    case ExchangeState::Idle:
    case ExchangeState::Complete:
    case ExchangeState::Denied:
    case ExchangeState::Failed:
      return true;  // the next head
    default:
      return exchange_.takesBody();  // the body; deciding or waiting for an upstream: it waits
  }
}

bool Http1ServerCodec::wantsBytes() const {
  switch (exchange_.state()) {
    case ExchangeState::Idle:
    case ExchangeState::Deciding:
    case ExchangeState::Complete:
    case ExchangeState::Denied:
    case ExchangeState::Failed:
      return true;  // the next request head
    case ExchangeState::HoldingBody:
      return exchange_.holdsMore();
    case ExchangeState::AwaitingUpstream:
      // A head waits for DNS or a connection: read nothing more meanwhile. (Not while the
      // connector only looks at the parked or a pooled connection: that takes no time, and
      // stopping and restarting the reads for it would cost two epoll_ctl calls per request.)
      return !exchange_.connectorWorking();
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
    case ExchangeState::FinishingRequest:
    case ExchangeState::Tunneling:
      // The body (or the WebSocket's bytes) is read as fast as the upstream takes it.
      return !exchange_.upstreamBackedUp();
    case ExchangeState::AwaitingResponse:
    case ExchangeState::HoldingResponse:
    case ExchangeState::Responding:
      // The request is complete. Reading goes on, so that the next request of a keep-alive
      // client does not cost two epoll_ctl calls to stop and restart, but only while little is
      // buffered: a pipelining client gets at most kPipelineBudget plus one read held for it.
      return pending() < kPipelineBudget;
  }
  return false;
}

// Feeds buffered client plaintext to the request parser for as long as the states let it.
void Http1ServerCodec::process() {
  if (tunneling()) {
    relayHeld();  // (what a client sent before the 101 came is the WebSocket's first bytes)
    return;
  }
  while (mayParse()) {
    std::span<const char> pending(plain_.data() + offset_, plain_.size() - offset_);
    if (pending.empty() && !message_end_pending_) {
      break;
    }
    message_end_pending_ = false;
    http::ParseEvent event = parser_.feed(pending, *this);
    offset_ += event.consumed;
    if (event.consumed > 0) {
      host_.noteProgress();  // request bytes used: a head (bounded on its own) or a body
    }
    if (host_.closing()) {
      return;
    }
    if (event.kind == http::EventKind::NeedMore) {
      if (exchange_.holdingDone()) {
        exchange_.finishHolding();  // it goes on parsing itself once forwarding has started
        return;
      }
      if (event.consumed > 0) {
        host_.onHeadBegun();
      }
      break;
    }
    if (event.kind == http::EventKind::Error) {
      onBadRequest(event.error == http::ParseError::HeaderTooLarge ? policy::Reason::HeaderTooLarge
                                                                   : policy::Reason::BadRequest,
                   event.detail);
      return;
    }
    if (event.kind == http::EventKind::ConnectHead) {
      if (host_.awaitsProxyHead()) {
        // The tunnel's first bytes, if they came with the head, are the tunnel's: never parsed.
        const std::string_view rest = std::string_view(plain_).substr(offset_);
        host_.onConnectHead(parser_.head(), rest);
        plain_.clear();
        offset_ = 0;
      } else {
        refuseInnerConnect(parser_.head());
      }
    } else if (event.kind == http::EventKind::HeadComplete) {
      message_end_pending_ = true;
      to_client_ = http::ResponseFraming::None;
      if (!parser_.head().keep_alive) {
        host_.closeAfterExchange();  // Connection: close, or HTTP/1.0 without keep-alive
      }
      onHead(parser_.head());
    } else if (event.kind == http::EventKind::MessageComplete) {
      exchange_.onRequestEnd();
    }
    if (host_.closing() || !host_.takesRequests()) {
      return;
    }
    if (exchange_.holdingDone()) {
      exchange_.finishHolding();
      return;
    }
  }
  // Compact: everything before the offset has been used.
  if (offset_ == plain_.size()) {
    plain_.clear();
    offset_ = 0;
  } else if (offset_ > 16 * 1024) {
    plain_.erase(0, offset_);
    offset_ = 0;
  }
}

void Http1ServerCodec::onHead(const http::RequestHead& head) {
  if (host_.awaitsProxyHead()) {
    host_.onProxyHead();  // an absolute-form request: forward mode, each names its own host
  }
  switch (host_.admitRequest()) {
    case Admission::Admit:
      break;
    case Admission::Refuse:
    case Admission::Shed:        // (not after a refusal: an HTTP/1.1 connection ends with it)
      host_.finishConnection();  // (the sandbox is gone: nothing is answered)
      return;
    case Admission::AuditUnavailable:
      exchange_.beginRecord(false);
      describeRefusedHead();  // what was asked, for its record
      exchange_.deny(policy::Reason::AuditUnavailable, kAuditUnavailableDetail);
      return;
  }
  exchange_.startRequest(head, host_.generation().config->audit.hash_bodies);
}

// sluice opens no tunnel inside a tunnel, nor on a redirected connection.
void Http1ServerCodec::refuseInnerConnect(const http::RequestHead& head) {
  exchange_.beginRecord(false);
  RequestRecord& record = exchange_.record();
  record.method = "CONNECT";
  record.url.assign("https://").append(head.connect_authority);
  record.scheme = policy::Scheme::Https;
  if (head.host_count == 1) {
    record.host_header.emplace(head.host);
  }
  exchange_.deny(policy::Reason::BadRequest, host_.facts().mode == audit::Mode::Transparent
                                                 ? "CONNECT on a redirected connection"
                                                 : "CONNECT inside a tunnel");
}

void Http1ServerCodec::onBadRequest(policy::Reason reason, std::string_view detail) {
  SPDLOG_DEBUG("[C{}] bad request: {}", host_.facts().id, detail);
  if (!exchange_.inFlight()) {
    exchange_.beginRecord(false);
    describeRefusedHead();
  }
  exchange_.deny(reason, detail);
}

void Http1ServerCodec::describeRefusedHead() {
  audit::Mode mode = host_.facts().mode;
  recordRefusedHead(parser_.partialHead(), host_.facts(), host_.awaitsProxyHead(),
                    exchange_.record(), mode);
  if (mode != host_.facts().mode) {
    host_.noteProxyMode(mode);
  }
}

void Http1ServerCodec::onExchangeOver(ExchangeState outcome) {
  if (outcome == ExchangeState::Denied) {
    host_.finishConnection();  // a denied connection is not kept (docs/wire.md#denials)
    return;
  }
  if (outcome == ExchangeState::Complete && host_.onRequestsOver()) {
    process();  // a pipelined request may already be here
  }
}

void Http1ServerCodec::onPeerDrained() {
  if (readingRequestBody(exchange_.state())) {
    process();
  }
}

void Http1ServerCodec::onTimeout(const Expired& expired) {
  if (exchange_.onTimeout(expired.request)) {
    return;  // a connect deadline (the next address), or no answer in time
  }
  // A request head took too long, or the connection idled between requests (or while its
  // request body was held): nothing was asked, so nothing is answered.
  host_.noteTunnelEnd(audit::Error::TimedOut);
  host_.close(expired.phase ? "handshake or request head too slow" : "idle timeout");
}

void Http1ServerCodec::onClientEnd(ClientEnd how) {
  if (!exchange_.inFlight()) {
    // Nothing decided yet (no head, or only part of one): nothing to finish.
    if (how == ClientEnd::Eof) {
      host_.close("client closed");
    } else {
      host_.finishConnection();
    }
    return;
  }
  switch (how) {
    case ClientEnd::Eof:
      exchange_.onClientClosed();  // finish what can be finished, then close
      return;
    case ClientEnd::CloseNotify:
      // The answer to the request in flight can still be sent.
      if (exchange_.state() == ExchangeState::Tunneling) {
        exchange_.onClientClosed();  // close_notify ends the client's side of a WebSocket
      }
      return;
    case ClientEnd::TlsFailed:
      host_.finishConnection();  // nothing more can be said
      return;
  }
}

void Http1ServerCodec::onRequestBody(std::span<const char> data) { exchange_.onRequestBody(data); }

void Http1ServerCodec::releaseBuffers() {
  plain_ = std::string();
  offset_ = 0;
  scratch_ = std::string();
  exchange_.releaseBuffers();
}

void Http1ServerCodec::startHead() {
  scratch_.clear();
  if (scratch_.capacity() < kHeadReserve) {
    scratch_.reserve(kHeadReserve);  // one allocation, not one per doubling, for a fresh buffer
  }
}

void Http1ServerCodec::sendContinue() { host_.sendClient("HTTP/1.1 100 Continue\r\n\r\n"); }

void Http1ServerCodec::sendInterimHead(const http::ResponseHead& head, SecretMask& mask) {
  startHead();
  http::writeResponseHead(scratch_, head, http::ResponseFraming::None, false);
  sendHead(scratch_, false, mask);
}

void Http1ServerCodec::sendResponseHead(const http::ResponseHead& head, SecretMask& mask) {
  switch (head.framing) {
    case http::ResponseFraming::ContentLength:
      to_client_ = http::ResponseFraming::ContentLength;
      break;
    case http::ResponseFraming::Chunked:
    case http::ResponseFraming::UntilClose:
      to_client_ = http::ResponseFraming::Chunked;  // re-chunked: the client keeps its
      break;                                        // connection
    case http::ResponseFraming::Switched:
      to_client_ = http::ResponseFraming::Switched;  // raw: the WebSocket's bytes follow
      break;
    case http::ResponseFraming::None:
      // A HEAD or 304 answer has no body but keeps its Content-Length: the length the GET
      // would have had (RFC 9110 section 8.6). Nothing but the header is sent.
      to_client_ = head.has_content_length ? http::ResponseFraming::ContentLength
                                           : http::ResponseFraming::None;
      break;
  }
  startHead();
  http::writeResponseHead(scratch_, head, to_client_, host_.closesAfterExchange());
  // A bodiless answer (HEAD, 204, 304, Content-Length: 0) is complete with its head.
  const bool bodiless =
      head.framing == http::ResponseFraming::None ||
      (head.framing == http::ResponseFraming::ContentLength && head.content_length == 0);
  sendHead(scratch_, bodiless, mask);
}

void Http1ServerCodec::sendHead(std::string_view head, bool completes_response, SecretMask& mask) {
  std::string_view bytes = head;
  if (mask.active()) {
    // The head is a text of its own: masked whole, then the mask starts over for the body.
    masked_.clear();
    mask.feed(std::span<const char>(head.data(), head.size()), masked_);
    mask.finish(masked_);
    bytes = masked_;
  }
  if (completes_response) {
    host_.sendClientFinal(bytes);
  } else {
    host_.sendClient(bytes);
  }
}

void Http1ServerCodec::sendResponseBody(std::span<const char> data, bool completes) {
  std::string_view bytes(data.data(), data.size());
  if (to_client_ == http::ResponseFraming::Chunked) {
    scratch_.clear();
    http::writeChunk(scratch_, data);
    bytes = scratch_;
  }
  if (completes) {
    host_.sendClientFinal(bytes);
  } else {
    host_.sendClient(bytes);
  }
}

void Http1ServerCodec::endResponse(const http::HeaderBlock* trailers) {
  if (to_client_ != http::ResponseFraming::Chunked) {
    return;
  }
  if (trailers == nullptr || trailers->empty()) {
    host_.sendClientFinal(http::kLastChunk);
    return;
  }
  scratch_.clear();
  http::writeLastChunk(scratch_, *trailers);
  host_.sendClientFinal(scratch_);
}

int Http1ServerCodec::sendDenial(policy::Reason reason, std::string_view detail) {
  // (Connection: close: a denied connection is not kept, and nothing pipelined after it is
  // read: docs/wire.md#denials.)
  scratch_.clear();
  appendDenial(scratch_, reason, detail);
  host_.sendClient(scratch_);
  return policy::reasonInfo(reason).http_status;
}

void Http1ServerCodec::requestCutShort() { host_.closeAfterExchange(); }

// The connection is the WebSocket's now: no HTTP after it (its end closes the connection).
void Http1ServerCodec::switchedProtocols() { host_.closeAfterExchange(); }

}  // namespace sluice::proxy::session
