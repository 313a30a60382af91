#include "policy/config_scalars.h"
#include "base/ascii.h"

#include <limits>

namespace sluice::policy {
namespace {

using ascii::isDigit;

// The leading run of digits of `text`, and what follows it.
struct SplitNumber {
  std::string_view digits;
  std::string_view rest;
};

SplitNumber splitNumber(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && isDigit(text[i])) {
    ++i;
  }
  return {text.substr(0, i), text.substr(i)};
}

// ^(0|[1-9][0-9]*)$: no sign, no leading zero (octal to yaml-cpp and strtoul(…, 0)), no space.
bool isPlainDecimal(std::string_view digits) {
  return !digits.empty() && (digits.size() == 1 || digits[0] != '0') &&
         splitNumber(digits).rest.empty();
}

// Value of plain decimal digits; false on overflow of std::uint64_t.
bool decimalValue(std::string_view digits, std::uint64_t* out) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t value = 0;
  for (char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (value > (kMax - d) / 10) {
      return false;
    }
    value = value * 10 + d;
  }
  *out = value;
  return true;
}

// Multiplies, refusing results above `limit`.
bool scaled(std::uint64_t value, std::uint64_t factor, std::uint64_t limit, std::uint64_t* out) {
  if (factor != 0 && value > limit / factor) {
    return false;
  }
  *out = value * factor;
  return true;
}

}  // namespace

void appendPrintable(std::string& out, std::string_view text) {
  constexpr char kHex[] = "0123456789abcdef";
  for (const char byte : text) {
    const auto c = static_cast<unsigned char>(byte);
    if (c >= 0x20 && c < 0x7f) {
      out += byte;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
}

std::string quoteForMessage(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string out = "'";
  const std::size_t shown = text.size() > kShown ? kShown : text.size();
  appendPrintable(out, text.substr(0, shown));
  if (shown < text.size()) {
    out += "...";
  }
  out += "'";
  return out;
}

Result<std::uint64_t, std::string> parseDecimal(std::string_view text) {
  if (!isPlainDecimal(text)) {
    std::string message = quoteForMessage(text) + " is not a plain decimal number";
    if (text.size() > 1 && text[0] == '0') {
      message += " (a leading 0 or 0x would be read as octal or hex)";
    }
    return Err{std::move(message)};
  }
  std::uint64_t value = 0;
  if (!decimalValue(text, &value)) {
    return Err{quoteForMessage(text) + " is too large"};
  }
  return value;
}

Result<std::chrono::milliseconds, std::string> parseAge(std::string_view text) {
  const SplitNumber split = splitNumber(text);
  std::uint64_t factor = 0;
  if (split.rest == "h") {
    factor = 60 * 60 * 1000;
  } else if (split.rest == "d") {
    factor = 24 * 60 * 60 * 1000;
  } else {
    auto short_one = parseDuration(text);
    if (!short_one) {
      return Err{quoteForMessage(text) +
                 " is not an age: write a whole number and ms, s, m, h or d, e.g. 12h or 7d"};
    }
    return short_one;
  }
  constexpr auto kMax =
      static_cast<std::uint64_t>(std::numeric_limits<std::chrono::milliseconds::rep>::max());
  std::uint64_t number = 0;
  std::uint64_t ms = 0;
  if (!isPlainDecimal(split.digits) || !decimalValue(split.digits, &number) ||
      !scaled(number, factor, kMax, &ms)) {
    return Err{quoteForMessage(text) +
               " is not an age: write a whole number and ms, s, m, h or "
               "d, e.g. 12h or 7d"};
  }
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(ms));
}

Result<std::chrono::milliseconds, std::string> parseDuration(std::string_view text) {
  const SplitNumber split = splitNumber(text);
  std::uint64_t factor = 0;
  if (split.rest == "ms") {
    factor = 1;
  } else if (split.rest == "s") {
    factor = 1000;
  } else if (split.rest == "m") {
    factor = 60 * 1000;
  }
  if (isPlainDecimal(split.digits) && split.rest.empty()) {
    return Err{quoteForMessage(text) + " needs a unit: ms, s or m"};
  }
  if (!isPlainDecimal(split.digits) || factor == 0) {
    return Err{quoteForMessage(text) +
               " is not a duration: write a whole number and ms, s or m, e.g. 500ms, 2s or 1m"};
  }
  constexpr auto kMax =
      static_cast<std::uint64_t>(std::numeric_limits<std::chrono::milliseconds::rep>::max());
  std::uint64_t number = 0;
  std::uint64_t ms = 0;
  if (!decimalValue(split.digits, &number) || !scaled(number, factor, kMax, &ms)) {
    return Err{quoteForMessage(text) + " is too large"};
  }
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(ms));
}

Result<std::uint64_t, std::string> parseSize(std::string_view text) {
  const SplitNumber split = splitNumber(text);
  std::uint64_t factor = 0;
  if (split.rest.empty() || split.rest == "B") {
    factor = 1;
  } else if (split.rest == "KiB") {
    factor = std::uint64_t{1} << 10;
  } else if (split.rest == "MiB") {
    factor = std::uint64_t{1} << 20;
  } else if (split.rest == "GiB") {
    factor = std::uint64_t{1} << 30;
  }
  if (!isPlainDecimal(split.digits) || factor == 0) {
    return Err{quoteForMessage(text) +
               " is not a size: write a whole number of bytes, or one with KiB, MiB or GiB, "
               "e.g. 65536 or 64KiB"};
  }
  std::uint64_t number = 0;
  std::uint64_t bytes = 0;
  if (!decimalValue(split.digits, &number) ||
      !scaled(number, factor, std::numeric_limits<std::uint64_t>::max(), &bytes)) {
    return Err{quoteForMessage(text) + " is too large"};
  }
  return bytes;
}

Result<Ok, std::string> checkName(std::string_view text) {
  constexpr std::size_t kMaxLength = 64;
  bool ok = !text.empty() && text.size() <= kMaxLength;
  for (char c : text) {
    ok = ok && (ascii::isLower(c) || isDigit(c) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return Err{quoteForMessage(text) +
               " is not a valid name: use 1 to 64 of a-z, 0-9, '.', '_' and '-'"};
  }
  // A sandbox name becomes a directory under the CA base; these two would not.
  if (text == "." || text == "..") {
    return Err{quoteForMessage(text) + " is not a valid name: it names a directory"};
  }
  return Ok{};
}

Result<Ok, std::string> checkMethod(std::string_view text) {
  bool lower = false;
  for (char c : text) {
    lower = lower || ascii::isLower(c);
  }
  if (!ascii::isToken(text)) {
    return Err{quoteForMessage(text) + " is not an HTTP method"};
  }
  if (lower) {
    std::string upper(text);
    for (char& c : upper) {
      if (c >= 'a' && c <= 'z') {
        c = static_cast<char>(c - 'a' + 'A');
      }
    }
    return Err{quoteForMessage(text) + ": methods are case-sensitive; write " + upper};
  }
  return Ok{};
}

Result<std::string, std::string> parseHeaderName(std::string_view text) {
  if (!ascii::isToken(text)) {
    return Err{quoteForMessage(text) +
               " is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)"};
  }
  std::string lower(text);
  for (char& c : lower) {
    c = ascii::toLower(c);
  }
  return lower;
}

}  // namespace sluice::policy
