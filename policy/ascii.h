#pragma once
// ASCII character classes for the parsers of policy/. Locale-free on purpose: <cctype> answers
// by the C locale of the process, and a parser of hostile bytes must not depend on it.

namespace sluice::policy::ascii {

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

}  // namespace sluice::policy::ascii
