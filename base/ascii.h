#pragma once
// ASCII character classes and the token rules of RFC 9110, for every parser of hostile bytes
// (policy/'s names, paths and config scalars, proxy/http/'s heads, the commands' flags). The
// one definition: proxy/http/header_block.h names these in `http::ascii` beside the rules of
// field values. Locale-free on purpose: <cctype> answers by the C locale of the process, and a
// parser of hostile bytes must not depend on it. A byte of 0x80 or above is no letter, digit or
// token character.

#include <cstddef>
#include <string_view>

namespace sluice::ascii {

constexpr bool isDigit(char c) { return c >= '0' && c <= '9'; }
constexpr bool isLower(char c) { return c >= 'a' && c <= 'z'; }
constexpr bool isUpper(char c) { return c >= 'A' && c <= 'Z'; }
constexpr bool isAlpha(char c) { return isLower(c) || isUpper(c); }
constexpr bool isAlnum(char c) { return isAlpha(c) || isDigit(c); }
constexpr char toLower(char c) { return isUpper(c) ? static_cast<char>(c - 'A' + 'a') : c; }

// The value of a hex digit, or -1.
constexpr int hexValue(char c) {
  if (isDigit(c)) {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}
constexpr bool isHexDigit(char c) { return hexValue(c) >= 0; }

// tchar of RFC 9110 §5.6.2: "!#$%&'*+-.^_`|~", digits and letters.
constexpr bool isTokenChar(char c) {
  if (isAlnum(c)) {
    return true;
  }
  switch (c) {
    // clang-format off
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      // clang-format on
      return true;
    default:
      return false;
  }
}

// token = 1*tchar (RFC 9110 §5.6.2): methods, field names, media types' parts.
constexpr bool isToken(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  for (char c : s) {
    if (!isTokenChar(c)) {
      return false;
    }
  }
  return true;
}

// Equal once each byte is folded by `fold` (a char -> char function).
template <typename Fold>
constexpr bool equalFolded(std::string_view a, std::string_view b, Fold fold) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (fold(a[i]) != fold(b[i])) {
      return false;
    }
  }
  return true;
}

// Equal but for the case of ASCII letters.
constexpr bool iequals(std::string_view a, std::string_view b) {
  return equalFolded(a, b, toLower);
}

}  // namespace sluice::ascii
