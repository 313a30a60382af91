#pragma once
// Compact JSON, written into a reusable buffer: audit records (the buffer is kept, so writing
// a record allocates nothing once it has grown), `sluice explain` output and the load
// generator's report. Keys come out in the order written.
//
// Strings may hold anything a sandbox sent. Valid UTF-8 passes through; control characters,
// '"' and '\' are escaped; a byte that is not part of valid UTF-8 is written as \u00XX (its
// Latin-1 reading), so every record stays valid JSON and no byte is silently lost.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

void appendJsonString(std::string& out, std::string_view text);

// Printable ASCII but '"' and '\\': the bytes appendJsonString writes as they are, so a text of
// nothing else is its own JSON string between quotes. For writers that copy such text in one go.
constexpr bool isJsonPlain(unsigned char c) {
  return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}
constexpr bool isJsonPlain(std::string_view text) {
  for (char c : text) {
    if (!isJsonPlain(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// Length of the valid UTF-8 sequence starting at text[i], or 0 if it is not one (overlongs,
// surrogates and code points above U+10FFFF are not valid).
std::size_t utf8SequenceLength(std::string_view text, std::size_t i);

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);
  JsonWriter& string(std::string_view value);
  JsonWriter& number(std::int64_t value);
  JsonWriter& boolean(bool value);
  JsonWriter& null();
  // After a value the caller appended to the buffer itself (already valid JSON).
  JsonWriter& afterValue() {
    need_comma_ = true;
    return *this;
  }

  // Shorthands for "key": value.
  JsonWriter& field(std::string_view name, std::string_view value) {
    return key(name).string(value);
  }
  JsonWriter& field(std::string_view name, std::int64_t value) { return key(name).number(value); }
  JsonWriter& fieldBool(std::string_view name, bool value) { return key(name).boolean(value); }
  JsonWriter& fieldNull(std::string_view name) { return key(name).null(); }
  // A string, or null when `value` is empty.
  JsonWriter& fieldOrNull(std::string_view name, std::string_view value) {
    return value.empty() ? fieldNull(name) : field(name, value);
  }

 private:
  void separate();

  std::string& out_;
  bool need_comma_ = false;
};

}  // namespace sluice
