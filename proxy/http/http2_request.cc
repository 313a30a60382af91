#include "proxy/http/http2_request.h"

#include <charconv>

#include "policy/authority.h"

namespace sluice::proxy::http {

namespace {

// A stream's :scheme is https or it is refused, so an authority without a port names 443.
constexpr std::uint16_t kHttpsPort = 443;

bool isLowerToken(std::string_view name) {
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    if (!ascii::isTokenChar(c) || ascii::isUpper(c)) {
      return false;
    }
  }
  return true;
}

// RFC 9113 §8.2.2: fields that only mean something to one HTTP/1.1 connection.
bool connectionSpecific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

// gRPC's content-type: "application/grpc", alone or followed by "+" and a message format
// ("+proto", "+json", a custom one) or by parameters (gRPC's PROTOCOL-HTTP2.md). A media type is
// case-insensitive (RFC 9110 §8.3.1), so "Application/GRPC" is gRPC too; "application/grpcx" and
// "application/grpc-web" are other media types.
bool isGrpcContentType(std::string_view value) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (value.size() < kGrpc.size() || !ascii::iequals(value.substr(0, kGrpc.size()), kGrpc)) {
    return false;
  }
  std::string_view rest = value.substr(kGrpc.size());
  if (!rest.empty() && rest.front() == '+') {
    return true;
  }
  rest = ascii::trimOws(rest);  // parameters = *( OWS ";" OWS [ parameter ] )
  return rest.empty() || rest.front() == ';';
}

}  // namespace

const char* http2FieldProblem(std::string_view name, std::string_view value) {
  std::string_view bare = name;
  if (!bare.empty() && bare.front() == ':') {
    bare.remove_prefix(1);
  }
  if (!isLowerToken(bare)) {
    return "a field name that is not a lower-case token";
  }
  for (char c : value) {
    if (c == '\r' || c == '\n' || c == '\0') {
      return "CR, LF or NUL in a field value";
    }
  }
  if (!value.empty() && (ascii::isOws(value.front()) || ascii::isOws(value.back()))) {
    return "whitespace around a field value";
  }
  if (connectionSpecific(name)) {
    return "a connection-specific field";
  }
  if (name == "te" && value != "trailers") {
    return "te other than trailers";
  }
  return nullptr;
}

void Http2RequestBuilder::reset() {
  bytes_.clear();
  method_ = scheme_ = authority_ = path_ = protocol_ = host_field_ = Slice{};
  cookie_.clear();
  regular_seen_ = false;
  list_bytes_ = 0;
  grpc_ = false;
  content_length_.reset();
  malformed_ = {};
  head_.headers.clear();
  head_.upgrade_requested = false;  // (extendedConnect() speaks of this stream only)
  head_.websocket_upgrade = false;
  refusal_ = Http2Refusal{};
  trailers_.clear();
  trailer_bytes_ = 0;
  trailers_state_ = Trailers::None;
}

Http2RequestBuilder::Slice Http2RequestBuilder::keep(std::string_view value) {
  Slice s{bytes_.size(), value.size(), true};
  bytes_.append(value);
  return s;
}

bool Http2RequestBuilder::malformed(std::string_view why) {
  if (malformed_.empty()) {
    malformed_ = why;
  }
  return false;
}

bool Http2RequestBuilder::addPseudo(std::string_view name, std::string_view value) {
  if (regular_seen_) {
    return malformed("a pseudo-header after a regular field");
  }
  Slice* slot = nullptr;
  if (name == ":method") {
    slot = &method_;
  } else if (name == ":scheme") {
    slot = &scheme_;
  } else if (name == ":authority") {
    slot = &authority_;
  } else if (name == ":path") {
    slot = &path_;
  } else if (name == ":protocol") {
    slot = &protocol_;
  } else {
    return malformed("an unknown or response pseudo-header");
  }
  if (slot->present) {
    return malformed("a repeated pseudo-header");
  }
  *slot = keep(value);
  return true;
}

bool Http2RequestBuilder::add(std::string_view name, std::string_view value) {
  if (!malformed_.empty()) {
    return false;
  }
  list_bytes_ += name.size() + value.size() + 32;
  if (list_bytes_ > max_list_bytes_) {
    return true;  // refused at its end (431); nothing more of it is kept
  }
  if (const char* problem = http2FieldProblem(name, value)) {
    return malformed(problem);
  }
  if (name.front() == ':') {
    return addPseudo(name, value);
  }
  regular_seen_ = true;
  if (name == "host") {
    if (host_field_.present) {
      // Two that name one authority are one (the first is kept); compared as below.
      if (!policy::sameAuthority(text(host_field_), value, kHttpsPort)) {
        return malformed("two host fields that differ");
      }
      return true;
    }
    host_field_ = keep(value);
    return true;
  }
  if (name == "content-length") {
    std::uint64_t n = 0;
    const char* end = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(value.data(), end, n);
    if (value.empty() || ec != std::errc() || ptr != end || value.front() == '+' ||
        (content_length_ && *content_length_ != n)) {
      return malformed("a content-length that is not one number");
    }
    content_length_ = n;
    return true;  // written by sluice from the framing
  }
  if (name == "cookie") {
    // Joined into one field for HTTP/1.1 (RFC 9113 §8.2.3); an empty crumb adds nothing.
    if (value.empty()) {
      return true;
    }
    if (!cookie_.empty()) {
      cookie_ += "; ";
    }
    cookie_ += value;
    return true;
  }
  if (name == "content-type" && isGrpcContentType(value)) {
    grpc_ = true;
  }
  head_.headers.add(name, value);
  return true;
}

