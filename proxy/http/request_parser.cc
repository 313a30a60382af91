#include "proxy/http/request_parser.h"

#include "proxy/http/field_rules.h"

namespace sluice::proxy::http {
namespace {

void deliverRequestBody(void* sink, std::span<const char> data) {
  static_cast<RequestBodySink*>(sink)->onRequestBody(data);
}

// "scheme://": ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1). Returns the length
// of the scheme, or 0.
std::size_t schemeLength(std::string_view target) {
  auto isSchemeChar = [](char c) {
    return ascii::isAlpha(c) || ascii::isDigit(c) || c == '+' || c == '-' || c == '.';
  };
  if (target.empty() || !ascii::isAlpha(target.front())) {
    return 0;
  }
  std::size_t i = 1;
  while (i < target.size() && isSchemeChar(target[i])) {
    ++i;
  }
  return target.substr(i, 3) == "://" ? i : 0;
}

}  // namespace

RequestParser::RequestParser(std::size_t max_head_bytes, std::size_t max_fields)
    : core_(HTTP_REQUEST, head_.headers, max_head_bytes, max_fields) {}

void RequestParser::reset() {
  core_.reset();
  tunnel_ = false;
}

ParseEvent RequestParser::errorEvent(std::size_t consumed) const {
  return {EventKind::Error, consumed, core_.error(), core_.errorDetail()};
}

ParseEvent RequestParser::feed(std::span<const char> data, RequestBodySink& sink) {
  if (tunnel_) {
    core_.fail(ParseError::Internal, "feed() after ConnectHead: those bytes are tunnel data");
    return errorEvent(0);
  }
  const detail::MessageCore::Step step = core_.run(data, &deliverRequestBody, &sink);
  switch (step.stop) {
    case detail::MessageCore::Stop::NeedMore:
      return {EventKind::NeedMore, step.consumed, ParseError::None, {}};
    case detail::MessageCore::Stop::Head:
      if (const char* why = completeHead()) {
        core_.fail(ParseError::BadRequest, why);
        return errorEvent(step.consumed);
      }
      if (head_.is_connect) {
        tunnel_ = true;  // llhttp stays paused at the head: nothing after it is ever parsed
        return {EventKind::ConnectHead, step.consumed, ParseError::None, {}};
      }
      return {EventKind::HeadComplete, step.consumed, ParseError::None, {}};
    case detail::MessageCore::Stop::Message:
      return {EventKind::MessageComplete, step.consumed, ParseError::None, {}};
    case detail::MessageCore::Stop::Failed:
      break;
  }
  return errorEvent(step.consumed);
}

RequestParser::PartialHead RequestParser::partialHead() const {
  return {core_.method(), core_.target(), head_.headers.find("host").value_or("")};
}

const char* RequestParser::completeHead() {
  RequestHead& h = head_;
  h.method = core_.method();
  h.target = core_.target();
  h.http_major = core_.httpMajor();
  h.http_minor = core_.httpMinor();

  // llhttp 8.1 has no on_protocol: it takes "GET / RTSP/1.0" and "GET / HTTP/2.0" (and
  // "GET  /" with two spaces). The scanner saw the request line itself.
  const detail::FramingScanner& line = core_.scanner();
  if (line.startLineSpaces() != 2) {
    return "malformed request line";
  }
  const std::string_view version = line.startLineLastToken();
  if (!((version == "HTTP/1.1" && h.http_major == 1 && h.http_minor == 1) ||
        (version == "HTTP/1.0" && h.http_major == 1 && h.http_minor == 0))) {
    return "HTTP version other than 1.0 and 1.1";
  }
  if (!ascii::isToken(h.method)) {
    return "method is not a token";
  }
  h.is_connect = core_.methodId() == HTTP_CONNECT;

  detail::BodyFields body;
  if (const char* why = detail::checkFields(h.headers, h.http_minor == 0, body)) {
    return why;
  }
  // What llhttp will read as the body must be what the forwarded head announces.
  if (body.chunked) {
    h.framing = BodyFraming::Chunked;
    h.content_length = 0;
  } else if (body.has_content_length) {
    h.framing = BodyFraming::ContentLength;
    h.content_length = body.content_length;
    if (core_.llhttpContentLength() != body.content_length) {
      return "Content-Length disagreement";
    }
  } else {
    h.framing = BodyFraming::None;
    h.content_length = 0;
  }
  if (body.chunked != core_.llhttpChunked()) {
    return "Transfer-Encoding disagreement";
  }

  h.host_count = h.headers.count("Host");
  h.host = h.host_count == 1 ? *h.headers.find("Host") : std::string_view();

  const detail::ConnectionOptions options = detail::connectionOptions(h.headers);
  const bool keep_alive = h.http_minor == 1 ? !options.close : options.keep_alive && !options.close;
  h.keep_alive = keep_alive && core_.llhttpKeepAlive();

  h.expect_continue = false;
  for (std::size_t i = 0; i < h.headers.size(); ++i) {
    if (ascii::iequals(h.headers.name(i), "Expect") &&
        ascii::iequals(h.headers.value(i), "100-continue")) {
      h.expect_continue = true;
    }
  }
  h.upgrade_requested = false;
  h.websocket_upgrade = false;
  for (std::size_t i = 0; i < h.headers.size(); ++i) {
    if (ascii::iequals(h.headers.name(i), "Upgrade")) {
      h.upgrade_requested = true;
      h.websocket_upgrade =
          h.websocket_upgrade || ascii::listContains(h.headers.value(i), "websocket");
    }
  }
  if (h.websocket_upgrade && h.framing == BodyFraming::ContentLength && h.content_length == 0) {
    // A Content-Length of 0 is no content (RFC 9110 section 8.6): JDK's WebSocket client sends
    // it on its opening GET. Framed as none, like llhttp reads it, so the upgrade is not taken
    // for one with a body and its head goes on without the field (docs/wire.md#websocket).
    h.framing = BodyFraming::None;
  }
  return checkTarget();
}

const char* RequestParser::checkTarget() {
  RequestHead& h = head_;
  h.connect_authority = {};
  h.absolute_form = false;
  h.uri_scheme = {};
  h.uri_authority = {};
  h.origin_target = {};
  const std::string_view target = h.target;

  if (target.find('#') != std::string_view::npos) {
    return "fragment in the request target";
  }
  if (h.is_connect) {
    // llhttp takes any target after CONNECT ("/x", "http://a/", "a@b:443", "*").
    if (!detail::isAuthority(target, true)) {
      return "CONNECT target is not host:port";
    }
    if (h.framing == BodyFraming::Chunked ||
        (h.framing == BodyFraming::ContentLength && h.content_length != 0)) {
      // llhttp would hand these bytes to the tunnel, whatever the framing says.
      return "CONNECT with a body";
    }
    h.connect_authority = target;
    return nullptr;
  }
  if (target == "*") {
    if (h.method != "OPTIONS") {
      return "asterisk-form target on a method other than OPTIONS";
    }
    h.origin_target = target;
    return nullptr;
  }
  if (!target.empty() && target.front() == '/') {
    h.origin_target = target;
    return nullptr;
  }
  const std::size_t scheme = schemeLength(target);
  if (scheme == 0) {
    return "request target in no known form";
  }
  const std::string_view after = target.substr(scheme + 3);
  const std::size_t authority_end = after.find_first_of("/?");
  const std::string_view authority = after.substr(0, authority_end);
  if (!detail::isAuthority(authority, false)) {
    return "bad authority in an absolute-form target";
  }
  h.absolute_form = true;
  h.uri_scheme = target.substr(0, scheme);
  h.uri_authority = authority;
  const std::string_view rest =
      authority_end == std::string_view::npos ? std::string_view() : after.substr(authority_end);
  if (rest.empty()) {
    h.origin_target = "/";
  } else if (rest.front() == '?') {
    origin_buffer_.clear();  // (not assign("/"): gcc 12 reports a false -Wrestrict for it)
    origin_buffer_.push_back('/');
    origin_buffer_.append(rest);
    h.origin_target = origin_buffer_;
  } else {
    h.origin_target = rest;
  }
  return nullptr;
}

}  // namespace sluice::proxy::http
