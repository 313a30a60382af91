#include "policy/request_path.h"
#include "base/ascii.h"

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
struct PathReader {
  std::string_view path;
  std::size_t i = 0;

  struct Char {
    int c = -1;                 // as compared with prefixes; -1 for a malformed escape
    unsigned char decoded = 0;  // the byte itself, escaped or not
    bool escaped = false;
  };

  bool done() const { return i >= path.size(); }
  Char read() {
    const auto raw = static_cast<unsigned char>(path[i]);
    if (raw != '%') {
      ++i;
      return {raw, raw, false};
    }
    if (i + 2 >= path.size()) {
      return {};
    }
    const int hi = ascii::hexValue(path[i + 1]);
    const int lo = ascii::hexValue(path[i + 2]);
    if (hi < 0 || lo < 0) {
      return {};
    }
    i += 3;
    const auto decoded = static_cast<unsigned char>(hi * 16 + lo);
    return {isUnreserved(decoded) ? decoded : '%', decoded, true};
  }
  int next() { return read().c; }
};

// Follows the decoded characters for what a second decoding would read as an escape: a '%'
// that came from "%25", then two hex digits, or 'u' and four (IIS). Characters that came from
// escapes of hex digits count as those digits: "%25%32%65" reads "%2e" after one decoding.
class SecondDecoding {
 public:
  // Returns true once the characters so far end such an escape.
  bool feed(const PathReader::Char& ch) {
    if (ch.escaped && ch.decoded == '%') {
      wanted_ = 2;
      seen_ = 0;
      return false;
    }
    if (wanted_ == 0) {
      return false;
    }
    if (seen_ == 0 && (ch.decoded == 'u' || ch.decoded == 'U')) {
      wanted_ = 5;  // 'u' and four hex digits
      seen_ = 1;
      return false;
    }
    // An escape that decodes to a hex digit is an escape of an unreserved character: it counts
    // as the digit, as it will after one decoding.
    if (!ascii::isHexDigit(static_cast<char>(ch.decoded))) {
      wanted_ = 0;
      return false;
    }
    if (++seen_ < wanted_) {
      return false;
    }
    wanted_ = 0;
    return true;
  }

 private:
  int wanted_ = 0;  // characters that complete the escape; 0: not after a decoded '%'
  int seen_ = 0;
};

std::string_view pathPart(std::string_view target) {
  std::size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

}  // namespace

TargetCheck examineRequestTarget(std::string_view target) {
  const TargetCheck invalid{PathShape::Invalid, 0};
  if (target == "*") {
    return {PathShape::Plain, 0};
  }
  if (target.empty() || target.front() != '/') {
    return invalid;
  }
  std::string_view path = pathPart(target);
  std::string_view query = target.substr(path.size());
  // The query is not matched, only forwarded: refuse what no request line may carry (controls,
  // space, DEL, non-ASCII, '#'), and let the rest through as clients send it.
  for (unsigned char c : query) {
    if (c <= 0x20 || c >= 0x7f || c == '#') {
      return invalid;
    }
  }

  // Walk the decoded path segment by segment. A segment is a dot segment if, decoded, it is "."
  // or "..", also with ";params" after it (Tomcat and others drop path parameters before
  // resolving dots: "/a/..;/b" is "/b" to them).
  std::uint8_t ambiguities = 0;
  std::size_t length = 0;       // decoded characters in the segment
  std::size_t head_length = 0;  // before the first ';'
  bool head_is_dots = true;
  bool in_params = false;
  auto endSegment = [&](bool last) {
    if (head_is_dots && (head_length == 1 || head_length == 2)) {
      ambiguities |= kDotSegment;
    }
    if (!last && length == 0) {
      ambiguities |= kEmptySegment;
    }
    length = head_length = 0;
    head_is_dots = true;
    in_params = false;
  };
  PathReader reader{path, 1};
  SecondDecoding second;
  while (!reader.done()) {
    unsigned char raw = static_cast<unsigned char>(path[reader.i]);
    if (raw != '%' && !isPathChar(raw)) {
      return invalid;
    }
    const PathReader::Char ch = reader.read();
    if (ch.c < 0) {
      return invalid;
    }
    if (ch.escaped) {
      switch (ch.decoded) {
        case '/':
          ambiguities |= kEncodedSlash;
          break;
        case '\\':
          ambiguities |= kEncodedBackslash;
          break;
        case 0:
          ambiguities |= kEncodedNul;
          break;
        default:
          break;
      }
    }
    if (second.feed(ch)) {
      ambiguities |= kDoubleEncoded;
    }
    // An encoded '/' ends a segment too: a server that decodes it before routing reads one
    // there, so "/a/..%2fb" has a dot segment and "/a/%2fb" an empty one for it.
    if (ch.decoded == '/') {
      endSegment(false);
      continue;
    }
    const int c = ch.c;
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
  return {ambiguities != 0 ? PathShape::Ambiguous : PathShape::Plain, ambiguities};
}

PathShape checkRequestTarget(std::string_view target) {
  return examineRequestTarget(target).shape;
}

bool pathHasPrefix(std::string_view target, std::string_view prefix) {
  std::string_view path = pathPart(target);
  PathReader reader{path, 0};
  bool ends_with_separator = false;
  for (std::size_t j = 0; j < prefix.size();) {
    if (reader.done()) {
      return false;
    }
    const PathReader::Char ch = reader.read();
    if (prefix[j] == '%') {  // "%2f" or "%2F" (isValidPathPrefix): an encoded '/' only
      if (!ch.escaped || ch.decoded != '/') {
        return false;
      }
      j += 3;
      ends_with_separator = true;
      continue;
    }
    if (ch.c != static_cast<unsigned char>(prefix[j])) {
      return false;
    }
    ends_with_separator = prefix[j] == '/';
    ++j;
  }
  if (!ends_with_separator && !reader.done() && reader.next() != '/') {
    return false;  // "/simple" is no prefix of "/simplex"
  }
  // An encoded '/' the prefix did not spell out is an ambiguity it does not accept.
  while (!reader.done()) {
    const PathReader::Char ch = reader.read();
    if (ch.c < 0 || (ch.escaped && ch.decoded == '/')) {
      return false;  // a malformed escape does not advance the reader: stop on it too
    }
  }
  return true;
}

bool isValidPathPrefix(std::string_view prefix) {
  if (prefix.empty() || prefix.front() != '/') {
    return false;
  }
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    const char c = prefix[i];
    if (c == '?' || c == '#') {
      return false;
    }
    // The one escape a prefix may hold is an encoded '/', in either case.
    if (c == '%' && (prefix.substr(i, 3) != "%2f" && prefix.substr(i, 3) != "%2F")) {
      return false;
    }
  }
  const TargetCheck check = examineRequestTarget(prefix);
  return check.shape != PathShape::Invalid && (check.ambiguities & ~kEncodedSlash) == 0;
}

}  // namespace sluice::policy
