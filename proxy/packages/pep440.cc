#include "proxy/packages/pep440.h"

#include <cstdint>
#include <initializer_list>

#include "base/ascii.h"
#include "proxy/packages/version_text.h"

namespace sluice::proxy::packages {

namespace {

constexpr std::string_view kLocalSeparators = "-_.";

bool isSeparator(char c) { return c == '-' || c == '_' || c == '.'; }

// A left-to-right reader of the grammar in pep440.h. Each optional part is tried from a saved
// position and the position restored when it does not match, as the regular expression of
// PEP 440's appendix (and packaging's) backtracks; the parts never need more than that.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool atEnd() const { return at_ == text_.size(); }
  std::size_t position() const { return at_; }
  void restore(std::size_t at) { at_ = at; }
  char peek(std::size_t ahead = 0) const {
    return at_ + ahead < text_.size() ? ascii::toLower(text_[at_ + ahead]) : '\0';
  }
  std::string_view rest() const { return text_.substr(at_); }

  bool take(char c) {
    if (peek() != c || atEnd()) {
      return false;
    }
    ++at_;
    return true;
  }
  void takeSeparator() {
    if (!atEnd() && isSeparator(text_[at_])) {
      ++at_;
    }
  }
  // `word` in lower case; the text in any case.
  bool takeWord(std::string_view word) {
    if (text_.size() - at_ < word.size()) {
      return false;
    }
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (ascii::toLower(text_[at_ + i]) != word[i]) {
        return false;
      }
    }
    at_ += word.size();
    return true;
  }
  // Digits into `value`. false: none, or more than 64 bits hold (then the text is refused).
  bool takeNumber(std::uint64_t& value, bool& overflow) {
    const std::size_t start = at_;
    value = 0;
    while (!atEnd() && ascii::isDigit(text_[at_])) {
      const auto digit = static_cast<std::uint64_t>(text_[at_] - '0');
      if (value > (UINT64_MAX - digit) / 10) {
        overflow = true;
        return false;
      }
      value = value * 10 + digit;
      ++at_;
    }
    return at_ > start;
  }

 private:
  std::string_view text_;
  std::size_t at_ = 0;
};

// `[-_.]? word [-_.]? N?` for the first of `words` that matches; its index, or -1 with the
// position unchanged. `number` is 0 when the text gives none.
int readLabelled(Reader& reader, std::initializer_list<std::string_view> words,
                 std::uint64_t& number, bool& overflow) {
  const std::size_t start = reader.position();
  reader.takeSeparator();
  int index = 0;
  for (std::string_view word : words) {
    if (reader.takeWord(word)) {
      reader.takeSeparator();
      if (!reader.takeNumber(number, overflow)) {
        number = 0;
      }
      return index;
    }
    ++index;
  }
  reader.restore(start);
  return -1;
}

bool validLocal(std::string_view local) {
  DottedParts parts(local, kLocalSeparators);
  while (const std::optional<std::string_view> part = parts.next()) {
    if (part->empty()) {
      return false;
    }
    for (char c : *part) {
      if (!ascii::isAlnum(c)) {
        return false;
      }
    }
  }
  return true;
}

bool allDigits(std::string_view s) {
  for (char c : s) {
    if (!ascii::isDigit(c)) {
      return false;
    }
  }
  return true;
}

template <typename T>
int compareValues(T a, T b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

int compareCaseless(std::string_view a, std::string_view b) {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char x = ascii::toLower(a[i]);
    const char y = ascii::toLower(b[i]);
    if (x != y) {
      return static_cast<unsigned char>(x) < static_cast<unsigned char>(y) ? -1 : 1;
    }
  }
  return compareValues(a.size(), b.size());
}

// The pre-release part of packaging's sort key: a dev release of a bare release
// ("1.0.dev1") sorts below every pre-release of it, a version without pre-release above.
int preRank(const Pep440& v) {
  switch (v.pre) {
    case PreRelease::Alpha:
      return 1;
    case PreRelease::Beta:
      return 2;
    case PreRelease::Rc:
      return 3;
    case PreRelease::None:
      break;
  }
  return (!v.has_post && v.has_dev) ? 0 : 4;
}

int compareLocal(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) {
    return compareValues(!a.empty(), !b.empty());  // no local part first
  }
  DottedParts left(a, kLocalSeparators);
  DottedParts right(b, kLocalSeparators);
  while (true) {
    const std::optional<std::string_view> x = left.next();
    const std::optional<std::string_view> y = right.next();
    if (!x || !y) {
      return compareValues(x.has_value(), y.has_value());
    }
    const bool x_numeric = allDigits(*x);
    const bool y_numeric = allDigits(*y);
    int c = 0;
    if (x_numeric && y_numeric) {
      c = compareDigitStrings(*x, *y);
    } else if (x_numeric != y_numeric) {
      c = x_numeric ? 1 : -1;  // a number above a word
    } else {
      c = compareCaseless(*x, *y);
    }
    if (c != 0) {
      return c;
    }
  }
}

}  // namespace

