#include "proxy/http/field_rules.h"

#include <limits>

namespace sluice::proxy::http::detail {
namespace {

constexpr std::string_view kContentLength = "Content-Length";
constexpr std::string_view kTransferEncoding = "Transfer-Encoding";

// RFC 3986 reg-name: unreserved, pct-encoded and sub-delims. Which of these a name may really
// hold is policy's question (canonicalizeHost); here only the shape of the target is checked.
bool isRegNameChar(char c) {
  if (ascii::isAlpha(c) || ascii::isDigit(c)) {
    return true;
  }
  switch (c) {
    // clang-format off
    case '-': case '.': case '_': case '~': case '%': case '!': case '$': case '&': case '\'':
    case '(': case ')': case '*': case '+': case ',': case ';': case '=':
      // clang-format on
      return true;
    default:
      return false;
  }
}

bool isPort(std::string_view text) {
  if (text.empty() || text.size() > 5 || text.front() == '0') {
    return false;
  }
  unsigned value = 0;
  for (char c : text) {
    if (!ascii::isDigit(c)) {
      return false;
    }
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value <= 65535;
}

}  // namespace

bool parseContentLength(std::string_view text, std::uint64_t& out) {
  if (text.empty()) {
    return false;
  }
  constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::uint64_t value = 0;
  for (char c : text) {
    if (!ascii::isDigit(c)) {
      return false;
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (kMax - digit) / 10) {
      return false;
    }
    value = value * 10 + digit;
  }
  out = value;
  return true;
}

const char* checkFields(const HeaderBlock& headers, bool http10, BodyFields& out) {
  out = BodyFields{};
  std::size_t content_lengths = 0;
  std::size_t transfer_encodings = 0;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const std::string_view name = headers.name(i);
    const std::string_view value = headers.value(i);
    if (!ascii::isToken(name)) {
      return "field name is not a token";
    }
    if (!ascii::isFieldValue(value)) {
      return "control character in a field value";
    }
    if (ascii::iequals(name, kContentLength)) {
      if (++content_lengths > 1) {
        return "repeated Content-Length";
      }
      if (!parseContentLength(value, out.content_length)) {
        return "Content-Length is not a number below 2^63";
      }
      out.has_content_length = true;
    } else if (ascii::iequals(name, kTransferEncoding)) {
      if (++transfer_encodings > 1) {
        return "repeated Transfer-Encoding";
      }
      if (!ascii::iequals(value, "chunked")) {
        return "Transfer-Encoding other than chunked";
      }
      out.chunked = true;
    }
  }
  if (out.chunked && http10) {
    return "Transfer-Encoding on HTTP/1.0";
  }
  if (out.chunked && out.has_content_length) {
    return "both Content-Length and Transfer-Encoding";
  }
  return nullptr;
}

ConnectionOptions connectionOptions(const HeaderBlock& headers) {
  ConnectionOptions options;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (ascii::iequals(headers.name(i), "Connection")) {
      options.close = options.close || ascii::listContains(headers.value(i), "close");
      options.keep_alive =
          options.keep_alive || ascii::listContains(headers.value(i), "keep-alive");
    }
  }
  return options;
}

bool isAuthority(std::string_view text, bool port_required) {
  std::string_view host;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close < 2) {
      return false;
    }
    for (char c : text.substr(1, close - 1)) {
      if (!(ascii::isHexDigit(c) || c == ':' || c == '.')) {
        return false;  // also refuses a zone id ("%25eth0") and IPvFuture
      }
    }
    host = text.substr(0, close + 1);
    rest = text.substr(close + 1);
  } else {
    const std::size_t colon = text.find(':');
    host = text.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon);
    if (host.empty()) {
      return false;
    }
    for (char c : host) {
      if (!isRegNameChar(c)) {
        return false;  // '@' (userinfo), '/', '?', '#', '[', ']' among others
      }
    }
  }
  if (rest.empty()) {
    return !port_required;
  }
  return rest.front() == ':' && isPort(rest.substr(1));
}

}  // namespace sluice::proxy::http::detail
