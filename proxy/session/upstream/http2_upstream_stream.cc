#include "proxy/session/upstream/http2_upstream_stream.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "proxy/http/field_rules.h"
#include "proxy/http/head_writer.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/context/state_change.h"
#include "proxy/session/upstream/http2_upstream_session.h"

namespace sluice::proxy::session {

namespace {

// Room for a typical request head in a fresh field buffer.
constexpr std::size_t kHeadReserve = 512;

// Whether a request's TE field asks for trailers: gRPC's origins want "te: trailers", the one
// TE value HTTP/2 carries (RFC 9113 §8.2.2); the rest of TE is the client's hop's.
bool asksForTrailers(const http::HeaderBlock& headers) {
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (!http::ascii::iequals(headers.name(i), "te")) {
      continue;
    }
    std::string_view value = headers.value(i);
    while (!value.empty()) {
      const std::size_t comma = value.find(',');
      std::string_view token = value.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
        token.remove_prefix(1);
      }
      token = token.substr(0, token.find_first_of(" \t;"));
      if (http::ascii::iequals(token, "trailers")) {
        return true;
      }
      value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    }
  }
  return false;
}

// Adds each forwarded field HTTP/2 can carry; the others are left out, never translated.
class CheckedFields final : public http::ForwardedFieldVisitor {
 public:
  explicit CheckedFields(http::Http2Fields& fields) : fields_(fields) {}
  void field(std::string_view name, std::string_view value, bool) override {
    fields_.addChecked(name, value);
  }

 private:
  http::Http2Fields& fields_;
};

}  // namespace

Http2UpstreamStream::Http2UpstreamStream(ClientSide& host, UpstreamEvents& events,
                                         std::size_t max_header_bytes)
    : host_(host), events_(events) {
  response_head_.setMaxListBytes(max_header_bytes);
}

Http2UpstreamStream::~Http2UpstreamStream() { detach(); }

void Http2UpstreamStream::attachTo(Http2UpstreamSession& session, std::string_view method,
                                   bool end_to_end) {
  session_ = &session;
  consumption_ = end_to_end ? Consumption::WhenTaken : Consumption::OnDelivery;
  id_ = -1;
  head_request_ = method == "HEAD";
  secret_ = false;
  body_ = false;
  request_ = Request::Head;  // a new exchange: both machines start over
  request_backed_up_ = false;
  reading_ = true;
  wants_flush_ = false;
  response_ = Response::AwaitingHead;
  unconsumed_ = 0;
  response_head_.reset(head_request_);
  out_.clear();
  out_offset_ = 0;
  trailers_.clear();
}

void Http2UpstreamStream::move(Request next) {
  changeState(host_.context(), host_.facts().id, kOriginRequestMachine, request_, next);
}

void Http2UpstreamStream::move(Response next) {
  changeState(host_.context(), host_.facts().id, kOriginResponseMachine, response_, next);
}

// --- the request

void Http2UpstreamStream::sendHead(const http::RequestHead& head, std::string_view target,
                                   std::string_view host,
                                   std::span<const http::HeaderField> inject) {
  if (session_ == nullptr) {
    return;
  }
  secret_ = !inject.empty();
  body_ = head.framing != http::BodyFraming::None;
  move(body_ ? Request::Body : Request::Sent);  // (a bodiless request's HEADERS end the stream)
  fields_.clear();
  fields_.reserve(kHeadReserve);
  fields_.add(":method", head.method);
  fields_.add(":scheme", "https");
  fields_.add(":authority", host);
  fields_.add(":path", target);
  CheckedFields adder(fields_);
  http::visitForwardedFields(head, inject, adder);
  if (head.framing == http::BodyFraming::ContentLength) {
    char digits[20];
    const auto written = std::to_chars(digits, digits + sizeof digits, head.content_length);
    fields_.add("content-length",
                std::string_view(digits, static_cast<std::size_t>(written.ptr - digits)));
  }
  if (asksForTrailers(head.headers)) {
    fields_.add("te", "trailers");
  }
  id_ = session_->submitRequest(*this, fields_.nva(), body_);
  if (secret_) {
    OPENSSL_cleanse(fields_.bytes().data(), fields_.bytes().capacity());  // (nghttp2 copied it)
  }
  if (id_ < 0) {
    session_ = nullptr;
    fail("cannot open a stream to the origin");
    return;
  }
  window_ = host_.budget().grantWindow();
  countActive(true);
  wantFlush();
}

