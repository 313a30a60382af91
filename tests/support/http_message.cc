#include "tests/support/http_message.h"

#include <strings.h>

#include <cctype>
#include <charconv>

namespace sluice::test_support {

namespace {

bool sameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// The chunked body starting at `at`: its end offset in `bytes`, 0 while incomplete.
std::size_t readChunked(std::string_view bytes, std::size_t at, std::string& body) {
  for (;;) {
    std::size_t line_end = bytes.find("\r\n", at);
    if (line_end == std::string_view::npos) {
      return 0;
    }
    std::size_t size = 0;
    std::string_view size_text = bytes.substr(at, line_end - at);
    size_text = size_text.substr(0, size_text.find(';'));
    auto parsed = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (parsed.ec != std::errc() || size_text.empty()) {
      return kMalformed;
    }
    at = line_end + 2;
    if (size == 0) {
      // Trailers (none expected), then the empty line.
      std::size_t end = bytes.find("\r\n", at);
      while (end != std::string_view::npos && end != at) {
        at = end + 2;
        end = bytes.find("\r\n", at);
      }
      return end == std::string_view::npos ? 0 : end + 2;
    }
    if (bytes.size() < at + size + 2) {
      return 0;
    }
    body.append(bytes.substr(at, size));
    at += size + 2;
  }
}

}  // namespace

std::optional<std::string> HttpMessage::header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (sameName(field, name)) {
      return value;
    }
  }
  return std::nullopt;
}

std::size_t parseHttpMessage(std::string_view bytes, bool is_response, bool bodiless,
                             HttpMessage& out) {
  std::size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    return 0;
  }
  out = HttpMessage{};
  std::string_view head = bytes.substr(0, head_end + 2);
  std::size_t line_end = head.find("\r\n");
  out.start_line = std::string(head.substr(0, line_end));
  std::string_view first = out.start_line;
  std::size_t space = first.find(' ');
  if (space == std::string_view::npos) {
    return kMalformed;
  }
  if (is_response) {
    std::string_view code = first.substr(space + 1, 3);
    if (std::from_chars(code.data(), code.data() + code.size(), out.status).ec != std::errc()) {
      return kMalformed;
    }
  } else {
    out.method = std::string(first.substr(0, space));
    std::size_t second = first.find(' ', space + 1);
    out.target = std::string(first.substr(space + 1, second - space - 1));
  }
  for (std::size_t at = line_end + 2; at < head.size();) {
    std::size_t end = head.find("\r\n", at);
    std::string_view line = head.substr(at, end - at);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return kMalformed;
    }
    out.headers.emplace_back(std::string(line.substr(0, colon)),
                             std::string(trim(line.substr(colon + 1))));
    at = end + 2;
  }
  std::size_t body_at = head_end + 4;
  if (is_response && (bodiless || out.status / 100 == 1 || out.status == 204 ||
                      out.status == 304)) {
    return body_at;
  }
  std::optional<std::string> coding = out.header("transfer-encoding");
  if (coding && sameName(*coding, "chunked")) {
    out.chunked = true;
    return readChunked(bytes, body_at, out.body);
  }
  std::optional<std::string> length = out.header("content-length");
  if (!length) {
    return is_response ? 0 : body_at;
  }
  std::size_t size = 0;
  if (std::from_chars(length->data(), length->data() + length->size(), size).ec != std::errc()) {
    return kMalformed;
  }
  if (bytes.size() < body_at + size) {
    return 0;
  }
  out.body = std::string(bytes.substr(body_at, size));
  return body_at + size;
}

}  // namespace sluice::test_support
