#pragma once
// Sans-IO HTTP/1.x request parser (llhttp 8.1, strict build, plus sluice's own checks). sluice
// parses every request a sandbox sends and decides on its head before any body byte is
// forwarded; what it forwards upstream is a head it writes itself (head_writer.h) from the
// fields parsed here, never the client's bytes.
//
// Use:
//   ParseEvent e = parser.feed(bytes, sink);
//   NeedMore         all consumed; call again when more bytes arrive
//   HeadComplete     head() is ready; no body byte was delivered. Decide, then keep feeding the
//                    rest (bytes.subspan(e.consumed)), also when it is empty: a request without
//                    a body then yields MessageComplete at once
//   body bytes       go to sink.onRequestBody() during later feed() calls, de-chunked
//   MessageComplete  the request is complete; the bytes after e.consumed (a pipelined request)
//                    are parsed only by the next feed(), which begins the next message
//   ConnectHead      a CONNECT head; bytes after e.consumed are tunnel data, never parsed
//   Error            the request is refused (400 or 431); every later feed() returns it again
//
// (A string literal converts to a span that ends with its NUL: pass a std::string_view.)
//
// Lifetime: head() and every view in it stay valid until the feed() that begins the next
// message (the first one given at least one byte after MessageComplete). Storage is owned by
// the parser and reused: parsing allocates nothing per message once its buffers have grown to
// the largest head seen.
//
// Refused (ParseError::BadRequest unless noted): any llhttp strict error; a version other than
// HTTP/1.0 and HTTP/1.1, a malformed request line; an unknown method; a field name that is not
// a token or is followed by whitespace; NUL, CTLs other than HTAB, a bare CR or bare LF anywhere
// in the head, chunk lines or trailers; obs-fold; Content-Length that is not 1*DIGIT, is over
// 2^63-1, repeats or lists; Transfer-Encoding other than one field "chunked", or on HTTP/1.0;
// both; malformed chunk lines; a fragment in the target; userinfo in an absolute-form target; a
// CONNECT target that is not host:port, or a CONNECT with a body. A head over max_head_bytes or
// with more than max_fields fields: ParseError::HeaderTooLarge, as soon as the limit is passed.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "proxy/http/header_block.h"
#include "proxy/http/message_core.h"
#include "proxy/http/parse_event.h"

namespace sluice::proxy::http {

inline constexpr std::size_t kDefaultMaxHeadBytes = 64 * 1024;
inline constexpr std::size_t kDefaultMaxFields = 256;

enum class BodyFraming { None, ContentLength, Chunked };

struct RequestHead {
  std::string_view method;  // e.g. "GET": one of llhttp's known methods, as received
  std::string_view target;  // the request-target as received
  int http_major = 1;
  int http_minor = 1;
  HeaderBlock headers;

  std::size_t host_count = 0;
  std::string_view host;  // the Host value when host_count == 1
  BodyFraming framing = BodyFraming::None;
  std::uint64_t content_length = 0;  // with BodyFraming::ContentLength
  // HTTP/1.1: unless "Connection: close"; HTTP/1.0: only with "Connection: keep-alive".
  bool keep_alive = true;
  bool expect_continue = false;  // "Expect: 100-continue"

  bool is_connect = false;
  std::string_view connect_authority;  // CONNECT: the target, "host:port" (validated form)

  // Absolute-form target "scheme://authority/path?query" (forward proxying). Any scheme
  // parses; the caller refuses what it does not forward.
  bool absolute_form = false;
  std::string_view uri_scheme;     // as received (compare case-insensitively)
  std::string_view uri_authority;  // "host[:port]"; no userinfo
  // The target to forward: the target itself for origin-form ("/p?q") and "*"; for
  // absolute-form its path and query ("/" when both are absent, "/?q" for a query alone).
  // Empty for CONNECT.
  std::string_view origin_target;

  // An Upgrade field was present (WebSocket, h2c...). The request is parsed and forwarded as
  // an ordinary request without it (head_writer drops Upgrade, HTTP2-Settings and Connection),
  // and the bytes after it are parsed as HTTP: sluice never switches protocols.
  bool upgrade_requested = false;
  // An Upgrade field lists `websocket` (any case, whatever else it lists, whether or not
  // Connection names it): the policy decides it as a WebSocket upgrade, which only a rule with
  // `websocket: true` allows (docs/wire.md#websocket). Read broadly on purpose: an origin
  // that reads the request more loosely than RFC 9110 must not get an upgrade no rule allows.
  bool websocket_upgrade = false;
};

class RequestParser {
 public:
  explicit RequestParser(std::size_t max_head_bytes = kDefaultMaxHeadBytes,
                         std::size_t max_fields = kDefaultMaxFields);
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  ParseEvent feed(std::span<const char> data, RequestBodySink& sink);
  const RequestHead& head() const { return head_; }

  // What a head showed before it was refused (Error), for the audit record: the method and
  // target as far as they were read, and the first complete Host value (empty when not seen).
  // Views valid until the next feed() or reset().
  struct PartialHead {
    std::string_view method;
    std::string_view target;
    std::string_view host;
  };
  PartialHead partialHead() const;

  // Back to the start state, for a new byte stream (e.g. the requests inside a CONNECT tunnel
  // once TLS is terminated). Keeps the storage.
  void reset();

 private:
  // The checks and derived fields of a complete head. Returns nullptr or why it is refused.
  const char* completeHead();
  const char* checkTarget();
  ParseEvent errorEvent(std::size_t consumed) const;

  RequestHead head_;
  std::string origin_buffer_;  // "/?q" for an absolute-form target with a query but no path
  detail::MessageCore core_;
  bool tunnel_ = false;  // a CONNECT head was returned
};

}  // namespace sluice::proxy::http
