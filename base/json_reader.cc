#include "base/json_reader.h"

#include <charconv>
#include <cstdlib>

#include "base/json_writer.h"

namespace sluice {

namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool fail(const char* why) {
    if (error_ == nullptr) {
      error_ = why;
    }
    return false;
  }
  const char* error() const { return error_; }

  void skipSpace() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool atEnd() const { return at_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[at_]; }
  bool take(char c) {
    if (peek() != c || atEnd()) {
      return false;
    }
    ++at_;
    return true;
  }
  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) {
      return fail("not a JSON value");
    }
    at_ += word.size();
    return true;
  }

  static int hexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool hex4(std::uint32_t& out) {
    if (text_.size() - at_ < 4) {
      return fail("a short \\u escape");
    }
    out = 0;
    for (int i = 0; i < 4; ++i) {
      int d = hexDigit(text_[at_++]);
      if (d < 0) {
        return fail("a bad \\u escape");
      }
      out = out << 4 | static_cast<std::uint32_t>(d);
    }
    return true;
  }
  static void appendUtf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // A string, after its opening quote; into `out` when given.
  bool string(std::string* out) {
    while (true) {
      if (atEnd()) {
        return fail("an unterminated string");
      }
      unsigned char c = static_cast<unsigned char>(text_[at_]);
      if (c == '"') {
        ++at_;
        return true;
      }
      if (c < 0x20) {
        return fail("a control character in a string");
      }
      if (c == '\\') {
        ++at_;
        if (atEnd()) {
          return fail("an unterminated string");
        }
        char e = text_[at_++];
        std::uint32_t cp = 0;
        switch (e) {
          case '"':
            cp = '"';
            break;
          case '\\':
            cp = '\\';
            break;
          case '/':
            cp = '/';
            break;
          case 'b':
            cp = '\b';
            break;
          case 'f':
            cp = '\f';
            break;
          case 'n':
            cp = '\n';
            break;
          case 'r':
            cp = '\r';
            break;
          case 't':
            cp = '\t';
            break;
          case 'u': {
            if (!hex4(cp)) {
              return false;
            }
            if (cp >= 0xd800 && cp < 0xdc00) {  // a high surrogate: its pair must follow
              std::uint32_t low = 0;
              if (!take('\\') || !take('u') || !hex4(low) || low < 0xdc00 || low >= 0xe000) {
                return fail("a lone surrogate");
              }
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
              return fail("a lone surrogate");
            }
            break;
          }
          default:
            return fail("a bad escape");
        }
        if (out != nullptr) {
          appendUtf8(*out, cp);
        }
        continue;
      }
      std::size_t n = c < 0x80 ? 1 : utf8SequenceLength(text_, at_);
      if (n == 0) {
        return fail("a string that is not UTF-8");
      }
      if (out != nullptr) {
        out->append(text_.data() + at_, n);
      }
      at_ += n;
    }
  }

  bool number(JsonScalar* out) {
    const std::size_t start = at_;
    take('-');
    if (take('0')) {
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++at_;
    } else {
      return fail("not a JSON value");
    }
    if (take('.')) {
      if (!(peek() >= '0' && peek() <= '9')) return fail("a bad number");
      while (peek() >= '0' && peek() <= '9') ++at_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      if (!(peek() >= '0' && peek() <= '9')) return fail("a bad number");
      while (peek() >= '0' && peek() <= '9') ++at_;
    }
    if (out != nullptr) {
      out->kind = JsonScalar::Kind::Number;
      out->text.assign(text_.substr(start, at_ - start));
      out->number = std::strtod(out->text.c_str(), nullptr);
    }
    return true;
  }

  // Any value; a scalar into `out` when given, an array or object checked and skipped.
  bool value(JsonScalar* out, int depth) {
    skipSpace();
    switch (peek()) {
      case '"':
        ++at_;
        if (out != nullptr) {
          out->kind = JsonScalar::Kind::String;
        }
        return string(out != nullptr ? &out->text : nullptr);
      case 't':
      case 'f':
        if (out != nullptr) {
          out->kind = JsonScalar::Kind::Bool;
          out->boolean = peek() == 't';
        }
        return literal(peek() == 't' ? "true" : "false");
      case 'n':
        return literal("null");
      case '[':
      case '{': {
        const std::size_t start = at_;
        if (!nested(depth + 1)) {
          return false;
        }
        if (out != nullptr) {  // a top-level member's: its text, for a reader of its own
          out->kind = JsonScalar::Kind::Nested;
          out->text.assign(text_.substr(start, at_ - start));
        }
        return true;
      }
      default:
        return number(out);
    }
  }

  bool nested(int depth) {
    if (depth > JsonObjectLine::kMaxDepth) {
      return fail("nested too deep");
    }
    const bool object = text_[at_++] == '{';
    const char close = object ? '}' : ']';
    skipSpace();
    if (take(close)) {
      return true;
    }
    while (true) {
      skipSpace();
      if (object) {
        if (!take('"') || !string(nullptr)) {
          return fail("a member without a name");
        }
        skipSpace();
        if (!take(':')) {
          return fail("a member without ':'");
        }
      }
      if (!value(nullptr, depth)) {
        return false;
      }
      skipSpace();
      if (take(close)) {
        return true;
      }
      if (!take(',')) {
        return fail("a missing ','");
      }
    }
  }

  std::size_t at_ = 0;

 private:
  std::string_view text_;
  const char* error_ = nullptr;
};

}  // namespace

std::optional<JsonObjectLine> JsonObjectLine::parse(std::string_view line, std::string* error) {
  Reader r(line);
  JsonObjectLine object;
  auto failed = [&](const char* why) -> std::optional<JsonObjectLine> {
    if (error != nullptr) {
      *error = r.error() != nullptr ? r.error() : why;
    }
    return std::nullopt;
  };
  r.skipSpace();
  if (!r.take('{')) {
    return failed("not a JSON object");
  }
  r.skipSpace();
  if (!r.take('}')) {
    while (true) {
      r.skipSpace();
      std::string key;
      if (!r.take('"') || !r.string(&key)) {
        return failed("a member without a name");
      }
      r.skipSpace();
      if (!r.take(':')) {
        return failed("a member without ':'");
      }
      JsonScalar value;
      if (!r.value(&value, 0)) {
        return failed("a bad value");
      }
      object.members_.emplace_back(std::move(key), std::move(value));
      r.skipSpace();
      if (r.take('}')) {
        break;
      }
      if (!r.take(',')) {
        return failed("a missing ','");
      }
    }
  }
  r.skipSpace();
  if (!r.atEnd()) {
    return failed("more after the object");
  }
  return object;
}

const JsonScalar* JsonObjectLine::find(std::string_view key) const {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->first == key) {
      return &it->second;
    }
  }
  return nullptr;
}

std::optional<std::string_view> JsonObjectLine::string(std::string_view key) const {
  const JsonScalar* v = find(key);
  if (v == nullptr || v->kind != JsonScalar::Kind::String) {
    return std::nullopt;
  }
  return v->text;
}

std::optional<std::uint64_t> JsonObjectLine::count(std::string_view key) const {
  const JsonScalar* v = find(key);
  if (v == nullptr || v->kind != JsonScalar::Kind::Number || v->text.empty() ||
      v->text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(v->text.data(), v->text.data() + v->text.size(), n);
  if (ec != std::errc() || end != v->text.data() + v->text.size() || n > (1ull << 53)) {
    return std::nullopt;
  }
  return n;
}

}  // namespace sluice
