#include "proxy/packages/semver.h"

#include "base/ascii.h"
#include "proxy/packages/version_text.h"

namespace sluice::proxy::packages {

namespace {

bool isIdentifierChar(char c) { return ascii::isAlnum(c) || c == '-'; }

bool allDigits(std::string_view s) {
  for (char c : s) {
    if (!ascii::isDigit(c)) {
      return false;
    }
  }
  return true;
}

// A numeric part: "0" or digits without a leading zero, at most kMaxSemVerNumber.
std::optional<std::uint64_t> readNumber(std::string_view text, std::size_t& at) {
  const std::size_t start = at;
  std::uint64_t value = 0;
  while (at < text.size() && ascii::isDigit(text[at])) {
    value = value * 10 + static_cast<std::uint64_t>(text[at] - '0');
    if (value > kMaxSemVerNumber) {  // checked each digit, so the product never overflows
      return std::nullopt;
    }
    ++at;
  }
  if (at == start || (text[start] == '0' && at - start > 1)) {
    return std::nullopt;
  }
  return value;
}

// Dot-separated non-empty identifiers of [0-9A-Za-z-]; numeric ones without leading zeros
// when `prerelease`.
bool validIdentifiers(std::string_view list, bool prerelease) {
  if (list.empty()) {
    return false;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = list.find('.', start);
    const std::string_view id =
        list.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (id.empty()) {
      return false;
    }
    for (char c : id) {
      if (!isIdentifierChar(c)) {
        return false;
      }
    }
    if (prerelease && id.size() > 1 && id[0] == '0' && allDigits(id)) {
      return false;
    }
    if (dot == std::string_view::npos) {
      return true;
    }
    start = dot + 1;
  }
}

int compareIdentifier(std::string_view a, std::string_view b) {
  const bool a_numeric = allDigits(a);
  const bool b_numeric = allDigits(b);
  if (a_numeric && b_numeric) {
    return compareDigitStrings(a, b);
  }
  if (a_numeric != b_numeric) {
    return a_numeric ? -1 : 1;
  }
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

int compareNumbers(std::uint64_t a, std::uint64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }

}  // namespace

std::optional<SemVer> parseSemVer(std::string_view text) {
  if (text.size() > kMaxSemVerLength) {
    return std::nullopt;
  }
  text = stripAsciiWhitespace(text);
  if (!text.empty() && (text.front() == 'v' || text.front() == '=')) {
    text.remove_prefix(1);
  }
  SemVer version;
  std::size_t at = 0;
  std::uint64_t* const parts[] = {&version.major, &version.minor, &version.patch};
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {
      if (at >= text.size() || text[at] != '.') {
        return std::nullopt;
      }
      ++at;
    }
    const std::optional<std::uint64_t> number = readNumber(text, at);
    if (!number) {
      return std::nullopt;
    }
    *parts[i] = *number;
  }
  std::string_view rest = text.substr(at);
  const std::size_t plus = rest.find('+');
  if (plus != std::string_view::npos) {
    version.build = rest.substr(plus + 1);
    if (!validIdentifiers(version.build, false)) {
      return std::nullopt;
    }
    rest = rest.substr(0, plus);
  }
  if (!rest.empty()) {
    if (rest.front() != '-') {
      return std::nullopt;
    }
    version.prerelease = rest.substr(1);
    if (!validIdentifiers(version.prerelease, true)) {
      return std::nullopt;
    }
  }
  return version;
}

int compareSemVer(const SemVer& a, const SemVer& b) {
  if (int c = compareNumbers(a.major, b.major); c != 0) {
    return c;
  }
  if (int c = compareNumbers(a.minor, b.minor); c != 0) {
    return c;
  }
  if (int c = compareNumbers(a.patch, b.patch); c != 0) {
    return c;
  }
  if (a.prerelease.empty() || b.prerelease.empty()) {
    // A release is above its prereleases (semver.org §11.3).
    return a.prerelease.empty() == b.prerelease.empty() ? 0 : (a.prerelease.empty() ? 1 : -1);
  }
  DottedParts left(a.prerelease, ".");
  DottedParts right(b.prerelease, ".");
  while (true) {
    const std::optional<std::string_view> x = left.next();
    const std::optional<std::string_view> y = right.next();
    if (!x || !y) {
      return x ? 1 : (y ? -1 : 0);  // the shorter list, a prefix of the other, first
    }
    if (int c = compareIdentifier(*x, *y); c != 0) {
      return c;
    }
  }
}

}  // namespace sluice::proxy::packages
