#include "proxy/http/http2_response.h"

#include <charconv>

#include "proxy/http/field_rules.h"

namespace sluice::proxy::http {

namespace {

// What one field costs against the bound besides its bytes (RFC 9113 §6.5.2).
constexpr std::size_t kFieldOverhead = 32;

}  // namespace

void Http2ResponseBuilder::reset(bool head_request) {
  head_.status = 0;
  head_.reason = {};
  head_.http_major = 2;
  head_.http_minor = 0;
  head_.headers.clear();
  head_.framing = ResponseFraming::None;
  head_.has_content_length = false;
  head_.content_length = 0;
  head_.keep_alive = true;
  trailers_.clear();
  phase_ = Phase::AwaitingHead;
  head_request_ = head_request;
  status_seen_ = false;
  block_open_ = false;
  list_bytes_ = 0;
}

bool Http2ResponseBuilder::add(std::string_view name, std::string_view value) {
  list_bytes_ += name.size() + value.size() + kFieldOverhead;
  if (list_bytes_ > max_list_bytes_) {
    return false;
  }
  if (!block_open_) {
    block_open_ = true;
    if (phase_ == Phase::AwaitingHead) {
      head_.headers.clear();  // (the last 1xx's)
      head_.status = 0;
      status_seen_ = false;
    } else if (phase_ == Phase::Body) {
      phase_ = Phase::Trailers;  // a block after the final head
    }
  }
  if (!name.empty() && name.front() == ':') {
    if (name == ":status" && phase_ == Phase::AwaitingHead) {
      // (nghttp2 checked it is three digits; a second one makes the stream malformed there.)
      int status = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), status);
      status_seen_ = ec == std::errc() && end == value.data() + value.size() && status >= 100 &&
                     status <= 999;
      head_.status = status_seen_ ? status : 0;
    }
    return true;  // (no other pseudo-header in a response, and none in trailers: nghttp2's)
  }
  if (phase_ == Phase::Trailers) {
    trailers_.add(name, value);
  } else if (phase_ == Phase::AwaitingHead) {
    head_.headers.add(name, value);
  }
  return true;
}

Http2ResponseBuilder::Block Http2ResponseBuilder::finish(bool end_stream) {
  list_bytes_ = 0;
  block_open_ = false;
  switch (phase_) {
    case Phase::Body:  // an empty block after the body: empty trailers, if it ends the stream
    case Phase::Trailers:
      if (!end_stream) {
        return Block::Invalid;  // (trailers end the stream: RFC 9113 §8.1)
      }
      phase_ = Phase::Done;
      return Block::Trailers;
    case Phase::Done:
      return Block::Invalid;
    case Phase::AwaitingHead:
      break;
  }
  if (!status_seen_) {
    return Block::Invalid;
  }
  if (head_.status < 200) {
    if (end_stream) {
      return Block::Invalid;  // a 1xx cannot end a response
    }
    status_seen_ = false;   // the next block must bring its own status
    return Block::Interim;  // (the caller has head() until the next block begins)
  }
  if (auto length = head_.headers.find("content-length")) {
    head_.has_content_length = detail::parseContentLength(*length, head_.content_length);
  }
  if (head_request_ || head_.status == 204 || head_.status == 304) {
    head_.framing = ResponseFraming::None;
  } else if (end_stream) {
    head_.has_content_length = true;
    head_.content_length = 0;
    head_.framing = ResponseFraming::ContentLength;
  } else if (head_.has_content_length) {
    head_.framing = ResponseFraming::ContentLength;
  } else {
    head_.framing = ResponseFraming::Chunked;
  }
  phase_ = Phase::Body;
  return Block::Final;
}

}  // namespace sluice::proxy::http
