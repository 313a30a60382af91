#include "proxy/session/http1_server_codec.h"

#include <spdlog/spdlog.h>

#include "proxy/http/head_writer.h"
#include "proxy/session/denial.h"
#include "proxy/session/exchange.h"
#include "proxy/session/secret_mask.h"

namespace sluice::proxy::session {

Http1ServerCodec::Http1ServerCodec(CodecHost& host, Exchange& exchange,
                                   std::size_t max_header_bytes)
    : host_(host), exchange_(exchange), parser_(max_header_bytes) {}

void Http1ServerCodec::feed(std::span<const char> plaintext) {
  if (tunneling() && pending() == 0) {
    host_.noteProgress();
    exchange_.onRequestBody(plaintext);  // no copy: the upstream channel writes it on
    return;
  }
  plain_.append(plaintext.data(), plaintext.size());
}

bool Http1ServerCodec::tunneling() const {
  return host_.state() == ConnectionState::Serving && exchange_.state() == ExchangeState::Tunneling;
}

void Http1ServerCodec::relayHeld() {
  if (pending() == 0) {
    return;
  }
  // Emptied after the upstream channel took the bytes (it writes or copies them before anything
  // it calls can close the connection; closing frees no codec buffer: only releaseIdleBuffers()
  // does, between requests).
  exchange_.onRequestBody(std::span<const char>(plain_.data() + offset_, pending()));
  plain_.clear();
  offset_ = 0;
  host_.noteProgress();
}

bool Http1ServerCodec::mayParse() const {
  const ConnectionState state = host_.state();
  if (state == ConnectionState::ReadingProxyHead) {
    return true;
  }
  if (state != ConnectionState::Serving) {
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
      host_.onBadRequest(event.error == http::ParseError::HeaderTooLarge
                             ? policy::Reason::HeaderTooLarge
                             : policy::Reason::BadRequest,
                         event.detail);
      return;
    }
    if (event.kind == http::EventKind::ConnectHead) {
      host_.onConnectHead(parser_.head());
    } else if (event.kind == http::EventKind::HeadComplete) {
      message_end_pending_ = true;
      to_client_ = http::ResponseFraming::None;
      if (!parser_.head().keep_alive) {
        host_.closeAfterExchange();  // Connection: close, or HTTP/1.0 without keep-alive
      }
      host_.onRequestHead(parser_.head());
    } else if (event.kind == http::EventKind::MessageComplete) {
      exchange_.onRequestEnd();
    }
    if (host_.closing() || host_.state() == ConnectionState::Lingering) {
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

void Http1ServerCodec::onRequestBody(std::span<const char> data) { exchange_.onRequestBody(data); }

void Http1ServerCodec::dropUnparsed() {
  plain_.clear();
  offset_ = 0;
}

void Http1ServerCodec::releaseBuffers() {
  plain_ = std::string();
  offset_ = 0;
  scratch_ = std::string();
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