bool Http2RequestBuilder::addTrailer(std::string_view name, std::string_view value) {
  if (trailers_state_ == Trailers::Malformed) {
    return false;
  }
  if (trailers_state_ == Trailers::None) {
    trailers_state_ = Trailers::Ready;
  }
  trailer_bytes_ += name.size() + value.size() + 32;
  if (trailer_bytes_ > max_list_bytes_) {
    trailers_state_ = Trailers::TooLarge;
    trailers_.clear();  // nothing more of it is kept
    return true;
  }
  if (trailers_state_ == Trailers::TooLarge) {
    return true;
  }
  const char* problem = http2FieldProblem(name, value);
  if (problem == nullptr && name.front() == ':') {
    problem = "a pseudo-header in a trailer section";
  }
  if (problem != nullptr) {
    malformed(problem);
    trailers_state_ = Trailers::Malformed;
    return false;
  }
  trailers_.add(name, value);
  return true;
}

Http2RequestBuilder::Outcome Http2RequestBuilder::finish(bool end_stream) {
  if (!malformed_.empty()) {
    return Outcome::Malformed;
  }
  if (list_bytes_ > max_list_bytes_) {
    head_.headers.clear();
    refusal_ = {policy::Reason::HeaderTooLarge, "the header list is over max_header_bytes"};
    return Outcome::Refused;
  }
  const bool connect = text(method_) == "CONNECT";
  // RFC 9113 §8.3.1 and RFC 8441 §4: what each form must carry.
  if (!method_.present || (protocol_.present && !connect)) {
    malformed("no :method, or :protocol on a method other than CONNECT");
    return Outcome::Malformed;
  }
  if (connect && !protocol_.present) {
    if (scheme_.present || path_.present || !authority_.present) {
      malformed("a CONNECT with :scheme or :path, or without :authority");
      return Outcome::Malformed;
    }
  } else if (!scheme_.present || !path_.present || text(path_).empty()) {
    malformed("no :scheme or no :path");
    return Outcome::Malformed;
  }
  if (!cookie_.empty()) {
    head_.headers.add("cookie", cookie_);
  }
  head_.method = text(method_);
  head_.target = text(path_);
  head_.origin_target = head_.target;
  head_.http_major = 2;
  head_.http_minor = 0;
  head_.keep_alive = true;
  head_.absolute_form = false;
  head_.is_connect = false;
  // sluice answers 100-continue itself when it holds the body first (docs/wire.md#framing).
  const std::optional<std::string_view> expect = head_.headers.find("expect");
  head_.expect_continue = expect && ascii::iequals(*expect, "100-continue");
  head_.upgrade_requested = false;
  head_.websocket_upgrade = false;
  if (connect && protocol_.present && text(protocol_) == "websocket") {
    head_.method = "GET";  // the HTTP/1.1 form's method: the policy decides both forms alike
    head_.upgrade_requested = true;
    head_.websocket_upgrade = true;
  }
  // :authority is the Host; a host field beside it must name the same (docs/wire.md#the-invariant).
  if (authority_.present) {
    head_.host = text(authority_);
    head_.host_count = 1;
  } else if (host_field_.present) {
    head_.host = text(host_field_);
    head_.host_count = 1;
  } else {
    head_.host = {};
    head_.host_count = 0;
  }
  if (head_.websocket_upgrade && !content_length_) {
    head_.framing = BodyFraming::None;  // DATA are the WebSocket's bytes, not a body
    head_.content_length = 0;
  } else if (end_stream) {
    head_.framing = content_length_ ? BodyFraming::ContentLength : BodyFraming::None;
    head_.content_length = content_length_.value_or(0);
  } else if (content_length_) {
    head_.framing = BodyFraming::ContentLength;
    head_.content_length = *content_length_;
  } else {
    head_.framing = BodyFraming::Chunked;  // HTTP/2 has no length: chunked toward HTTP/1.1
    head_.content_length = 0;
  }
  if (connect && !protocol_.present) {
    refusal_ = {policy::Reason::BadRequest,
                "CONNECT on a stream: sluice opens no tunnel inside a tunnel"};
    return Outcome::Refused;
  }
  if (connect && !head_.websocket_upgrade) {
    refusal_ = {policy::Reason::BadRequest,
                "an extended CONNECT for a protocol other than websocket"};
    return Outcome::Refused;
  }
  if (text(scheme_) != "https") {
    refusal_ = {policy::Reason::BadRequest, ":scheme must be https inside TLS"};
    return Outcome::Refused;
  }
  if (head_.host_count == 0) {
    refusal_ = {policy::Reason::HostMissing, "the stream has no :authority and no host"};
    return Outcome::Refused;
  }
  // The same authority as the policy reads one (docs/wire.md#http2): host canonicalised, port
  // 443 when absent; what does not parse names nothing, so it agrees with nothing.
  if (authority_.present && host_field_.present &&
      !policy::sameAuthority(text(authority_), text(host_field_), kHttpsPort)) {
    refusal_ = {policy::Reason::HostMismatch, "the host field disagrees with :authority"};
    return Outcome::Refused;
  }
  return Outcome::Ready;
}

}  // namespace sluice::proxy::http
