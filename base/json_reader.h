#pragma once
// Reading one JSON object of one line, as audit logs hold them (docs/audit.md): its top-level
// members with scalar values (string, number, true/false, null); a member whose value is an
// array or an object is checked and kept as its text (Nested), which JsonObjectLine::parse can
// read again when it is an object of scalars (an audit record's `package`). Strict RFC 8259
// otherwise: anything else, or nesting deeper than kMaxDepth, is not an object. The input may
// be anything (an edited log, a file that is no log at all): no input makes it read past the
// end, recurse deeper than kMaxDepth or allocate more than twice the line's size.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct JsonScalar {
  enum class Kind : std::uint8_t { Null, Bool, Number, String, Nested };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  // String: the value unescaped (UTF-8); Number: as written; Nested: the array or object as
  // written (checked, so valid JSON)
  std::string text;
};

class JsonObjectLine {
 public:
  static constexpr int kMaxDepth = 32;

  // The object `line` holds, or nullopt (with why in *error, when given).
  static std::optional<JsonObjectLine> parse(std::string_view line, std::string* error = nullptr);

  // The member's value, or null when absent. (A key given twice: the last one.)
  const JsonScalar* find(std::string_view key) const;
  // The member's string, or nullopt when it is absent or not a string.
  std::optional<std::string_view> string(std::string_view key) const;
  // The member's number as a non-negative integer, or nullopt (absent, null, not a whole
  // number in 0..2^53).
  std::optional<std::uint64_t> count(std::string_view key) const;

 private:
  std::vector<std::pair<std::string, JsonScalar>> members_;
};

}  // namespace sluice
