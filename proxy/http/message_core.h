#pragma once
// The llhttp driver under RequestParser and ResponseParser (internal to proxy/http/; the session
// uses those two). It runs llhttp 8.1 (strict build) one message at a time, collects the head
// into a HeaderBlock, enforces the head-size and field-count limits as bytes arrive, hands body
// bytes to a sink, and checks every non-body byte with FramingScanner, because strict llhttp
// 8.1 still accepts obs-fold, a bare LF as the last line of a head or trailer section, and
// protocols other than HTTP in the request line (see the test tables for each case).
//
// How llhttp is driven (each point verified against 8.1.0; see tests/unit/proxy/http/*parser_test):
//   - on_headers_complete returns HPE_PAUSED: llhttp_execute() returns at the first body byte,
//     so the head can be judged before any body byte is looked at. For a response that has no
//     body (HEAD, 1xx, 204, 304) it returns 1 instead ("no body"), because llhttp 8.1 would
//     otherwise read a 204/304's Content-Length or chunked body.
//   - on_message_complete returns HPE_PAUSED, so bytes after a message (a pipelined request)
//     stay untouched until the next run(). llhttp_resume() continues.
//   - A request with "Connection: upgrade" + "Upgrade" makes llhttp return HPE_PAUSED_UPGRADE
//     when resumed after its message; llhttp_resume_after_upgrade() keeps parsing the next bytes
//     as HTTP (sluice never switches protocols).
//   - A CONNECT head is paused at on_headers_complete like any head and never resumed: what
//     follows it is tunnel data.

#include <llhttp.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "proxy/http/header_block.h"
#include "proxy/http/parse_event.h"

namespace sluice::proxy::http::detail {

// Checks the bytes of a message that are not body data: start line, header lines, chunk-size
// lines and the CRLF after chunk data, trailers. Refuses a CR not followed by LF, an LF not
// preceded by CR, a control character other than HTAB, and a line that starts with SP or HTAB
// (obs-fold). Also notes the shape of the start line for the request-line checks.
class FramingScanner {
 public:
  void startMessage();
  // Scans [begin, end). Returns nullptr, or why the bytes are refused.
  const char* scan(const char* begin, const char* end);
  // Body data follows the bytes scanned so far.
  const char* beforeBody();

  // Spaces on the start line, and its last space-separated token ("" if over 16 bytes).
  std::size_t startLineSpaces() const { return start_line_spaces_; }
  std::string_view startLineLastToken() const;

 private:
  enum class StartLine { Before, In, After };
  static constexpr std::size_t kTokenCapacity = 16;

  char prev_ = '\n';
  StartLine start_line_ = StartLine::Before;
  std::size_t start_line_spaces_ = 0;
  std::size_t token_length_ = 0;
  char token_[kTokenCapacity] = {};
};

class MessageCore {
 public:
  enum class Stop { NeedMore, Head, Message, Failed };
  struct Step {
    Stop stop = Stop::NeedMore;
    std::size_t consumed = 0;
    bool message_too = false;  // with Head: the message ended with its head (no body)
  };
  // Receives body bytes; `target` is what run() was given.
  using BodyFn = void (*)(void* target, std::span<const char> data);

  // `headers` receives the head's fields; it must outlive the core.
  MessageCore(llhttp_type_t type, HeaderBlock& headers, std::size_t max_head_bytes,
              std::size_t max_fields);
  MessageCore(const MessageCore&) = delete;  // llhttp holds a pointer to this object
  MessageCore& operator=(const MessageCore&) = delete;

  // Parses until the head is complete, the message is complete, the data ends, or an error.
  // The first run() with data after a Message (or after a Head with message_too) begins the
  // next message, clearing the head collected so far; an empty run() then changes nothing.
  Step run(std::span<const char> data, BodyFn body_fn, void* body_target);