void Http2UpstreamStream::sendBody(std::span<const char> data) {
  if (session_ == nullptr || data.empty()) {
    return;
  }
  if (out_offset_ == out_.size()) {
    out_.clear();
    out_offset_ = 0;
  }
  out_.append(data.data(), data.size());
  session_->resumeData(id_);
  wantFlush();
}

void Http2UpstreamStream::sendEnd(const http::HeaderBlock* trailers,
                                  std::span<const http::HeaderField> inject) {
  if (session_ == nullptr || request_ != Request::Body) {
    return;  // (ended already, or bodiless)
  }
  move(Request::Ending);
  trailers_.clear();
  if (trailers != nullptr && body_) {
    CheckedFields adder(trailers_);
    http::visitForwardedTrailers(*trailers, inject, adder);
  }
  session_->resumeData(id_);
  wantFlush();
}

void Http2UpstreamStream::wantFlush() {
  if (host_.corked()) {
    wants_flush_ = true;  // flushCorked() writes it with the rest of the callback's bytes
    return;
  }
  session_->flush();
}

void Http2UpstreamStream::flushCorked() {
  if (session_ != nullptr && wants_flush_) {
    wants_flush_ = false;
    session_->flush();
  }
}

long Http2UpstreamStream::readRequest(std::uint8_t* buf, std::size_t length, bool& eof) {
  const std::size_t available = out_.size() - out_offset_;
  const std::size_t n = std::min(length, available);
  if (n > 0) {
    std::memcpy(buf, out_.data() + out_offset_, n);
    out_offset_ += n;
  }
  if (out_offset_ == out_.size()) {
    out_.clear();
    out_offset_ = 0;
    if (request_ == Request::Ending || request_ == Request::Sent) {
      eof = true;
      if (request_ == Request::Ending) {
        move(Request::Sent);
      }
      return static_cast<long>(n);
    }
    if (n == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
  }
  return static_cast<long>(n);
}

bool Http2UpstreamStream::submitTrailers() {
  if (trailers_.empty() || session_ == nullptr) {
    return false;
  }
  return session_->submitTrailer(id_, trailers_.nva());
}

// Const to the exchange, which asks; a stream that says yes is told when the answer changes.
bool Http2UpstreamStream::backedUp() const {
  if (session_ == nullptr) {
    return false;
  }
  const bool backed_up = out_.size() - out_offset_ > kHighWater || session_->backedUp();
  if (backed_up && !request_backed_up_ && id_ > 0) {
    request_backed_up_ = true;
    session_->waitForDrain(id_);
  }
  return backed_up;
}

void Http2UpstreamStream::reportDrainedIfSo() {
  if (!request_backed_up_) {
    return;
  }
  // The session drained, but this stream may still hold more than kHighWater (the origin's
  // window for it is closed): then backedUp() puts it back among the waiters, or the origin's
  // WINDOW_UPDATE would find nobody to tell and the client's body would stall.
  request_backed_up_ = false;
  if (backedUp()) {
    return;
  }
  Cork cork(host_);
  host_.onPeerDrained();
}

// --- the response

void Http2UpstreamStream::onHeadersSent() {
  if (session_ != nullptr && window_ != 0) {
    session_->setStreamWindow(id_, window_);
  }
}

void Http2UpstreamStream::bodyTaken(std::size_t bytes) {
  if (consumption_ == Consumption::WhenTaken && session_ != nullptr && bytes > 0) {
    session_->consume(id_, bytes);  // the client took them: the origin may send as many more
    wantFlush();
  }
}

void Http2UpstreamStream::setReading(bool reading) {
  reading_ = reading;
  if (consumption_ == Consumption::WhenTaken) {
    return;  // (the window follows what the client takes: bodyTaken)
  }
  if (reading && unconsumed_ > 0 && session_ != nullptr) {
    session_->consume(id_, unconsumed_);  // the client took what it was sent: the window opens
    unconsumed_ = 0;
    wantFlush();
  }
}

bool Http2UpstreamStream::onField(std::string_view name, std::string_view value) {
  return response_head_.add(name, value);
}

void Http2UpstreamStream::onHeadersEnd(bool end_stream) {
  host_.noteProgress();  // (idle_timeout counts from the origin's last sign of life too)
  if (response_ == Response::Complete || response_ == Response::Failed) {
    return;
  }
  switch (response_head_.finish(end_stream)) {
    case http::Http2ResponseBuilder::Block::Interim:
      events_.onInterimHead(response_head_.head());  // (no 101 in HTTP/2: nghttp2 refuses it)
      return;
    case http::Http2ResponseBuilder::Block::Final:
      move(Response::Body);
      if (session_ != nullptr) {
        session_->rememberTlsSession();
      }
      events_.onResponseHead(response_head_.head());
      if (end_stream && response_ == Response::Body) {
        onEndStream();
      }
      return;
    case http::Http2ResponseBuilder::Block::Trailers:
      onEndStream();
      return;
    case http::Http2ResponseBuilder::Block::Invalid:
      fail("the origin sent a HEADERS block out of place");
      return;
  }
}

void Http2UpstreamStream::onData(std::span<const char> data) {
  if (response_ != Response::Body || session_ == nullptr) {
    return;
  }
  const std::int32_t id = id_;
  Http2UpstreamSession* session = session_;
  host_.noteProgress();
  events_.onResponseBody(data);
  if (session_ == nullptr) {
    session->consume(id, data.size());  // let go meanwhile: nothing will give it back
    return;
  }
  host_.updateReading();  // the client may be backed up now: then setReading(false)
  if (consumption_ == Consumption::WhenTaken) {
    return;  // consumed as the client takes the bytes (bodyTaken)
  }
  if (reading_) {
    session_->consume(id_, data.size());
  } else {
    unconsumed_ += data.size();
  }
}

void Http2UpstreamStream::onHeadTooLarge() {
  if (response_ != Response::Complete && response_ != Response::Failed) {
    fail("the origin's header block is over max_header_bytes");
  }
}

void Http2UpstreamStream::onEndStream() {
  if (response_ != Response::Body) {
    return;
  }
  move(Response::Complete);
  events_.onResponseComplete(false);
}

const http::HeaderBlock* Http2UpstreamStream::trailers() const { return response_head_.trailers(); }

// --- endings

void Http2UpstreamStream::onClosed(std::uint32_t error_code) {
  session_ = nullptr;  // (the session forgot it)
  letGo();
  if (response_ == Response::Complete || response_ == Response::Failed) {
    return;
  }
  if (error_code == NGHTTP2_REFUSED_STREAM) {
    fail("the origin refused the stream before processing it");
    return;
  }
  fail(std::string("the origin reset the stream (") + nghttp2_http2_strerror(error_code) + ")");
}

void Http2UpstreamStream::onSessionEnded(std::string_view why) {
  session_ = nullptr;
  letGo();
  if (why.empty() || response_ == Response::Complete || response_ == Response::Failed) {
    return;
  }
  fail(why);
}

void Http2UpstreamStream::fail(std::string_view why) {
  move(Response::Failed);
  events_.onUpstreamFailed(policy::Reason::UpstreamConnect, why);
}

void Http2UpstreamStream::detach() {
  if (session_ == nullptr) {
    return;
  }
  Http2UpstreamSession* session = session_;
  session_ = nullptr;
  letGo();
  // A stream whose both sides ended closes on its own; any other is reset: nobody reads its
  // answer, or nghttp2 has not sent the end of its request (bytes still wait for the origin's
  // window: once the exchange is over, nothing may pull them).
  session->forget(id_, !(response_ == Response::Complete && request_ == Request::Sent));
}

void Http2UpstreamStream::letGo() {
  countActive(false);
  if (window_ != 0) {
    host_.budget().returnWindow(window_);
    window_ = 0;
  }
}

void Http2UpstreamStream::countActive(bool active) {
  if (counted_ != active) {
    counted_ = active;
    host_.runtime().metrics.h2_origin_streams_active.fetch_add(active ? 1 : -1,
                                                               std::memory_order_relaxed);
  }
}

void Http2UpstreamStream::release(bool, bool) { detach(); }

void Http2UpstreamStream::drop() { detach(); }

void Http2UpstreamStream::releaseBuffers() {
  std::string().swap(out_);
  out_offset_ = 0;
  fields_.release();
  trailers_.release();
}

}  // namespace sluice::proxy::session
