#pragma once
// The header fields of one HTTP/1.x message, stored the way the parser receives them: every name
// and value in one std::string, plus a vector of offset/length pairs. Names keep the case they
// arrived in; every lookup compares ASCII case-insensitively. Values have their surrounding
// whitespace (OWS) removed.
//
// Ownership: the block owns its bytes. The views name(i)/value(i)/find() return stay valid until
// the block is next modified (for a parser's block: until the next message begins). clear()
// keeps the capacity, so a block reused message after message stops allocating once it has
// grown to the largest head seen.
//
// Also here: the ASCII rules of RFC 9110 shared by the parsers and the head writer.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ascii.h"

namespace sluice::proxy::http {

// One field to write (credential injection, sluice's own error answers).
struct HeaderField {
  std::string_view name;
  std::string_view value;
};

class HeaderBlock {
 public:
  std::size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  // Inline: the head writer and the Connection-token search call them once per comparison.
  std::string_view name(std::size_t i) const {
    const Field& f = fields_[i];
    return std::string_view(bytes_.data() + f.name_offset, f.name_length);
  }
  std::string_view value(std::size_t i) const {
    const Field& f = fields_[i];
    return std::string_view(bytes_.data() + f.value_offset, f.value_length);
  }

  // Number of fields called `name` (ASCII case-insensitive).
  std::size_t count(std::string_view name) const;
  // The value of the first field called `name`, if any.
  std::optional<std::string_view> find(std::string_view name) const;

  // Forgets every field and keeps the storage.
  void clear();
  // Appends one whole field (tests, and heads built by hand). OWS around `value` is removed.
  void add(std::string_view name, std::string_view value);

  // Incremental building, for the parser: llhttp hands a name or a value over in as many pieces
  // as there were reads. A field is open from the first name piece until endValue().
  void appendNamePiece(std::string_view piece);
  void endName();
  void appendValuePiece(std::string_view piece);
  void endValue();

 private:
  struct Field {
    std::size_t name_offset = 0;
    std::size_t name_length = 0;
    std::size_t value_offset = 0;
    std::size_t value_length = 0;
  };

  std::string bytes_;
  std::vector<Field> fields_;
  std::size_t open_name_offset_ = 0;
  bool name_open_ = false;
};

// The ASCII rules of RFC 9110 as the parsers and the head writer name them: the character
// classes and tokens are base/ascii.h's (the one definition, shared with policy/ and the
// commands), named here too so that `http::ascii::iequals` and its siblings keep working; the
// rules of field values are HTTP's own.
namespace ascii {

using sluice::ascii::hexValue;
using sluice::ascii::iequals;
using sluice::ascii::isAlnum;
using sluice::ascii::isAlpha;
using sluice::ascii::isDigit;
using sluice::ascii::isHexDigit;
using sluice::ascii::isLower;
using sluice::ascii::isToken;
using sluice::ascii::isTokenChar;
using sluice::ascii::isUpper;
using sluice::ascii::toLower;

// OWS of RFC 9110 §5.6.3: SP or HTAB.
constexpr bool isOws(char c) { return c == ' ' || c == '\t'; }
// A field value as RFC 9110 §5.5 allows it: VCHAR, obs-text, SP and HTAB; no CR, LF, NUL or
// other control character.
bool isFieldValue(std::string_view s);
std::string_view trimOws(std::string_view s);
// True when the comma-separated list `list` (e.g. a Connection value) has the element `token`,
// compared case-insensitively after OWS trimming.
bool listContains(std::string_view list, std::string_view token);

}  // namespace ascii

}  // namespace sluice::proxy::http
