#include "base/json_writer.h"

#include <charconv>

namespace sluice {

namespace {

constexpr char kHex[] = "0123456789abcdef";

constexpr std::size_t kShortString = 128;

// `prefix` (when not 0), '"', `text`, '"' and `suffix` (when not 0) in one append, through a
// buffer on the stack, when `text` is short and all plain: what separate(), appendJsonString
// and the ':' would write, without a push_back per quote and comma (out of line at -O2: they
// were most of the cost of a key). False (nothing written) otherwise. Keys and most values of
// an audit record or an explanation take this path.
bool appendShortPlain(std::string& out, char prefix, std::string_view text, char suffix) {
  if (text.size() > kShortString) {
    return false;
  }
  char buf[kShortString + 4];
  std::size_t n = 0;
  if (prefix != 0) {
    buf[n++] = prefix;
  }
  buf[n++] = '"';
  for (char ch : text) {
    if (!isJsonPlain(static_cast<unsigned char>(ch))) {
      return false;
    }
    buf[n++] = ch;
  }
  buf[n++] = '"';
  if (suffix != 0) {
    buf[n++] = suffix;
  }
  out.append(buf, n);
  return true;
}

void appendEscapedByte(std::string& out, unsigned char c) {
  out += "\\u00";
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

}  // namespace

std::size_t utf8SequenceLength(std::string_view s, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  std::size_t n;
  std::uint32_t min;
  std::uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, min = 0x80, cp = c & 0x1fu;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, min = 0x800, cp = c & 0x0fu;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, min = 0x10000, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) {
    return 0;
  }
  for (std::size_t k = 1; k < n; ++k) {
    if ((at(i + k) & 0xc0) != 0x80) {
      return 0;
    }
    cp = (cp << 6) | (at(i + k) & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

void appendJsonString(std::string& out, std::string_view text) {
  if (appendShortPlain(out, 0, text, 0)) {
    return;
  }
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    // Runs of characters that need no escaping are appended in one go: a record is mostly
    // such runs, and byte-at-a-time appends were a tenth of sluice's cost per request.
    std::size_t run = i;
    while (run < text.size()) {
      if (!isJsonPlain(static_cast<unsigned char>(text[run]))) {
        break;
      }
      ++run;
    }
    out.append(text.data() + i, run - i);
    i = run;
    if (i == text.size()) {
      break;
    }
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t n = utf8SequenceLength(text, i);
      if (n == 0) {
        appendEscapedByte(out, c);
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        appendEscapedByte(out, c);  // other controls and DEL
    }
    ++i;
  }
  out += '"';
}

void JsonWriter::separate() {
  if (need_comma_) {
    out_ += ',';
  }
}

JsonWriter& JsonWriter::beginObject() {
  separate();
  out_ += '{';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_ += '}';
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  separate();
  out_ += '[';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_ += ']';
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  if (appendShortPlain(out_, need_comma_ ? ',' : 0, name, ':')) {
    need_comma_ = false;
    return *this;
  }
  separate();
  appendJsonString(out_, name);
  out_ += ':';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::string(std::string_view value) {
  if (appendShortPlain(out_, need_comma_ ? ',' : 0, value, 0)) {
    need_comma_ = true;
    return *this;
  }
  separate();
  appendJsonString(out_, value);
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::number(std::int64_t value) {
  char buf[1 + 24];  // the comma, then the number (20 characters at most)
  std::size_t at = 0;
  if (need_comma_) {
    buf[at++] = ',';
  }
  auto [end, ec] = std::to_chars(buf + at, buf + sizeof(buf), value);
  (void)ec;  // it fits
  out_.append(buf, end);
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::boolean(bool value) {
  separate();
  out_ += value ? "true" : "false";
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::null() {
  out_.append(need_comma_ ? ",null" : "null");
  need_comma_ = true;
  return *this;
}

}  // namespace sluice
