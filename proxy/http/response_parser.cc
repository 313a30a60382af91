#include "proxy/http/response_parser.h"

#include "proxy/http/field_rules.h"

namespace sluice::proxy::http {
namespace {

void deliverResponseBody(void* sink, std::span<const char> data) {
  static_cast<ResponseBodySink*>(sink)->onResponseBody(data);
}

}  // namespace

ResponseParser::ResponseParser(std::size_t max_head_bytes, std::size_t max_fields)
    : core_(HTTP_RESPONSE, head_.headers, max_head_bytes, max_fields) {}

void ResponseParser::reset() {
  core_.reset();
  message_complete_pending_ = false;
  upgrade_ = Upgrade::None;
  switched_ = false;
}

void ResponseParser::expect(std::string_view request_method, Upgrade upgrade) {
  core_.setSkipBody(request_method == "HEAD");
  upgrade_ = upgrade;
}

ParseEvent ResponseParser::errorEvent(std::size_t consumed) const {
  return {EventKind::Error, consumed, core_.error(), core_.errorDetail()};
}

ParseEvent ResponseParser::feed(std::span<const char> data, ResponseBodySink& sink) {
  if (switched_) {
    return {EventKind::Error, 0, ParseError::Internal, "fed after the protocol switched"};
  }
  if (message_complete_pending_) {
    message_complete_pending_ = false;
    return {EventKind::MessageComplete, 0, ParseError::None, {}};
  }
  const detail::MessageCore::Step step = core_.run(data, &deliverResponseBody, &sink);
  switch (step.stop) {
    case detail::MessageCore::Stop::NeedMore:
      return {EventKind::NeedMore, step.consumed, ParseError::None, {}};
    case detail::MessageCore::Stop::Head:
      if (const char* why = completeHead(step.message_too)) {
        core_.fail(ParseError::BadRequest, why);
        return errorEvent(step.consumed);
      }
      if (head_.framing == ResponseFraming::Switched) {
        switched_ = true;  // llhttp stopped at the head's end: the rest is the caller's
        return {EventKind::HeadComplete, step.consumed, ParseError::None, {}};
      }
      if (head_.status / 100 == 1) {
        // The core returned 1 ("no body") for it and is between messages: the next feed()
        // parses the final response.
        return {EventKind::InterimHead, step.consumed, ParseError::None, {}};
      }
      message_complete_pending_ = step.message_too;
      return {EventKind::HeadComplete, step.consumed, ParseError::None, {}};
    case detail::MessageCore::Stop::Message:
      return {EventKind::MessageComplete, step.consumed, ParseError::None, {}};
    case detail::MessageCore::Stop::Failed:
      break;
  }
  return errorEvent(step.consumed);
}

ParseEvent ResponseParser::finish() {
  if (message_complete_pending_) {
    message_complete_pending_ = false;
    return {EventKind::MessageComplete, 0, ParseError::None, {}};
  }
  if (core_.failed()) {
    return errorEvent(0);
  }
  if (core_.inBody() && head_.framing == ResponseFraming::UntilClose) {
    if (core_.finishUntilClose()) {
      return {EventKind::MessageComplete, 0, ParseError::None, {}};
    }
    core_.fail(ParseError::Internal, "llhttp disagrees on a close-delimited body");
    return errorEvent(0);
  }
  core_.fail(ParseError::BadRequest, core_.awaitingMessage()
                                         ? "connection closed before a response"
                                         : "connection closed in the middle of a response");
  return errorEvent(0);
}

const char* ResponseParser::completeHead(bool no_body) {
  ResponseHead& h = head_;
  h.status = core_.status();
  h.reason = core_.reason();
  h.http_major = core_.httpMajor();
  h.http_minor = core_.httpMinor();
  if (h.http_major != 1 || (h.http_minor != 0 && h.http_minor != 1)) {
    return "HTTP version other than 1.0 and 1.1";
  }
  if (h.status < 100 || h.status > 599) {
    return "status code outside 100-599";
  }
  if (h.status == 101) {
    if (upgrade_ != Upgrade::WebSocket) {
      return "101 Switching Protocols to a request that asked for no upgrade sluice forwards";
    }
    bool to_websocket = false;
    for (std::size_t i = 0; i < h.headers.size(); ++i) {
      if (ascii::iequals(h.headers.name(i), "Upgrade")) {
        // The one protocol it switched to (RFC 9110 section 7.8): exactly what was asked.
        if (!ascii::iequals(ascii::trimOws(h.headers.value(i)), "websocket") || to_websocket) {
          return "101 Switching Protocols to something other than websocket";
        }
        to_websocket = true;
      }
    }
    if (!to_websocket) {
      return "101 Switching Protocols without Upgrade: websocket";
    }
    detail::BodyFields framing_fields;
    if (const char* why = detail::checkFields(h.headers, h.http_minor == 0, framing_fields)) {
      return why;
    }
    if (framing_fields.chunked || framing_fields.has_content_length) {
      return "101 Switching Protocols with body framing";  // none can follow a 101
    }
    h.framing = ResponseFraming::Switched;
    h.has_content_length = false;
    h.content_length = 0;
    h.keep_alive = false;
    return nullptr;
  }
  if (h.status / 100 == 1 && !no_body) {
    return "interim response with a body";  // cannot happen: the core skips 1xx bodies
  }

  detail::BodyFields body;
  if (const char* why = detail::checkFields(h.headers, h.http_minor == 0, body)) {
    return why;
  }
  h.has_content_length = body.has_content_length;
  h.content_length = body.has_content_length ? body.content_length : 0;
  if (no_body) {
    h.framing = ResponseFraming::None;
  } else if (body.chunked) {
    h.framing = ResponseFraming::Chunked;
  } else if (body.has_content_length) {
    h.framing = ResponseFraming::ContentLength;
    if (core_.llhttpContentLength() != body.content_length) {
      return "Content-Length disagreement";
    }
  } else {
    h.framing = ResponseFraming::UntilClose;
  }
  if (!no_body && body.chunked != core_.llhttpChunked()) {
    return "Transfer-Encoding disagreement";
  }

  const detail::ConnectionOptions options = detail::connectionOptions(h.headers);
  const bool keep_alive = h.http_minor == 1 ? !options.close : options.keep_alive && !options.close;
  h.keep_alive = keep_alive && h.framing != ResponseFraming::UntilClose && core_.llhttpKeepAlive();
  return nullptr;
}

}  // namespace sluice::proxy::http
