#include "policy/request_path.h"
#include "policy/ascii.h"

namespace sluice::policy {

namespace {

bool isUnreserved(unsigned char c) {
  return ascii::isAlnum(static_cast<char>(c)) || c == '-' || c == '.' || c == '_' || c == '~';
}
bool isSubDelim(unsigned char c) {
  switch (c) {
    case '!': case '$': case '&': case '\'': case '(': case ')':
    case '*': case '+': case ',': case ';': case '=':
      return true;
    default:
      return false;
  }
}
// RFC 3986 pchar without pct-encoded, plus '/'.
bool isPathChar(unsigned char c) {
  return isUnreserved(c) || isSubDelim(c) || c == ':' || c == '@' || c == '/';
}

// Reads one path character at `i`: an escape of an unreserved character decodes to it; any
// other escape reads as '%' (never equal to a prefix character, since prefixes hold no '%').
// Sets *encoded_reserved when the escape stands for a character the path must not hide.
struct PathReader {
  std::string_view path;
  std::size_t i = 0;

  bool done() const { return i >= path.size(); }
  // Returns the decoded character, or -1 on a malformed escape.
  int next(bool* hides_separator = nullptr) {
    unsigned char c = static_cast<unsigned char>(path[i]);
    if (c != '%') {
      ++i;
      return c;
    }
    if (i + 2 >= path.size()) {
      return -1;
    }
    int hi = ascii::hexValue(path[i + 1]);
    int lo = ascii::hexValue(path[i + 2]);
    if (hi < 0 || lo < 0) {
      return -1;
    }
    i += 3;
    unsigned char decoded = static_cast<unsigned char>(hi * 16 + lo);
    if (hides_separator != nullptr) {
      *hides_separator = decoded == '/' || decoded == '\\' || decoded == 0;
    }
    return isUnreserved(decoded) ? decoded : '%';
  }
};

std::string_view pathPart(std::string_view target) {
  std::size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

}  // namespace

PathShape checkRequestTarget(std::string_view target) {
  if (target == "*") {
    return PathShape::Plain;
  }
  if (target.empty() || target.front() != '/') {
    return PathShape::Invalid;
  }
  std::string_view path = pathPart(target);
  std::string_view query = target.substr(path.size());
  // The query is not matched, only forwarded: refuse what no request line may carry (controls,
  // space, DEL, non-ASCII, '#'), and let the rest through as clients send it.
  for (unsigned char c : query) {
    if (c <= 0x20 || c >= 0x7f || c == '#') {
      return PathShape::Invalid;
    }
  }

  // Walk the decoded path segment by segment. A segment is a dot segment if, decoded, it is "."
  // or "..", also with ";params" after it (Tomcat and others drop path parameters before
  // resolving dots: "/a/..;/b" is "/b" to them).
  bool ambiguous = false;
  std::size_t length = 0;       // decoded characters in the segment
  std::size_t head_length = 0;  // before the first ';'
  bool head_is_dots = true;
  bool in_params = false;
  auto endSegment = [&](bool last) {
    if (head_is_dots && (head_length == 1 || head_length == 2)) {
      ambiguous = true;
    }
    if (!last && length == 0) {
      ambiguous = true;  // "//": some servers merge slashes, some do not
    }
    length = head_length = 0;
    head_is_dots = true;
    in_params = false;
  };
  PathReader reader{path, 1};
  while (!reader.done()) {
    unsigned char raw = static_cast<unsigned char>(path[reader.i]);
    if (raw != '%' && !isPathChar(raw)) {
      return PathShape::Invalid;
    }
    bool hides_separator = false;
    int c = reader.next(&hides_separator);
    if (c < 0) {
      return PathShape::Invalid;
    }
    ambiguous = ambiguous || hides_separator;
    if (c == '/') {
      endSegment(false);
      continue;
    }
    ++length;
    if (c == ';') {
      in_params = true;
    }
    if (!in_params) {
      ++head_length;
      head_is_dots = head_is_dots && c == '.';
    }
  }
  endSegment(true);
  return ambiguous ? PathShape::Ambiguous : PathShape::Plain;
}

bool pathHasPrefix(std::string_view target, std::string_view prefix) {
  std::string_view path = pathPart(target);
  PathReader reader{path, 0};
  for (char expected : prefix) {
    if (reader.done()) {
      return false;
    }
    int c = reader.next();
    if (c != static_cast<unsigned char>(expected)) {
      return false;
    }
  }
  if (!prefix.empty() && prefix.back() == '/') {
    return true;
  }
  if (reader.done()) {
    return true;
  }
  return reader.next() == '/';
}

bool isValidPathPrefix(std::string_view prefix) {
  if (prefix.empty() || prefix.front() != '/') {
    return false;
  }
  for (char c : prefix) {
    if (c == '?' || c == '#' || c == '%') {
      return false;
    }
  }
  return checkRequestTarget(prefix) == PathShape::Plain;
}

}  // namespace sluice::policy
