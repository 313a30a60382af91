#include "proxy/session/http2/http2_stream.h"

#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "proxy/http/head_writer.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/session/exchange/request_target.h"
#include "proxy/session/http2/http2_server_codec.h"

namespace sluice::proxy::session {

namespace {

// nghttp2 reads a data source through this: the stream is the source's pointer.
ssize_t readBody(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                 std::uint32_t* flags, nghttp2_data_source* source, void*) {
  bool eof = false;
  const long n = static_cast<Http2Stream*>(source->ptr)->readResponse(buf, length, eof);
  if (eof) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (static_cast<Http2Stream*>(source->ptr)->submitTrailers()) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;  // the trailers' HEADERS ends the stream
    }
  }
  return n;
}

// The gRPC status a refusal reads as (docs/wire.md#grpc): PERMISSION_DENIED for a policy's no,
// the codes that fit the rest.
std::string_view grpcStatusOf(policy::Reason reason) {
  switch (reason) {
    case policy::Reason::RateLimited:
    case policy::Reason::TooManyConnections:
      return "8";  // RESOURCE_EXHAUSTED
    case policy::Reason::UpstreamTimeout:
      return "4";  // DEADLINE_EXCEEDED
    case policy::Reason::DnsFailed:
    case policy::Reason::UpstreamConnect:
    case policy::Reason::UpstreamCert:
    case policy::Reason::AuditUnavailable:
      return "14";  // UNAVAILABLE
    case policy::Reason::BadRequest:
    case policy::Reason::HeaderTooLarge:
      return "3";  // INVALID_ARGUMENT
    default:
      return "7";  // PERMISSION_DENIED
  }
}

// grpc-message is percent-encoded (gRPC's HTTP/2 protocol): everything outside printable ASCII
// and '%' itself.
void appendPercentEncoded(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '%') {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
}

}  // namespace

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
  request_side_ = RequestSide::HeadPending;
  response_side_ = ResponseSide::NotBegun;
  life_ = Life::Open;
  countActive(true);
  dropBody();
  trailers_.clear();
}

void Http2Stream::releaseBuffers() {
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
  request_side_ = end_stream ? RequestSide::Ended : RequestSide::Receiving;
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
      break;
    case Admission::Refuse:
      // A reload: the streams in flight keep the generation they were decided by, so the
      // connection takes up the new one only when none is in flight; until then new streams are
      // refused (REFUSED_STREAM: safe to retry, RFC 9113 §8.7) and GOAWAY sends the client to a
      // new connection, judged by the new generation. It finishes once no stream is left.
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
  request_side_ = RequestSide::Ended;
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
    request_side_ = RequestSide::Delivered;
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
    request_side_ = RequestSide::Delivered;
    exchange_.onClientClosed();
  }
}

void Http2Stream::requestCutShort() {
  if (request_side_ == RequestSide::Receiving) {
    request_side_ = RequestSide::Discarding;
    dropHeld();
  }
}

void Http2Stream::onClosed(std::uint32_t error_code) {
  if (life_ == Life::Closed) {
    return;  // (ended when the client went; nghttp2 closes it later)
  }
  const bool before_head = request_side_ == RequestSide::HeadPending;
  life_ = Life::Closed;
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
  onClosed(NGHTTP2_CANCEL);  // nghttp2 will not close it: no frame of it can come any more
}

// ---------------------------------------------------------------------------------------------
// The response.

bool Http2Stream::backedUp() const {
  return pendingBody() > kHighWater || connection_.budget().full() || codec_.host().clientBackedUp();
}

void Http2Stream::updateUpstreamReading(bool client_backed_up) {
  exchange_.updateUpstreamReading(client_backed_up || pendingBody() > kHighWater ||
                                  budget().full());
}

