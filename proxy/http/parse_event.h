#pragma once
// What the sans-IO HTTP/1.x parsers (request_parser.h, response_parser.h) report after each
// feed(), and the sinks they hand body bytes to.

#include <cstddef>
#include <span>
#include <string_view>

namespace sluice::proxy::http {

enum class EventKind {
  NeedMore,         // every byte given was consumed; feed more when it arrives
  HeadComplete,     // a head is complete and validated; no body byte has been delivered yet
  MessageComplete,  // the message (head and body) is complete
  ConnectHead,      // requests only: a CONNECT head; the bytes after it are tunnel bytes
  InterimHead,      // responses only: a 1xx other than 101; the final response follows
  Error,            // the message is refused; the parser stays in this state
};

enum class ParseError {
  None,
  // Anything malformed or ambiguous. For a request the session answers 400 bad_request; for an
  // upstream response it answers 502.
  BadRequest,
  // The head passed max_head_bytes or the field limit: 431 header_too_large.
  HeaderTooLarge,
  // sluice's own failure while parsing (a body sink threw, memory ran out).
  Internal,
};

struct ParseEvent {
  EventKind kind = EventKind::NeedMore;
  // Bytes of the data given to this feed() that were used, from its start. After HeadComplete,
  // MessageComplete, InterimHead and ConnectHead the rest was not looked at.
  std::size_t consumed = 0;
  ParseError error = ParseError::None;
  // For debug logs only: static text, never the sandbox's bytes (no secret can leak through).
  std::string_view detail;
};

std::string_view toString(EventKind kind);
std::string_view toString(ParseError error);

// Receives request body bytes, de-chunked (chunk sizes, extensions and trailers removed), while
// RequestParser::feed() runs. The span is valid only during the call. Must not call back into
// the parser. An exception it throws turns into ParseError::Internal.
class RequestBodySink {
 public:
  virtual void onRequestBody(std::span<const char> data) = 0;

 protected:
  virtual ~RequestBodySink() = default;
};

// The same for response bodies (a separate type, so one object can be the sink of both).
class ResponseBodySink {
 public:
  virtual void onResponseBody(std::span<const char> data) = 0;

 protected:
  virtual ~ResponseBodySink() = default;
};

}  // namespace sluice::proxy::http
