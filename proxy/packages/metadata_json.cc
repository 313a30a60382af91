#include "proxy/packages/metadata_json.h"

#include <simdjson.h>

#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/ascii.h"

namespace sluice::proxy::packages {

static_assert(simdjson::SIMDJSON_PADDING <= kMetadataPadding,
              "the documents' padding is simdjson's");
static_assert(kMaxJsonDepth % 64 == 0);

PaddedDocument::PaddedDocument(std::string& text) : text_(text), size_(text.size()) {
  text_.resize(size_ + kMetadataPadding, '\0');
}

PaddedDocument::~PaddedDocument() { text_.resize(size_); }

namespace {

// Past the escape at `p` (a '\'), or nullptr. A high surrogate must be followed by a low one,
// and a low one must not stand alone: simdjson refuses both, and so must what is copied.
const char* endOfEscape(const char* p) {
  switch (p[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      return p + 2;
    case 'u':
      break;
    default:
      return nullptr;
  }
  const auto code = [](const char* hex) {
    int value = 0;
    for (int i = 0; i < 4; ++i) {  // stops at the first non-hex byte (the NUL sentinel too)
      const int digit = ascii::hexValue(hex[i]);
      if (digit < 0) {
        return -1;
      }
      value = value << 4 | digit;
    }
    return value;
  };
  const int first = code(p + 2);
  if (first < 0 || (first >= 0xdc00 && first <= 0xdfff)) {
    return nullptr;
  }
  if (first < 0xd800 || first > 0xdbff) {
    return p + 6;
  }
  if (p[6] != '\\' || p[7] != 'u') {
    return nullptr;
  }
  const int second = code(p + 8);
  return second >= 0xdc00 && second <= 0xdfff ? p + 12 : nullptr;
}

// The offset of the first byte among the next ones at `p` that a string's scan must look at
// (a quote, a backslash, a control byte: the NUL sentinel too), or the count looked at when
// there is none. SSE2 (every x86-64) looks at 16; elsewhere 8 bytes in a word (little-endian).
// Reads stay within the padding: a NUL stops the scan first.
#if defined(__SSE2__)
constexpr int kStringStride = 16;
inline int firstStringSpecial(const char* p) {
  const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i quote = _mm_cmpeq_epi8(chunk, _mm_set1_epi8('"'));
  const __m128i backslash = _mm_cmpeq_epi8(chunk, _mm_set1_epi8('\\'));
  const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(chunk, _mm_set1_epi8(0x1f)), chunk);
  const auto mask = static_cast<unsigned>(
      _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)));
  return mask == 0 ? kStringStride : std::countr_zero(mask);
}
#else
constexpr int kStringStride = 8;
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighBits = 0x8080808080808080ULL;
inline int firstStringSpecial(const char* p) {
  std::uint64_t chunk;
  std::memcpy(&chunk, p, sizeof chunk);
  // The lowest flagged byte is exact: a borrow only ever flags bytes above a true one.
  const auto flags = [](std::uint64_t x, std::uint64_t n) {
    return (x - kOnes * n) & ~x & kHighBits;
  };
  const std::uint64_t mask =
      flags(chunk, 0x20) | flags(chunk ^ (kOnes * '"'), 1) | flags(chunk ^ (kOnes * '\\'), 1);
  return mask == 0 ? kStringStride : std::countr_zero(mask) / 8;
}
#endif

// Past the closing quote of the string whose body starts at `p`, or nullptr. Strings are most
// of a packument's bytes (readmes, descriptions), hence the strides.
const char* endOfStringBody(const char* p) {
  for (;;) {
    const int skip = firstStringSpecial(p);
    p += skip;
    if (skip == kStringStride) {
      continue;
    }
    if (*p == '"') {
      return p + 1;
    }
    if (*p != '\\') {
      return nullptr;  // a control byte
    }
    p = endOfEscape(p);
    if (p == nullptr) {
      return nullptr;
    }
  }
}

const char* endOfDigits(const char* p) {
  while (ascii::isDigit(*p)) {
    ++p;
  }
  return p;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? ; what follows is the caller's check.
const char* endOfNumber(const char* p) {
  if (*p == '-') {
    ++p;
  }
  if (*p == '0') {
    ++p;
  } else if (*p >= '1' && *p <= '9') {
    p = endOfDigits(p);
  } else {
    return nullptr;
  }
  if (*p == '.') {
    ++p;
    if (!ascii::isDigit(*p)) {
      return nullptr;
    }
    p = endOfDigits(p);
  }
  if (*p == 'e' || *p == 'E') {
    ++p;
    if (*p == '+' || *p == '-') {
      ++p;
    }
    if (!ascii::isDigit(*p)) {
      return nullptr;
    }
    p = endOfDigits(p);
  }
  return p;
}

// Past `"key" :` and the whitespace after it, at the member's value; nullptr if not there.
const char* pastMemberKey(const char* p) {
  if (*p != '"') {
    return nullptr;
  }
  p = endOfJsonString(p);
  return p == nullptr ? nullptr : valueAfterKey(p);
}

}  // namespace

const char* endOfJsonString(const char* quote) {
  return *quote == '"' ? endOfStringBody(quote + 1) : nullptr;
}