void Http2Stream::submitHead(int status, bool with_body) {
  const std::span<const nghttp2_nv> nva = fields_.nva();
  int rv = 0;
  if (status < 200) {
    rv = nghttp2_submit_headers(session(), NGHTTP2_FLAG_NONE, id_, nullptr, nva.data(), nva.size(),
                                nullptr);
  } else {
    nghttp2_data_provider provider{};
    provider.source.ptr = this;
    provider.read_callback = readBody;
    response_side_ = with_body ? ResponseSide::Streaming : ResponseSide::Complete;
    rv = nghttp2_submit_response(session(), id_, nva.data(), nva.size(),
                                 with_body ? &provider : nullptr);
  }
  if (rv != 0) {
    SPDLOG_DEBUG("[C{}] stream {}: cannot submit a head: {}", facts().id, id_,
                 nghttp2_strerror(rv));
  }
}

void Http2Stream::sendContinue() {
  fields_.clear();
  fields_.add(":status", "100");
  submitHead(100, false);
}

void Http2Stream::sendInterimHead(const http::ResponseHead& head, SecretMask& mask) {
  sendResponseHead(head, mask);  // (a 1xx: submitHead sends it as non-final HEADERS)
}

void Http2Stream::sendResponseHead(const http::ResponseHead& head, SecretMask& mask) {
  fields_.clear();
  fields_.reserve(256);
  char status[12];  // any int
  // (A 101 to a WebSocket is a 200 on a stream: RFC 8441 §5.)
  const int shown = head.framing == http::ResponseFraming::Switched ? 200 : head.status;
  const std::to_chars_result written = std::to_chars(status, status + sizeof status, shown);
  fields_.add(":status", std::string_view(status, static_cast<std::size_t>(written.ptr - status)));
  for (std::size_t i = 0; i < head.headers.size(); ++i) {
    std::string_view name = head.headers.name(i);
    std::string_view value = head.headers.value(i);
    // What HTTP/1.1 says about its own connection is not HTTP/2's (RFC 9113 §8.2.2); the length
    // stays (it is the body's, and nghttp2 checks nothing of it on a response we send).
    if (http::isHopByHop(name) || http::ascii::iequals(name, "host") ||
        http::ascii::iequals(name, "sec-websocket-accept")) {
      continue;
    }
    if (mask.active()) {
      // Names and values alike, as HTTP/1.1 masks its whole head: an origin may echo a secret
      // in either (docs/wire.md#what-masking-catches-and-what-it-does-not). '*' is a token
      // character, so a masked name is still a field name.
      masked_.clear();
      mask.feed(std::span<const char>(name.data(), name.size()), masked_);
      mask.finish(masked_);
      const std::size_t name_length = masked_.size();
      mask.feed(std::span<const char>(value.data(), value.size()), masked_);
      mask.finish(masked_);
      name = std::string_view(masked_).substr(0, name_length);
      value = std::string_view(masked_).substr(name_length);
    }
    fields_.addChecked(name, value);  // an origin's field HTTP/2 cannot carry is not passed on
  }
  if (head.framing == http::ResponseFraming::Switched) {
    // RFC 8441 §5: the origin's 101 is a 2xx on the stream, which stays open for the WebSocket
    // (its upgrade fields went with the hop-by-hop ones; the accept key was the HTTP/1.1
    // handshake's, between sluice and the origin).
    submitHead(200, true);
    return;
  }
  if (head.status < 200) {
    submitHead(head.status, false);
    return;
  }
  const bool bodiless =
      head.framing == http::ResponseFraming::None ||
      (head.framing == http::ResponseFraming::ContentLength && head.content_length == 0);
  submitHead(head.status, !bodiless);
}

void Http2Stream::sendResponseBody(std::span<const char> data, bool /*completes*/) {
  // The stream ends with endResponse(), never with the body's last bytes: an HTTP/2 origin's
  // trailers may still follow them, and they end the stream.
  bufferBody(std::string_view(data.data(), data.size()));
  nghttp2_session_resume_data(session(), id_);
}

void Http2Stream::bufferBody(std::string_view bytes) {
  if (body_offset_ == body_.size()) {
    body_.clear();
    body_offset_ = 0;
  }
  body_.append(bytes);
  budget().hold(bytes.size());  // the connection's: every stream's answers held count
}

void Http2Stream::dropBody() {
  budget().release(pendingBody());
  body_.clear();
  body_offset_ = 0;
}

