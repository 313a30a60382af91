#pragma once
// What the metadata filters share (docs/packages.md#metadata): the order of versions they are
// given, the padding simdjson reads past a document, a validator of the JSON spans a filter
// copies without parsing them through simdjson, a check of simdjson's view of an object's
// members against the bytes, and the registries' ISO 8601 times.
//
// The filters copy what they keep as spans of the input, so every span they copy is validated
// here first: simdjson's on-demand parser checks UTF-8 (stage 1) and the structure it walks,
// but not what it skips (an atom, a number, an escape inside a value no one asked for), and a
// filter must never pass on what is not JSON.
//
// Bounds: the validator works in place with a fixed 128-byte stack (nesting at most
// kMaxJsonDepth) and stops at the first NUL, which PaddedDocument puts after every document;
// nothing here allocates.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/package_name.h"

namespace sluice::proxy::packages {

// Bytes a document needs after its end (simdjson's SIMDJSON_PADDING, checked in the .cc).
inline constexpr std::size_t kMetadataPadding = 64;
// Deepest nesting of arrays and objects accepted (simdjson's own default).
inline constexpr std::size_t kMaxJsonDepth = 1024;

// An ecosystem's order of versions, as proxy/packages/version_order.h defines it: the filters
// take it as a parameter so that they and their tests do not depend on that file; the gateway
// passes {&compareVersions, &isPrerelease}. `compare` returns <0, 0 or >0 and should be a total
// order of the strings it is given (a hostile spelling included); the filter stays in bounds
// even when it is not.
struct VersionOrder {
  int (*compare)(policy::Ecosystem, std::string_view a, std::string_view b) = nullptr;
  bool (*is_prerelease)(policy::Ecosystem, std::string_view version) = nullptr;
};

// Why a document was refused (the gateway answers each with package_metadata_invalid). `what`
// is a fixed sentence; `offset` is where in the document it was seen, for the log.
struct MetadataError {
  std::string_view what;
  std::size_t offset = 0;
};

// Lends a caller's document to simdjson without a copy: grows it by kMetadataPadding NUL bytes
// in place (no reallocation when the caller reserved size() + kMetadataPadding, as it should)
// and shrinks it back when destroyed, so the caller's string ends as it began. Pointers into the
// document stay valid meanwhile. The NULs are also the validator's sentinel.
class PaddedDocument {
 public:
  explicit PaddedDocument(std::string& text);
  ~PaddedDocument();
  PaddedDocument(const PaddedDocument&) = delete;
  PaddedDocument& operator=(const PaddedDocument&) = delete;

  const char* begin() const { return text_.data(); }
  const char* end() const { return text_.data() + size_; }
  std::size_t size() const { return size_; }               // the document's own length
  std::size_t paddedSize() const { return text_.size(); }  // with the padding
  std::size_t offsetOf(const char* p) const { return static_cast<std::size_t>(p - begin()); }

 private:
  std::string& text_;
  std::size_t size_;
};

// Whitespace as JSON has it (RFC 8259 §2).
constexpr bool isJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline const char* skipJsonSpace(const char* p) {
  while (isJsonSpace(*p)) {
    ++p;
  }
  return p;
}

// The end of the one JSON value (RFC 8259) that starts at `begin`, or nullptr when the bytes
// there are not one. Strings: no control character, only JSON's escapes, \u surrogates paired
// (as simdjson requires). Numbers: JSON's grammar (not their range). UTF-8 is stage 1's check.
// The bytes must be followed by a NUL within kMetadataPadding (PaddedDocument).
const char* endOfJsonValue(const char* begin);
// The end (past the closing quote) of the JSON string whose opening quote is at `quote`, or
// nullptr; the same rules.
const char* endOfJsonString(const char* quote);

// The text of a key whose opening quote is at `quote`, when it is written without an escape
// and without a control character; nullptr for `end` otherwise. Keys the filters read must be
// plain: a registry never escapes them, and an escaped key ("vers\u0069ons") would reach the
// client as another key than the one the filter saw.
std::string_view plainKey(const char* quote, const char** end);

// Where the value of the member whose key ends at `key_end` (past its quote) starts: past
// whitespace, ':' and whitespace; nullptr when there is no ':'.
const char* valueAfterKey(const char* key_end);

// Checks that the members (or elements) simdjson hands over in order lie where the bytes say:
// the first right after the opening bracket, each next one after a ',' (whitespace allowed),
// and the closing bracket after the last. A disagreement between simdjson's structural index
// and the validator's reading of a span is caught here, so a filter never cuts the document
// where the client's parser would not.
class MemberChain {
 public:
  // `open` points at the '{' or '['.
  explicit MemberChain(const char* open) : next_(open + 1), close_(*open == '{' ? '}' : ']') {}
  // `begin`: the next member's first byte (a key's quote, an element's first byte).
  bool startsAt(const char* begin);
  void endsAt(const char* end) { next_ = end; }
  // Past the closing bracket, or nullptr when it is not where the last member ended.
  const char* close();
  std::size_t count() const { return count_; }

 private:
  const char* next_;
  char close_;
  std::size_t count_ = 0;
};

// An ISO 8601 UTC time as the registries write them (npm's `time`: "2024-05-01T12:34:56.789Z";
// PEP 700's `upload-time`: "2024-05-01T12:34:56.123456Z") in milliseconds since the Unix
// epoch, or nullopt when `text` is not exactly YYYY-MM-DDTHH:MM:SS, optional .fraction of 1 to
// 9 digits (cut to milliseconds), then Z or a ±HH:MM offset, with every field in its range.
std::optional<std::int64_t> parseIsoTime(std::string_view text);

}  // namespace sluice::proxy::packages
