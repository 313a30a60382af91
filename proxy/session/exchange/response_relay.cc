#include "proxy/session/exchange/response_relay.h"

namespace sluice::proxy::session {

void ResponseRelay::interimHead(const http::ResponseHead& head, const SecretPatterns* patterns) {
  mask_.reset(patterns);  // (103 Early Hints may echo the request too)
  downstream_.sendInterimHead(head, mask_);
}

void ResponseRelay::head(const http::ResponseHead& head, const SecretPatterns* patterns) {
  length_.reset();
  if (head.framing == http::ResponseFraming::ContentLength) {
    length_ = head.content_length;
  }
  mask_.reset(patterns);
  downstream_.sendResponseHead(head, mask_);
}

void ResponseRelay::body(std::span<const char> data, std::uint64_t received) {
  const bool last = length_ && received >= *length_;
  if (mask_.active()) {
    masked_.clear();
    mask_.feed(data, masked_);
    send(masked_, last);
    return;
  }
  send(data, last);
}

void ResponseRelay::end(const http::HeaderBlock* trailers) {
  if (mask_.active()) {
    trailers = nullptr;
    masked_.clear();
    mask_.finish(masked_);
    send(masked_, true);  // only ever at the response's end
    mask_.reset(nullptr);
  }
  downstream_.endResponse(trailers);
}

void ResponseRelay::send(std::span<const char> data, bool completes_response) {
  if (data.empty()) {
    return;  // (an empty chunk would end a chunked body)
  }
  downstream_.sendResponseBody(data, completes_response);
}

}  // namespace sluice::proxy::session