const char* endOfJsonValue(const char* p) {
  // One bit per open container: set for an object. No recursion, so no stack to exhaust.
  std::uint64_t objects[kMaxJsonDepth / 64] = {};
  std::size_t depth = 0;
  const auto inObject = [&] { return (objects[(depth - 1) / 64] >> ((depth - 1) % 64) & 1) != 0; };
  for (;;) {
    switch (*p) {
      case '{':
      case '[': {
        if (depth == kMaxJsonDepth) {
          return nullptr;
        }
        const bool object = *p == '{';
        const std::uint64_t bit = std::uint64_t{1} << (depth % 64);
        objects[depth / 64] = object ? objects[depth / 64] | bit : objects[depth / 64] & ~bit;
        ++depth;
        p = skipJsonSpace(p + 1);
        if (*p == (object ? '}' : ']')) {
          ++p;
          --depth;
          break;
        }
        if (object && (p = pastMemberKey(p)) == nullptr) {
          return nullptr;
        }
        continue;  // the first value of the container
      }
      case '"':
        p = endOfJsonString(p);
        break;
      case 't':
        p = std::memcmp(p, "true", 4) == 0 ? p + 4 : nullptr;
        break;
      case 'f':
        p = std::memcmp(p, "false", 5) == 0 ? p + 5 : nullptr;
        break;
      case 'n':
        p = std::memcmp(p, "null", 4) == 0 ? p + 4 : nullptr;
        break;
      default:
        p = endOfNumber(p);
        break;
    }
    if (p == nullptr) {
      return nullptr;
    }
    // After a value: the end, a ',' and the next member, or the container's close.
    for (;;) {
      if (depth == 0) {
        return p;
      }
      p = skipJsonSpace(p);
      const bool object = inObject();
      if (*p == ',') {
        p = skipJsonSpace(p + 1);
        if (object && (p = pastMemberKey(p)) == nullptr) {
          return nullptr;
        }
        break;
      }
      if (*p != (object ? '}' : ']')) {
        return nullptr;
      }
      ++p;
      --depth;
    }
  }
}

std::string_view plainKey(const char* quote, const char** end) {
  *end = nullptr;
  if (*quote != '"') {
    return {};
  }
  const char* p = quote + 1;
  for (;;) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') {
      *end = p + 1;
      return {quote + 1, static_cast<std::size_t>(p - quote - 1)};
    }
    if (c == '\\' || c < 0x20) {
      return {};
    }
    ++p;
  }
}

const char* valueAfterKey(const char* key_end) {
  const char* p = skipJsonSpace(key_end);
  return *p == ':' ? skipJsonSpace(p + 1) : nullptr;
}

bool MemberChain::startsAt(const char* begin) {
  const char* p = skipJsonSpace(next_);
  if (count_ > 0) {
    if (*p != ',') {
      return false;
    }
    p = skipJsonSpace(p + 1);
  }
  ++count_;
  next_ = begin;
  return p == begin;
}

const char* MemberChain::close() {
  const char* p = skipJsonSpace(next_);
  return *p == close_ ? p + 1 : nullptr;
}

namespace {

// Days from 1970-01-01 to the given civil date (proleptic Gregorian), after H. Hinnant.
std::int64_t daysFromCivil(std::int64_t year, unsigned month, unsigned day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const auto year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

unsigned daysInMonth(unsigned year, unsigned month) {
  static constexpr unsigned kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// The `count` digits at text[at...] as a number, or -1.
int fixedDigits(std::string_view text, std::size_t at, std::size_t count) {
  if (at + count > text.size()) {
    return -1;
  }
  int value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (!ascii::isDigit(text[i])) {
      return -1;
    }
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

}  // namespace

std::optional<std::int64_t> parseIsoTime(std::string_view text) {
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  const int year = fixedDigits(text, 0, 4);
  const int month = fixedDigits(text, 5, 2);
  const int day = fixedDigits(text, 8, 2);
  const int hour = fixedDigits(text, 11, 2);
  const int minute = fixedDigits(text, 14, 2);
  const int second = fixedDigits(text, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 ||
      day > static_cast<int>(
                daysInMonth(static_cast<unsigned>(year), static_cast<unsigned>(month))) ||
      hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) {
    return std::nullopt;
  }
  std::size_t at = 19;
  int millis = 0;
  if (text[at] == '.') {
    const std::size_t first = ++at;
    while (at < text.size() && ascii::isDigit(text[at])) {
      if (at - first < 3) {
        millis = millis * 10 + (text[at] - '0');
      }
      ++at;
    }
    const std::size_t digits = at - first;
    if (digits == 0 || digits > 9) {
      return std::nullopt;
    }
    for (std::size_t d = digits; d < 3; ++d) {
      millis *= 10;
    }
  }
  int offset_minutes = 0;
  if (at < text.size() && text[at] == 'Z') {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    const int offset_hours = fixedDigits(text, at + 1, 2);
    const int offset_mins = fixedDigits(text, at + 4, 2);
    if (offset_hours < 0 || offset_hours > 23 || offset_mins < 0 || offset_mins > 59 ||
        text[at + 3] != ':') {
      return std::nullopt;
    }
    offset_minutes = (offset_hours * 60 + offset_mins) * (text[at] == '-' ? -1 : 1);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != text.size()) {
    return std::nullopt;
  }
  const std::int64_t days =
      daysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t seconds = ((days * 24 + hour) * 60 + minute - offset_minutes) * 60 + second;
  return seconds * 1000 + millis;
}

}  // namespace sluice::proxy::packages