  // Responses: the next response answers a HEAD request (no body, whatever its headers say).
  void setSkipBody(bool skip) { skip_body_ = skip; }
  // Back to the start state for a new byte stream; keeps the storage.
  void reset();
  // Refuses the message from now on (the owner's head checks failed).
  void fail(ParseError error, std::string_view detail);
  // End of stream during a body delimited by close: true when llhttp agrees it is complete.
  bool finishUntilClose();

  bool failed() const { return phase_ == Phase::Failed; }
  bool inBody() const { return phase_ == Phase::Body; }
  // True when no byte of a next message has been parsed.
  bool awaitingMessage() const {
    return phase_ == Phase::Between || (phase_ == Phase::Head && head_bytes_ == 0);
  }
  ParseError error() const { return error_; }
  std::string_view errorDetail() const { return error_detail_; }
  std::size_t headBytes() const { return head_bytes_; }

  std::string_view method() const { return method_; }
  std::string_view target() const { return target_; }
  std::string_view reason() const { return reason_; }
  const FramingScanner& scanner() const { return scanner_; }
  int httpMajor() const { return parser_.http_major; }
  int httpMinor() const { return parser_.http_minor; }
  int status() const { return parser_.status_code; }
  int methodId() const { return parser_.method; }
  // llhttp's own view of the head, to cross-check sluice's: keep-alive (Connection header,
  // version, framing), the Content-Length it will count, whether it will de-chunk.
  bool llhttpKeepAlive() const { return llhttp_should_keep_alive(&parser_) != 0; }
  std::uint64_t llhttpContentLength() const { return parser_.content_length; }
  bool llhttpChunked() const { return (parser_.flags & F_CHUNKED) != 0; }

 private:
  enum class Phase { Between, Head, Body, Failed };

  static const llhttp_settings_t& settings();
  static MessageCore& self(llhttp_t* p);
  template <class F>
  int guarded(F&& body) noexcept;
  static int onMethod(llhttp_t* p, const char* at, std::size_t length) noexcept;
  static int onUrl(llhttp_t* p, const char* at, std::size_t length) noexcept;
  static int onStatus(llhttp_t* p, const char* at, std::size_t length) noexcept;
  static int onHeaderField(llhttp_t* p, const char* at, std::size_t length) noexcept;
  static int onHeaderFieldComplete(llhttp_t* p) noexcept;
  static int onHeaderValue(llhttp_t* p, const char* at, std::size_t length) noexcept;
  static int onHeaderValueComplete(llhttp_t* p) noexcept;
  static int onHeadersComplete(llhttp_t* p) noexcept;
  static int onBody(llhttp_t* p, const char* at, std::size_t length) noexcept;
  static int onMessageComplete(llhttp_t* p) noexcept;

  void beginMessage();
  // Records the first error a callback found; run() reports it.
  void setPending(ParseError error, std::string_view detail);
  // Scans from cursor_ to `stop` (not past a fault already found). A fault found there lies
  // before any callback's and replaces it as the pending error. Returns false on a fault.
  bool scanTo(const char* stop);
  void scanFailed(const char* why);
  Step failStep(std::size_t consumed) const { return {Stop::Failed, consumed, false}; }

  llhttp_t parser_{};
  llhttp_type_t type_;
  HeaderBlock& headers_;
  std::size_t max_head_bytes_;
  std::size_t max_fields_;

  Phase phase_ = Phase::Between;
  bool paused_ = false;        // llhttp returned HPE_PAUSED: llhttp_resume() before executing
  bool head_done_ = false;     // on_headers_complete ran for this message
  bool message_done_ = false;  // on_message_complete ran for this message
  bool skip_body_ = false;
  std::size_t head_bytes_ = 0;  // bytes of this message's head consumed so far

  std::string method_;
  std::string target_;
  std::string reason_;
  FramingScanner scanner_;
  const char* cursor_ = nullptr;  // first byte of the current execute() not yet scanned

  BodyFn body_fn_ = nullptr;
  void* body_target_ = nullptr;

  bool pending_ = false;
  bool scan_failed_ = false;  // the scanner found this message's fault
  ParseError error_ = ParseError::None;
  std::string_view error_detail_;
};

}  // namespace sluice::proxy::http::detail
