#include "proxy/http/message_core.h"

#include <algorithm>
#include <functional>

namespace sluice::proxy::http::detail {
namespace {

// llhttp_execute() is given this for an empty run: a null pointer plus 0 is undefined in C.
constexpr char kNoBytes[1] = {0};

bool within(const char* p, const char* begin, const char* end) {
  std::less_equal<const char*> le;
  return p != nullptr && le(begin, p) && le(p, end);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FramingScanner

void FramingScanner::startMessage() {
  // As if a line had just ended: a message may not start with whitespace either.
  prev_ = '\n';
  start_line_ = StartLine::Before;
  start_line_spaces_ = 0;
  token_length_ = 0;
}

const char* FramingScanner::scan(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    // Fast path: past the start line, and not right after a CR or LF, every byte that is not
    // a control character (HTAB aside) is fine and changes nothing but `prev_`. Header names
    // and values are mostly such runs.
    if (start_line_ == StartLine::After && prev_ != '\r' && prev_ != '\n') {
      const char* q = p;
      while (q < end) {
        const auto u = static_cast<unsigned char>(*q);
        if ((u < 0x20 && u != '\t') || u == 0x7f) {
          break;
        }
        ++q;
      }
      if (q != p) {
        prev_ = q[-1];
        p = q;
        if (p == end) {
          break;
        }
      }
    }
    const char c = *p;
    const auto u = static_cast<unsigned char>(c);
    if (prev_ == '\r' && c != '\n') {
      return "bare CR";
    }
    if (c == '\n') {
      if (prev_ != '\r') {
        return "bare LF";
      }
    } else if (c == ' ' || c == '\t') {
      if (prev_ == '\n') {
        return "line starts with whitespace (obs-fold)";
      }
    } else if (c != '\r' && (u < 0x20 || u == 0x7f)) {
      return "control character";
    }
    prev_ = c;

    // Empty lines before the start line are skipped (llhttp does, as RFC 9112 §2.2 allows).
    if (start_line_ == StartLine::Before && c != '\r' && c != '\n') {
      start_line_ = StartLine::In;
    }
    if (start_line_ == StartLine::In) {
      if (c == '\r') {
        start_line_ = StartLine::After;
      } else if (c == ' ') {
        ++start_line_spaces_;
        token_length_ = 0;
      } else {
        if (token_length_ < kTokenCapacity) {
          token_[token_length_] = c;
        }
        ++token_length_;
      }
    }
  }
  return nullptr;
}

const char* FramingScanner::beforeBody() {
  if (prev_ == '\r') {
    return "bare CR";
  }
  prev_ = '\0';
  return nullptr;
}

std::string_view FramingScanner::startLineLastToken() const {
  if (token_length_ > kTokenCapacity) {
    return {};
  }
  return std::string_view(token_, token_length_);
}

// ---------------------------------------------------------------------------------------------
// MessageCore

MessageCore::MessageCore(llhttp_type_t type, HeaderBlock& headers, std::size_t max_head_bytes,
                         std::size_t max_fields)
    : type_(type),
      headers_(headers),
      max_head_bytes_(std::max<std::size_t>(max_head_bytes, 1)),
      max_fields_(max_fields) {
  llhttp_init(&parser_, type, &settings());
  parser_.data = this;
}

const llhttp_settings_t& MessageCore::settings() {
  static const llhttp_settings_t kSettings = [] {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_method = &MessageCore::onMethod;
    s.on_url = &MessageCore::onUrl;
    s.on_status = &MessageCore::onStatus;
    s.on_header_field = &MessageCore::onHeaderField;
    s.on_header_field_complete = &MessageCore::onHeaderFieldComplete;
    s.on_header_value = &MessageCore::onHeaderValue;
    s.on_header_value_complete = &MessageCore::onHeaderValueComplete;
    s.on_headers_complete = &MessageCore::onHeadersComplete;
    s.on_body = &MessageCore::onBody;
    s.on_message_complete = &MessageCore::onMessageComplete;
    return s;
  }();
  return kSettings;
}

void MessageCore::beginMessage() {
  headers_.clear();
  method_.clear();
  target_.clear();
  reason_.clear();
  scanner_.startMessage();
  head_bytes_ = 0;
  head_done_ = false;
  message_done_ = false;
  phase_ = Phase::Head;
}

void MessageCore::reset() {
  llhttp_reset(&parser_);  // keeps type, settings and data
  phase_ = Phase::Between;
  paused_ = false;
  skip_body_ = false;
  pending_ = false;
  scan_failed_ = false;
  error_ = ParseError::None;
  error_detail_ = {};
  beginMessage();
  phase_ = Phase::Between;
}

void MessageCore::setPending(ParseError error, std::string_view detail) {
  if (!pending_) {
    pending_ = true;
    error_ = error;
    error_detail_ = detail;
  }
}

bool MessageCore::scanTo(const char* stop) {
  if (scan_failed_) {
    return false;
  }
  if (const char* why = scanner_.scan(cursor_, stop)) {
    scanFailed(why);
    return false;
  }
  cursor_ = stop;
  return true;
}

void MessageCore::scanFailed(const char* why) {
  // The bytes scanned lie before wherever a callback stopped llhttp: this fault replaces the
  // callback's.
  scan_failed_ = true;
  pending_ = true;
  error_ = ParseError::BadRequest;
  error_detail_ = why;
}

void MessageCore::fail(ParseError error, std::string_view detail) {
  if (phase_ != Phase::Failed) {
    phase_ = Phase::Failed;
    error_ = error;
    error_detail_ = detail;
  }
}

MessageCore::Step MessageCore::run(std::span<const char> data, BodyFn body_fn, void* body_target) {
  if (phase_ == Phase::Failed) {
    return failStep(0);
  }
  if (phase_ == Phase::Between) {
    if (data.empty()) {
      return {Stop::NeedMore, 0, false};  // keep the last head readable until bytes arrive
    }
    beginMessage();
  }
  body_fn_ = body_fn;
  body_target_ = body_target;

  std::size_t consumed = 0;
  bool resumed_after_upgrade = false;
  while (true) {
    std::size_t length = data.size() - consumed;
    if (phase_ == Phase::Head) {
      // Never hand llhttp more head than the limit: an oversized head is refused as soon as
      // the limit is passed, not when (if ever) it ends.
      length = std::min(length, max_head_bytes_ - head_bytes_);
    }
    const char* begin = length > 0 ? data.data() + consumed : kNoBytes;
    const char* end = begin + length;
    if (paused_) {
      llhttp_resume(&parser_);
      paused_ = false;
    }
    cursor_ = begin;
    const llhttp_errno_t err = llhttp_execute(&parser_, begin, length);
    const char* stop = end;
    if (err != HPE_OK) {
      const char* pos = llhttp_get_error_pos(&parser_);
      stop = within(pos, cursor_, end) ? pos : cursor_;
    }
    // Scan before judging llhttp's verdict, so that the first fault in byte order is the one
    // reported however the input was split. Also when a callback refused the message (too many
    // fields): llhttp stopped at the callback's byte, so a fault found before it comes first.
    scanTo(stop);
    const auto used = static_cast<std::size_t>(stop - begin);
    consumed += used;
    if (phase_ == Phase::Head) {
      head_bytes_ += used;
    }
    if (pending_) {
      fail(error_, error_detail_);
      return failStep(consumed);
    }

    switch (err) {
      case HPE_OK:
        if (phase_ == Phase::Head && head_bytes_ >= max_head_bytes_) {
          fail(ParseError::HeaderTooLarge, "head larger than max_head_bytes");
          return failStep(consumed);
        }
        return {Stop::NeedMore, consumed, false};
      case HPE_PAUSED:
        paused_ = true;
        if (phase_ == Phase::Head && head_done_) {
          phase_ = message_done_ ? Phase::Between : Phase::Body;
          return {Stop::Head, consumed, message_done_};
        }
        if (phase_ == Phase::Body && message_done_) {
          phase_ = Phase::Between;
          return {Stop::Message, consumed, false};
        }
        fail(ParseError::Internal, "llhttp paused outside a head or message end");
        return failStep(consumed);
      case HPE_PAUSED_UPGRADE:
        // Reached when a request that asked for an upgrade is resumed after its message:
        // sluice never switches protocols, so the next bytes are parsed as HTTP.
        if (type_ == HTTP_REQUEST && phase_ == Phase::Head && !head_done_ &&
            !resumed_after_upgrade) {
          llhttp_resume_after_upgrade(&parser_);
          resumed_after_upgrade = true;
          continue;
        }
        fail(ParseError::BadRequest, "protocol upgrade");
        return failStep(consumed);
      default: {
        const char* reason = llhttp_get_error_reason(&parser_);
        fail(ParseError::BadRequest, reason != nullptr ? reason : llhttp_errno_name(err));
        return failStep(consumed);
      }
    }
  }
}

bool MessageCore::finishUntilClose() {
  if (phase_ != Phase::Body) {
    return false;
  }
  if (paused_) {  // paused at the head: let llhttp enter its read-until-EOF state first
    llhttp_resume(&parser_);
    paused_ = false;
    body_fn_ = nullptr;
    cursor_ = kNoBytes;
    if (llhttp_execute(&parser_, kNoBytes, 0) != HPE_OK) {
      return false;
    }
  }
  // llhttp_finish() runs on_message_complete, whose HPE_PAUSED it returns.
  const llhttp_errno_t err = llhttp_finish(&parser_);
  if ((err != HPE_OK && err != HPE_PAUSED) || !message_done_) {
    return false;
  }
  phase_ = Phase::Between;
  return true;
}

// ---------------------------------------------------------------------------------------------
// llhttp callbacks: noexcept trampolines to the one owner type. Appending can throw bad_alloc;
// nothing may unwind through llhttp's C frames, so a throw becomes a pending error.

MessageCore& MessageCore::self(llhttp_t* p) { return *static_cast<MessageCore*>(p->data); }

template <class F>
int MessageCore::guarded(F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    setPending(ParseError::Internal, "exception in a parser callback or body sink");
    return -1;
  }
}

int MessageCore::onMethod(llhttp_t* p, const char* at, std::size_t length) noexcept {
  MessageCore& core = self(p);
  return core.guarded([&] {
    core.method_.append(at, length);
    return 0;
  });
}

int MessageCore::onUrl(llhttp_t* p, const char* at, std::size_t length) noexcept {
  MessageCore& core = self(p);
  return core.guarded([&] {
    core.target_.append(at, length);
    return 0;
  });
}

int MessageCore::onStatus(llhttp_t* p, const char* at, std::size_t length) noexcept {
  MessageCore& core = self(p);
  return core.guarded([&] {
    core.reason_.append(at, length);
    return 0;
  });
}

int MessageCore::onHeaderField(llhttp_t* p, const char* at, std::size_t length) noexcept {
  MessageCore& core = self(p);
  if (core.phase_ != Phase::Head) {  // a trailer field: dropped
    return 0;
  }
  return core.guarded([&] {
    core.headers_.appendNamePiece({at, length});
    return 0;
  });
}

int MessageCore::onHeaderFieldComplete(llhttp_t* p) noexcept {
  MessageCore& core = self(p);
  if (core.phase_ != Phase::Head) {
    return 0;
  }
  return core.guarded([&] {
    core.headers_.endName();
    if (core.headers_.size() > core.max_fields_) {
      core.setPending(ParseError::HeaderTooLarge, "too many header fields");
      return -1;
    }
    return 0;
  });
}

int MessageCore::onHeaderValue(llhttp_t* p, const char* at, std::size_t length) noexcept {
  MessageCore& core = self(p);
  if (core.phase_ != Phase::Head) {
    return 0;
  }
  return core.guarded([&] {
    core.headers_.appendValuePiece({at, length});
    return 0;
  });
}

int MessageCore::onHeaderValueComplete(llhttp_t* p) noexcept {
  MessageCore& core = self(p);
  if (core.phase_ == Phase::Head) {
    core.headers_.endValue();
  }
  return 0;
}

int MessageCore::onHeadersComplete(llhttp_t* p) noexcept {
  MessageCore& core = self(p);
  core.head_done_ = true;
  if (core.type_ == HTTP_RESPONSE) {
    const int status = p->status_code;
    if (core.skip_body_ || status / 100 == 1 || status == 204 || status == 304) {
      return 1;  // "no body": llhttp completes the message without reading one
    }
  }
  return HPE_PAUSED;
}

int MessageCore::onBody(llhttp_t* p, const char* at, std::size_t length) noexcept {
  MessageCore& core = self(p);
  if (core.phase_ != Phase::Body) {
    core.setPending(ParseError::Internal, "body before the head was accepted");
    return -1;
  }
  if (!core.scanTo(at)) {
    return -1;
  }
  if (const char* why = core.scanner_.beforeBody()) {
    core.scanFailed(why);
    return -1;
  }
  core.cursor_ = at + length;
  if (core.body_fn_ == nullptr || length == 0) {
    return 0;
  }
  return core.guarded([&] {
    core.body_fn_(core.body_target_, std::span<const char>(at, length));
    return 0;
  });
}

int MessageCore::onMessageComplete(llhttp_t* p) noexcept {
  self(p).message_done_ = true;
  return HPE_PAUSED;
}

}  // namespace sluice::proxy::http::detail
