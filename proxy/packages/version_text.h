#pragma once
// Small text helpers the two version orders share (semver.cc, pep440.cc): none allocates.

#include <cstddef>
#include <optional>
#include <string_view>

#include "base/ascii.h"

namespace sluice::proxy::packages {

constexpr bool isAsciiWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

constexpr std::string_view stripAsciiWhitespace(std::string_view s) {
  while (!s.empty() && isAsciiWhitespace(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && isAsciiWhitespace(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

// Two runs of ASCII digits compared by value, whatever their length (leading zeros ignored):
// exact where a conversion to a machine integer would overflow.
constexpr int compareDigitStrings(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.front() == '0') {
    a.remove_prefix(1);
  }
  while (b.size() > 1 && b.front() == '0') {
    b.remove_prefix(1);
  }
  if (a.size() != b.size()) {
    return a.size() < b.size() ? -1 : 1;
  }
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// The parts of `text` between any of the `separators`, left to right (empty parts included).
class DottedParts {
 public:
  DottedParts(std::string_view text, std::string_view separators)
      : text_(text), separators_(separators) {}

  std::optional<std::string_view> next() {
    if (done_) {
      return std::nullopt;
    }
    const std::size_t end = text_.find_first_of(separators_, at_);
    if (end == std::string_view::npos) {
      done_ = true;
      return text_.substr(at_);
    }
    const std::string_view part = text_.substr(at_, end - at_);
    at_ = end + 1;
    return part;
  }

 private:
  std::string_view text_;
  std::string_view separators_;
  std::size_t at_ = 0;
  bool done_ = false;
};

}  // namespace sluice::proxy::packages
