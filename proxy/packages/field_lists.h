#pragma once
// Comma-separated field values as HTTP writes them (RFC 9110 §5.6.1), and their weights
// (§12.4.2): what the Accept-Encoding and Accept readers of this module share. Internal to
// proxy/packages; nothing is allocated.

#include <string_view>

#include "base/ascii.h"

namespace sluice::proxy::packages::field_lists {

constexpr bool isOws(char c) { return c == ' ' || c == '\t'; }

inline std::string_view trimOws(std::string_view s) {
  while (!s.empty() && isOws(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && isOws(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

// The first `delimiter` of `text` outside a quoted-string (RFC 9110 §5.6.4: '"' to '"', a
// backslash quoting the byte after it), or npos. An unclosed quote runs to the end: what it
// holds splits nothing.
inline std::size_t findOutsideQuotes(std::string_view text, char delimiter) {
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '\\') {
      ++i;  // the quoted byte, whatever it is
    } else if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && c == delimiter) {
      return i;
    }
  }
  return std::string_view::npos;
}

// Calls `element(text)` for each non-empty element of a comma-separated list (RFC 9110 §5.6.1),
// trimmed; stops when it returns false. A comma inside a parameter's quoted value splits
// nothing (`text/html;x="a,b"` is one element).
template <typename Element>
void forEachListElement(std::string_view list, Element element) {
  while (true) {
    const std::size_t comma = findOutsideQuotes(list, ',');
    const std::string_view item = trimOws(list.substr(0, comma));
    if (!item.empty() && !element(item)) {
      return;
    }
    if (comma == std::string_view::npos) {
      return;
    }
    list.remove_prefix(comma + 1);
  }
}

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), RFC 9110 §12.4.2. Returns the
// weight in thousandths, or -1 when malformed.
inline int parseQvalue(std::string_view text) {
  if (text.empty() || (text[0] != '0' && text[0] != '1')) {
    return -1;
  }
  int thousandths = 0;
  if (text.size() > 1) {
    if (text[1] != '.' || text.size() > 5) {
      return -1;
    }
    int scale = 100;
    for (char c : text.substr(2)) {
      if (!ascii::isDigit(c)) {
        return -1;
      }
      thousandths += (c - '0') * scale;
      scale /= 10;
    }
  }
  if (text[0] == '1') {
    return thousandths == 0 ? 1000 : -1;
  }
  return thousandths;
}

}  // namespace sluice::proxy::packages::field_lists
