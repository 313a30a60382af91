// An HTTP/2 stream's response side (http2_stream.h): the head as HEADERS, the body held for
// the client's window and pulled by nghttp2 into DATA frames, trailers, and sluice's own
// answers (a gRPC request's in the form gRPC clients read: docs/wire.md#grpc).
#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "proxy/http/head_writer.h"
#include "proxy/session/exchange/denial.h"
#include "proxy/session/http2/http2_server_codec.h"
#include "proxy/session/http2/http2_stream.h"

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
    move(with_body ? ResponseSide::Streaming : ResponseSide::Complete);
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
  if (response_side_ != ResponseSide::Complete) {  // (a head without a body is complete already)
    move(ResponseSide::Complete);
  }
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
  move(ResponseSide::Complete);
  return info.http_status;
}

void Http2Stream::switchedProtocols() {
  // The origin's 101 went out as a 200 that leaves the stream open (sendResponseHead); what the
  // client sent meanwhile is the WebSocket's first bytes.
  deliverHeld();
}

}  // namespace sluice::proxy::session