std::optional<Pep440> parsePep440(std::string_view text) {
  if (text.size() > kMaxPep440Length) {
    return std::nullopt;
  }
  Reader reader(stripAsciiWhitespace(text));
  reader.take('v');
  Pep440 version;
  bool overflow = false;
  std::uint64_t number = 0;
  if (!reader.takeNumber(number, overflow)) {
    return std::nullopt;
  }
  if (reader.take('!')) {
    version.epoch = number;
    if (!reader.takeNumber(number, overflow)) {
      return std::nullopt;
    }
  }
  version.release[version.release_count++] = number;
  while (reader.peek() == '.' && ascii::isDigit(reader.peek(1))) {
    if (version.release_count == kMaxPep440Release) {
      return std::nullopt;
    }
    reader.take('.');
    if (!reader.takeNumber(number, overflow)) {
      return std::nullopt;
    }
    version.release[version.release_count++] = number;
  }

  // The words in the order of PEP 440's expression: where one is a prefix of another
  // ("a" of "alpha"), the longer is tried first.
  const int pre = readLabelled(reader, {"alpha", "a", "beta", "b", "preview", "pre", "c", "rc"},
                               version.pre_number, overflow);
  if (pre >= 0) {
    constexpr PreRelease kinds[] = {PreRelease::Alpha, PreRelease::Alpha, PreRelease::Beta,
                                    PreRelease::Beta,  PreRelease::Rc,    PreRelease::Rc,
                                    PreRelease::Rc,    PreRelease::Rc};
    version.pre = kinds[pre];
  }
  if (reader.peek() == '-' && ascii::isDigit(reader.peek(1))) {
    reader.take('-');  // "1.0-1": an implicit post-release
    version.has_post = reader.takeNumber(version.post, overflow);
  } else {
    version.has_post = readLabelled(reader, {"post", "rev", "r"}, version.post, overflow) >= 0;
  }
  version.has_dev = readLabelled(reader, {"dev"}, version.dev, overflow) >= 0;
  if (reader.take('+')) {
    version.local = reader.rest();
    if (!validLocal(version.local)) {
      return std::nullopt;
    }
    reader.restore(reader.position() + version.local.size());
  }
  if (overflow || !reader.atEnd()) {
    return std::nullopt;
  }
  return version;
}

int comparePep440(const Pep440& a, const Pep440& b) {
  if (int c = compareValues(a.epoch, b.epoch); c != 0) {
    return c;
  }
  const std::size_t n = a.release_count > b.release_count ? a.release_count : b.release_count;
  for (std::size_t i = 0; i < n; ++i) {  // a missing number is 0: 1.0 == 1.0.0
    const std::uint64_t x = i < a.release_count ? a.release[i] : 0;
    const std::uint64_t y = i < b.release_count ? b.release[i] : 0;
    if (int c = compareValues(x, y); c != 0) {
      return c;
    }
  }
  if (int c = compareValues(preRank(a), preRank(b)); c != 0) {
    return c;
  }
  if (a.pre != PreRelease::None) {
    if (int c = compareValues(a.pre_number, b.pre_number); c != 0) {
      return c;
    }
  }
  // No post-release below any post-release; no dev release above any dev release.
  if (int c = compareValues(a.has_post, b.has_post); c != 0) {
    return c;
  }
  if (int c = compareValues(a.post, b.post); c != 0) {
    return c;
  }
  if (int c = compareValues(!a.has_dev, !b.has_dev); c != 0) {
    return c;
  }
  if (int c = compareValues(a.dev, b.dev); c != 0) {
    return c;
  }
  return compareLocal(a.local, b.local);
}

std::string normalizedPep440(const Pep440& version) {
  std::string out;  // short versions stay within std::string's inline buffer: no allocation
  if (version.epoch != 0) {
    out += std::to_string(version.epoch);
    out += '!';
  }
  for (std::size_t i = 0; i < version.release_count; ++i) {
    if (i > 0) {
      out += '.';
    }
    out += std::to_string(version.release[i]);
  }
  switch (version.pre) {
    case PreRelease::Alpha:
      out += 'a';
      break;
    case PreRelease::Beta:
      out += 'b';
      break;
    case PreRelease::Rc:
      out += "rc";
      break;
    case PreRelease::None:
      break;
  }
  if (version.pre != PreRelease::None) {
    out += std::to_string(version.pre_number);
  }
  if (version.has_post) {
    out += ".post";
    out += std::to_string(version.post);
  }
  if (version.has_dev) {
    out += ".dev";
    out += std::to_string(version.dev);
  }
  if (!version.local.empty()) {
    out += '+';
    DottedParts parts(version.local, kLocalSeparators);
    bool first = true;
    while (std::optional<std::string_view> part = parts.next()) {
      if (!first) {
        out += '.';
      }
      first = false;
      if (allDigits(*part)) {  // packaging keeps a number: "007" is 7
        while (part->size() > 1 && part->front() == '0') {
          part->remove_prefix(1);
        }
      }
      for (char c : *part) {
        out += ascii::toLower(c);
      }
    }
  }
  return out;
}

std::optional<std::string> normalizePep440(std::string_view text) {
  const std::optional<Pep440> version = parsePep440(text);
  if (!version) {
    return std::nullopt;
  }
  return normalizedPep440(*version);
}

}  // namespace sluice::proxy::packages