void Http2Stream::resumeResponse() {
  if (life_ == Life::Open && response_side_ != ResponseSide::NotBegun && pendingBody() > 0) {
    nghttp2_session_resume_data(session(), id_);
  }
}

void Http2Stream::endResponse(const http::HeaderBlock* trailers) {
  trailers_.clear();
  if (trailers != nullptr) {
    for (std::size_t i = 0; i < trailers->size(); ++i) {
      trailers_.addChecked(trailers->name(i), trailers->value(i));
    }
  }
  response_side_ = ResponseSide::Complete;
  nghttp2_session_resume_data(session(), id_);
}

bool Http2Stream::submitTrailers() {
  if (trailers_.empty()) {
    return false;
  }
  const std::span<const nghttp2_nv> nva = trailers_.nva();
  return nghttp2_submit_trailer(session(), id_, nva.data(), nva.size()) == 0;
}

long Http2Stream::readResponse(std::uint8_t* buf, std::size_t length, bool& eof) {
  const std::size_t available = pendingBody();
  if (available > 0 && codec_.host().clientBackedUp()) {
    // The client does not read what it was sent: what waits here stays here (the codec
    // resumes it once the client's queue drains), and no more goes into the queue.
    return NGHTTP2_ERR_DEFERRED;
  }
  const std::size_t n = std::min(length, available);
  if (n > 0) {
    std::memcpy(buf, body_.data() + body_offset_, n);
    body_offset_ += n;
    const bool was_full = budget().full();
    budget().release(n);
    exchange_.onResponseTaken(n);  // an HTTP/2 origin's window reopens by as much
    if ((available > kHighWater && available - n <= kHighWater) ||
        (was_full && !budget().full())) {
      connection_.updateReading();  // under a watermark again: upstreams are read again
    }
  }
  if (body_offset_ == body_.size()) {
    if (response_side_ == ResponseSide::Complete) {
      eof = true;
      return static_cast<long>(n);
    }
    if (n == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
  }
  return static_cast<long>(n);
}

int Http2Stream::sendDenial(policy::Reason reason, std::string_view detail) {
  const policy::ReasonInfo& info = policy::reasonInfo(reason);
  const int status = info.http_status != 0 ? info.http_status : 400;
  const std::string body = denialBody(reason, detail);
  fields_.clear();
  const std::string proxy_status = proxyStatusValue(reason);
  if (request_.grpc()) {
    // A gRPC client reads the status from the trailers-only answer, never the HTTP status
    // (docs/wire.md#grpc): 200, grpc-status, and the reason in grpc-message.
    std::string message;
    appendPercentEncoded(message, std::string_view(body).substr(0, body.size() - 1));
    fields_.add(":status", "200");
    fields_.add("content-type", "application/grpc");
    fields_.add("grpc-status", grpcStatusOf(reason));
    fields_.add("grpc-message", message);
    fields_.add("sluice-reason", info.token);
    fields_.add("proxy-status", proxy_status);
    submitHead(200, false);
    return 200;
  }
  const std::string status_text = std::to_string(status);
  const std::string length = std::to_string(body.size());
  fields_.add(":status", status_text);
  fields_.add("sluice-reason", info.token);
  fields_.add("proxy-status", proxy_status);
  fields_.add("content-type", "text/plain; charset=utf-8");
  fields_.add("content-length", length);
  fields_.add("cache-control", "no-store");
  dropBody();
  bufferBody(body);
  submitHead(status, true);
  response_side_ = ResponseSide::Complete;
  return info.http_status;
}

void Http2Stream::switchedProtocols() {
  // The origin's 101 went out as a 200 that leaves the stream open (sendResponseHead); what the
  // client sent meanwhile is the WebSocket's first bytes.
  deliverHeld();
}

// ---------------------------------------------------------------------------------------------
// Endings.

void Http2Stream::resetStream(std::uint32_t error_code) {
  if (life_ != Life::Open) {
    return;
  }
  life_ = Life::Reset;
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
    request_side_ = RequestSide::Discarding;
    dropHeld();
  }
  codec_.onStreamOver(*this);
}

}  // namespace sluice::proxy::session
