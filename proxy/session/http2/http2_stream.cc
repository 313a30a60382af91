// An HTTP/2 stream (http2_stream.h): its life, its request side, and its endings. The response
// side is in http2_stream_response.cc.
#include "proxy/session/http2/http2_stream.h"

#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include "proxy/runtime/generation.h"
#include "proxy/session/context/state_change.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/session/exchange/request_target.h"
#include "proxy/session/http2/http2_server_codec.h"

namespace sluice::proxy::session {

Http2Stream::Http2Stream(Http2ServerCodec& codec, ClientSide& connection,
                         std::size_t max_header_bytes)
    : CodecExchangeHost(connection),
      codec_(codec),
      exchange_(static_cast<ExchangeHost&>(*this), *this, max_header_bytes) {
  request_.setMaxListBytes(max_header_bytes);
}

// (The connection's binding, and so its runtime, outlives its codec and the codec's streams.)
Http2Stream::~Http2Stream() { countActive(false); }

void Http2Stream::countActive(bool active) {
  if (counted_ != active) {
    counted_ = active;
    runtime().metrics.h2_client_streams_active.fetch_add(active ? 1 : -1,
                                                         std::memory_order_relaxed);
  }
}

nghttp2_session* Http2Stream::session() const { return codec_.session(); }

void Http2Stream::open(std::int32_t id) {
  id_ = id;
  request_.reset();
  held_.clear();
  received_ = 0;
  // A new stream (perhaps a spare reused): each machine starts over, as in a new object.
  request_side_ = RequestSide::HeadPending;
  response_side_ = ResponseSide::NotBegun;
  life_ = Life::Open;
  generation_.reset();
  view_ = nullptr;
  countActive(true);
  dropBody();
  trailers_.clear();
}

void Http2Stream::releaseBuffers() {
  generation_.reset();  // a spare keeps no generation (its secrets, its audit sink) alive
  view_ = nullptr;
  std::string().swap(held_);
  dropBody();
  std::string().swap(body_);
  std::string().swap(masked_);
  fields_.release();
  trailers_.release();
  exchange_.releaseBuffers();
}

// ---------------------------------------------------------------------------------------------
// The request.

void Http2Stream::beginRefusedRecord() {
  exchange_.beginRecord(generation().config->audit.hash_bodies);
  RequestRecord& record = exchange_.record();
  record.method.assign(request_.method());
  record.origin_target.assign(request_.path());
  if (!request_.authority().empty()) {
    record.host_header.emplace(request_.authority());
  }
  record.scheme = policy::Scheme::Https;
  record.target_host = facts().host;
  record.port = facts().port;
  record.url = "https://" + facts().authority + std::string(urlPath(record.origin_target));
}

void Http2Stream::noteAudited() {
  audit::AuditSink* own = view_ != nullptr ? view_->audit : nullptr;
  if (own != nullptr && own != connection_.sandboxView().audit) {
    own->flush();
  }
  connection_.noteAudited();
}

void Http2Stream::move(RequestSide next) {
  changeState(context(), facts().id, kHttp2RequestMachine, request_side_, next);
}

void Http2Stream::move(ResponseSide next) {
  changeState(context(), facts().id, kHttp2ResponseMachine, response_side_, next);
}

void Http2Stream::move(Life next) {
  changeState(context(), facts().id, kHttp2StreamMachine, life_, next);
}

void Http2Stream::noteProgress() { last_progress_ms_ = uv_now(context().loop); }

std::uint64_t Http2Stream::deadline(std::uint64_t idle_ms) const {
  if (!exchange_.inFlight() || exchange_.waitsForUpstream()) {
    return 0;  // (waiting its turn for an upstream connection is no idleness of its own)
  }
  const std::uint64_t idle = last_progress_ms_ + idle_ms;
  const std::uint64_t dial = exchange_.deadline();
  return dial != 0 && dial < idle ? dial : idle;
}

bool Http2Stream::onTimeout(std::uint64_t now, std::uint64_t idle_ms) {
  if (!exchange_.inFlight() || exchange_.waitsForUpstream()) {
    return false;
  }
  const std::uint64_t dial = exchange_.deadline();
  const bool dial_over = dial != 0 && now >= dial;
  if (!dial_over && now < last_progress_ms_ + idle_ms) {
    return false;
  }
  return exchange_.onTimeout(dial_over);
}

void Http2Stream::onHead(bool end_stream) {
  noteProgress();  // a stream begins: its idle_timeout counts from here
  move(end_stream ? RequestSide::Ended : RequestSide::Receiving);
  const http::Http2RequestBuilder::Outcome outcome = request_.finish(end_stream);
  if (outcome == http::Http2RequestBuilder::Outcome::Malformed) {
    // A stream error, never translated (RFC 9113 §8.1.1); on record like any refused request.
    SPDLOG_DEBUG("[C{}] stream {} malformed: {}", facts().id, id_, request_.malformation());
    beginRefusedRecord();
    exchange_.refuseWithoutAnswer(policy::Reason::BadRequest, request_.malformation());
    resetStream(NGHTTP2_PROTOCOL_ERROR);
    return;
  }
  switch (codec_.host().admitRequest()) {
    case Admission::Admit:
      // Judged, forwarded and recorded under the generation in force now, whatever a reload
      // does to the connection while it is in flight.
      generation_ = codec_.host().holdGeneration();
      view_ = &connection_.sandboxView();
      break;
    case Admission::Refuse:
      // A reload removed the sandbox, or gave it another CA: the connection is to drain, as a
      // stream after its GOAWAY would be, this one is not processed (REFUSED_STREAM: safe to
      // retry, RFC 9113 §8.7) and the client goes to a new connection.
      resetStream(NGHTTP2_REFUSED_STREAM);
      codec_.goAway(NGHTTP2_NO_ERROR);
      return;
    case Admission::AuditUnavailable:
      // No new stream on this connection while the audit log cannot be written: this one is
      // refused and on record, and GOAWAY sends the client to a new connection, which is
      // refused unread once too much is kept (docs/audit.md#when-the-audit-file-cannot-be-written).
      beginRefusedRecord();
      exchange_.deny(policy::Reason::AuditUnavailable, kAuditUnavailableDetail);
      codec_.goAway(NGHTTP2_NO_ERROR);
      return;
    case Admission::Shed:
      resetStream(NGHTTP2_REFUSED_STREAM);  // unprocessed, unrecorded: safe to retry
      codec_.goAway(NGHTTP2_NO_ERROR);
      return;
  }
  if (outcome == http::Http2RequestBuilder::Outcome::Refused) {
    beginRefusedRecord();
    exchange_.deny(request_.refusal().reason, request_.refusal().detail);
    return;
  }
  exchange_.startRequest(request_.head(), generation().config->audit.hash_bodies);
  if (request_side_ == RequestSide::Ended && exchange_.inFlight() && !closing()) {
    deliverHeld();  // a bodiless request: its end
  }
}

bool Http2Stream::takesBody() const {
  if (request_.extendedConnect()) {
    // The DATA of a WebSocket are its bytes: they wait for the origin's 101, as an HTTP/1.1
    // client's bytes after its upgrade request do.
    return exchange_.state() == ExchangeState::Tunneling && !exchange_.upstreamBackedUp();
  }
  return exchange_.takesBody() &&
         (exchange_.state() == ExchangeState::HoldingBody || !exchange_.upstreamBackedUp());
}

bool Http2Stream::takesEnd() const {
  switch (exchange_.state()) {
    case ExchangeState::HoldingBody:
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
    case ExchangeState::FinishingRequest:
      return true;
    default:
      return false;  // a bodiless request's end goes with its head once forwarding starts
  }
}

void Http2Stream::dropHeld() {
  if (!held_.empty()) {
    nghttp2_session_consume(session(), id_, held_.size());  // the window goes back
    held_.clear();
  }
}

void Http2Stream::onData(std::span<const char> data) {
  received_ += data.size();
  if (request_side_ == RequestSide::Discarding || !exchange_.inFlight()) {
    nghttp2_session_consume(session(), id_, data.size());  // dropped: the window goes back
    return;
  }
  if (held_.empty() && takesBody()) {
    noteProgress();  // request bytes taken
    exchange_.onRequestBody(data);
    if (!closing()) {
      nghttp2_session_consume(session(), id_, data.size());
    }
    if (exchange_.holdingDone()) {
      exchange_.finishHolding();
    }
    return;
  }
  held_.append(data.data(), data.size());  // at most a window: nghttp2 enforces it
}

void Http2Stream::onEndOfRequest() {
  if (request_side_ != RequestSide::Receiving) {
    return;  // (Discarding: answered already, the rest goes nowhere)
  }
  move(RequestSide::Ended);
  using Trailers = http::Http2RequestBuilder::Trailers;
  const Trailers trailers = request_.trailersState();
  if ((trailers == Trailers::Malformed || trailers == Trailers::TooLarge) && exchange_.inFlight()) {
    refuseTrailers(trailers == Trailers::Malformed);
    return;
  }
  deliverHeld();
}

// A trailer section sluice will not pass on ends the request there: its upstream never gets
// the request's end. Malformed (RFC 9113 §8.1.1): a stream error, on record as bad_request.
// Over max_header_bytes: 431 header_too_large while no answer began, else the stream is cut.
void Http2Stream::refuseTrailers(bool malformed) {
  if (!malformed && !exchange_.responseBegun()) {
    exchange_.deny(policy::Reason::HeaderTooLarge,
                   "the request's trailer section is over max_header_bytes");
    return;
  }
  SPDLOG_DEBUG("[C{}] stream {} trailers refused: {}", facts().id, id_,
               malformed ? request_.malformation() : "over max_header_bytes");
  RequestRecord& record = exchange_.record();
  record.verdict = policy::Verdict::Deny;
  record.refusal = malformed ? policy::Reason::BadRequest : policy::Reason::HeaderTooLarge;
  if (!malformed) {
    codec_.countProvokedReset();  // (PROTOCOL_ERROR is counted as it is sent)
  }
  cut(malformed ? NGHTTP2_PROTOCOL_ERROR : NGHTTP2_INTERNAL_ERROR);
}

// Handed over whole: the exchange holds or forwards it (the upstream queue takes what it cannot
// write at once); the window goes back for all of it. False: the stream closed meanwhile.
bool Http2Stream::handOverHeld() {
  if (held_.empty() || !takesBody()) {
    return true;
  }
  const std::size_t n = held_.size();
  noteProgress();  // request bytes taken
  exchange_.onRequestBody(std::span<const char>(held_.data(), n));
  held_.clear();
  if (closing()) {
    return false;
  }
  nghttp2_session_consume(session(), id_, n);
  return true;
}

void Http2Stream::deliverHeld() {
  if (life_ != Life::Open || !exchange_.inFlight()) {
    return;
  }
  if (request_.extendedConnect()) {
    relayWebSocket();
    return;
  }
  if (!handOverHeld()) {
    return;
  }
  if (held_.empty() && request_side_ == RequestSide::Ended && takesEnd()) {
    move(RequestSide::Delivered);
    const bool trailers = request_.trailersState() == http::Http2RequestBuilder::Trailers::Ready;
    exchange_.onRequestEnd(trailers ? &request_.trailers() : nullptr);
  }
  if (!closing() && exchange_.holdingDone()) {
    exchange_.finishHolding();
  }
}

// An extended CONNECT (docs/wire.md#websocket): its head is the whole upgrade request (the
// exchange hears its end as soon as it forwards it); once the origin switched, DATA go to it as
// the WebSocket's bytes, and the client's END_STREAM ends the client's side of it.
void Http2Stream::relayWebSocket() {
  if (exchange_.state() == ExchangeState::SendingRequest) {
    exchange_.onRequestEnd();
  }
  if (closing() || exchange_.state() != ExchangeState::Tunneling) {
    return;
  }
  if (!handOverHeld()) {
    return;
  }
  if (held_.empty() && request_side_ == RequestSide::Ended) {
    move(RequestSide::Delivered);
    exchange_.onClientClosed();
  }
}

void Http2Stream::requestCutShort() {
  if (request_side_ == RequestSide::Receiving) {
    move(RequestSide::Discarding);
    dropHeld();
  }
}

void Http2Stream::onClosed(std::uint32_t error_code) {
  if (life_ == Life::Closed) {
    return;  // (ended when the client went; nghttp2 closes it later)
  }
  const bool before_head = request_side_ == RequestSide::HeadPending;
  // Open until now: not reset by sluice, so by the client (its RST_STREAM), or the connection
  // went (onClientGone).
  const bool reset_by_client = life_ == Life::Open && error_code != NGHTTP2_NO_ERROR;
  move(Life::Closed);
  countActive(false);
  dropBody();  // nghttp2 pulls nothing more of it
  if (exchange_.inFlight()) {
    // The client reset the stream (or the connection went): the request is cut short, on record
    // with what was sent so far; its upstream cannot be reused.
    SPDLOG_DEBUG("[C{}] stream {} closed in flight (error {})", facts().id, id_, error_code);
    const http::RequestHead& head = request_.head();
    const bool length_broken =
        head.framing == http::BodyFraming::ContentLength && received_ != head.content_length;
    if (error_code == NGHTTP2_PROTOCOL_ERROR &&
        (length_broken || request_side_ == RequestSide::Receiving)) {
      // nghttp2 reset it mid-request: its DATA broke the content-length, or its trailer section
      // was malformed (RFC 9113 §8.1.1; nghttp2 checks those fields before sluice sees any). A
      // bad request, on record as HTTP/1.1's malformed chunked body is; the origin never got it
      // whole.
      exchange_.record().verdict = policy::Verdict::Deny;
      exchange_.record().refusal = policy::Reason::BadRequest;
    } else if (reset_by_client) {
      // A gRPC call's deadline or cancel, an abandoned download: on record as such
      // (docs/audit.md#errors), not as a stream that simply got no answer.
      exchange_.record().error = audit::Error::ClientReset;
    }
    exchange_.abandon();
    exchange_.dropUpstream();
  } else if (before_head) {
    // nghttp2 reset a stream whose head it found malformed (RFC 9113 §8.1.1) before sluice saw
    // it whole: on record as a refused request, with what its head showed.
    beginRefusedRecord();
    exchange_.refuseWithoutAnswer(policy::Reason::BadRequest, "a malformed stream head");
  }
  dropHeld();
  codec_.onStreamOver(*this);
}

void Http2Stream::onClientGone() {
  if (life_ == Life::Closed || request_side_ == RequestSide::Ended ||
      request_side_ == RequestSide::Delivered) {
    return;
  }
  if (exchange_.inFlight()) {
    exchange_.onClientClosed();  // mid-request: as an HTTP/1.1 client that closed mid-body
  }
  // nghttp2 will not close it: no frame of it can come any more (and none reset it).
  onClosed(NGHTTP2_NO_ERROR);
}

// ---------------------------------------------------------------------------------------------
// Endings.

void Http2Stream::resetStream(std::uint32_t error_code) {
  if (life_ != Life::Open) {
    return;
  }
  move(Life::Reset);
  dropHeld();
  nghttp2_submit_rst_stream(session(), NGHTTP2_FLAG_NONE, id_, error_code);
}

// The exchange gives up on its stream (a failure after the response began, an idle response):
// the stream ends with RST_STREAM; the connection and its other streams go on.
void Http2Stream::close(std::string_view why) {
  SPDLOG_DEBUG("[C{}] stream {} reset: {}", facts().id, id_, why);
  cut(NGHTTP2_INTERNAL_ERROR);
}

void Http2Stream::cut(std::uint32_t error_code) {
  resetStream(error_code);
  exchange_.abandon();  // on record with what was sent
  exchange_.dropUpstream();
}

void Http2Stream::park(std::unique_ptr<UpstreamConnection> connection) {
  if (connection_.keepsUpstreams()) {
    context().pool->put(std::move(connection));
  } else {
    connection_.retire(std::move(connection));
  }
}

void Http2Stream::onExchangeOver(ExchangeState) {
  if (request_side_ == RequestSide::Receiving) {
    // Answered before the body ended: the rest is read and dropped (RFC 9113 §8.1).
    move(RequestSide::Discarding);
    dropHeld();
  }
  codec_.onStreamOver(*this);
}

}  // namespace sluice::proxy::session
