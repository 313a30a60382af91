#pragma once
// Sans-IO HTTP/1.x response parser for what upstreams answer (llhttp 8.1, strict build, plus
// the same field checks as requests). sluice writes the response head it sends back itself
// (head_writer.h) from the fields parsed here.
//
// Use, for each request forwarded on the upstream connection:
//   parser.expect(request_method);   // "HEAD": no body, whatever the headers say
//   parser.expect(method, Upgrade::WebSocket);  // a 101 to websocket ends the HTTP
//   ParseEvent e = parser.feed(bytes, sink);
//   NeedMore         all consumed; call again when more bytes arrive
//   InterimHead      a 1xx other than 101 (100 Continue, 103 Early Hints): head() holds it;
//                    forward it and keep feeding bytes.subspan(e.consumed): the final response
//                    follows
//   HeadComplete     the final head; no body byte was delivered. Keep feeding the rest, also
//                    when it is empty: a response without a body (HEAD, 204, 304) then yields
//                    MessageComplete at once
//   body bytes       go to sink.onResponseBody() during later feed() calls, de-chunked
//   MessageComplete  the response is complete; bytes after e.consumed are left for the next
//   Error            refused (the session answers 502); every later feed() returns it again
//   finish()         the upstream closed: MessageComplete for a body delimited by the close
//                    (ResponseFraming::UntilClose), otherwise Error (truncated, or no response)
//
// Refused, besides the request rules that apply (see request_parser.h): a status outside
// 100-599; 101 Switching Protocols, except to the WebSocket that the request asked for
// (expect(..., Upgrade::WebSocket)): that 101 is HeadComplete with ResponseFraming::Switched,
// the bytes after e.consumed are the new protocol's, and the parser takes nothing more.
//
// Lifetime and storage as for RequestParser: head() is valid until the feed() that begins the
// next response (the first one given a byte after MessageComplete or InterimHead); no
// allocation per message once the buffers have grown.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "proxy/http/header_block.h"
#include "proxy/http/message_core.h"
#include "proxy/http/parse_event.h"
#include "proxy/http/request_parser.h"

namespace sluice::proxy::http {

// Switched: a 101 to the WebSocket the request asked for; what follows the head is no HTTP.
enum class ResponseFraming { None, ContentLength, Chunked, UntilClose, Switched };

// The upgrade a forwarded request asked for: what a 101 may switch to.
enum class Upgrade : std::uint8_t { None, WebSocket };

struct ResponseHead {
  int status = 0;
  std::string_view reason;  // the reason phrase as received (may be empty)
  int http_major = 1;
  int http_minor = 1;
  HeaderBlock headers;
  // How the body arrives: None for HEAD answers, 1xx, 204 and 304 whatever the headers say.
  ResponseFraming framing = ResponseFraming::None;
  // The Content-Length field, present even when there is no body (a HEAD answer, a 304):
  // forwarding it then takes writeResponseHead(..., ResponseFraming::ContentLength, ...).
  bool has_content_length = false;
  std::uint64_t content_length = 0;
  // The upstream connection may carry another request after this response.
  bool keep_alive = true;
};

class ResponseParser {
 public:
  explicit ResponseParser(std::size_t max_head_bytes = kDefaultMaxHeadBytes,
                          std::size_t max_fields = kDefaultMaxFields);
  ResponseParser(const ResponseParser&) = delete;
  ResponseParser& operator=(const ResponseParser&) = delete;

  // The method of the request the next response answers. Call before each response.
  void expect(std::string_view request_method, Upgrade upgrade = Upgrade::None);
  ParseEvent feed(std::span<const char> data, ResponseBodySink& sink);
  // End of stream from the upstream.
  ParseEvent finish();
  const ResponseHead& head() const { return head_; }

  // Back to the start state, for a new upstream connection. Keeps the storage.
  void reset();

 private:
  const char* completeHead(bool no_body);
  ParseEvent errorEvent(std::size_t consumed) const;

  ResponseHead head_;
  detail::MessageCore core_;
  // A response without a body ends with its head: HeadComplete is returned first, and the next
  // feed() or finish() returns this MessageComplete without parsing anything.
  bool message_complete_pending_ = false;
  Upgrade upgrade_ = Upgrade::None;
  bool switched_ = false;  // a 101 was accepted: nothing after it is parsed
};

}  // namespace sluice::proxy::http
