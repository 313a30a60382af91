#pragma once
// The walk the JSON filters make over the objects and arrays they read (an internal header of
// proxy/packages/, for the .cc files): simdjson's on-demand iterator hands over each member,
// MemberChain checks that it lies where the bytes say, and the caller returns where its value
// ends (validated, or read through simdjson). A value the caller leaves untouched is skipped by
// simdjson through its index, never parsed.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"
#include "proxy/packages/metadata_json.h"

namespace sluice::proxy::packages {

namespace ondemand = simdjson::ondemand;

// One member of an object being walked.
struct WalkedMember {
  std::string_view key;     // plain: no escape (plainKey)
  const char* key_begin;    // its opening quote
  const char* value_begin;  // the first byte of its value
  ondemand::value& value;   // simdjson's handle on that value
};

using WalkEnd = Result<const char*, MetadataError>;

inline WalkEnd walkError(std::string_view what, const PaddedDocument& doc, const char* at) {
  return Err{MetadataError{what, at == nullptr ? doc.size() : doc.offsetOf(at)}};
}

// Walks the object whose '{' is at `open`; `on_member(WalkedMember&)` returns the end of the
// member's value. Returns past the closing '}'. At most `max_members` members.
template <class OnMember>
WalkEnd walkObject(ondemand::object object, const char* open, const PaddedDocument& doc,
                   std::size_t max_members, OnMember&& on_member) {
  MemberChain chain(open);
  for (auto item : object) {
    ondemand::field field;
    if (std::move(item).get(field) != simdjson::SUCCESS) {
      return walkError("not JSON", doc, chain.close());
    }
    const char* quote = field.key().raw() - 1;
    const char* key_end = nullptr;
    const std::string_view key = plainKey(quote, &key_end);
    if (key_end == nullptr) {
      return walkError("a key the filter reads is written with an escape", doc, quote);
    }
    if (!chain.startsAt(quote)) {
      return walkError("not JSON", doc, quote);
    }
    if (chain.count() > max_members) {
      return walkError("too many members in an object", doc, quote);
    }
    const char* value_begin = valueAfterKey(key_end);
    if (value_begin == nullptr) {
      return walkError("not JSON", doc, key_end);
    }
    WalkedMember member{key, quote, value_begin, field.value()};
    WalkEnd end = on_member(member);
    if (!end.ok()) {
      return end;
    }
    chain.endsAt(*end);
  }
  const char* close = chain.close();
  if (close == nullptr) {
    return walkError("not JSON", doc, nullptr);
  }
  return close;
}

// Walks the array whose '[' is at `open`; `on_element(const char* begin, ondemand::value&)`
// returns the end of the element. Returns past the closing ']'. At most `max_elements`.
template <class OnElement>
WalkEnd walkArray(ondemand::array array, const char* open, const PaddedDocument& doc,
                  std::size_t max_elements, OnElement&& on_element) {
  MemberChain chain(open);
  for (auto item : array) {
    ondemand::value value;
    if (std::move(item).get(value) != simdjson::SUCCESS) {
      return walkError("not JSON", doc, nullptr);
    }
    const std::string_view token = value.raw_json_token();
    if (!chain.startsAt(token.data())) {
      return walkError("not JSON", doc, token.data());
    }
    if (chain.count() > max_elements) {
      return walkError("too many elements in an array", doc, token.data());
    }
    WalkEnd end = on_element(token.data(), value);
    if (!end.ok()) {
      return end;
    }
    chain.endsAt(*end);
  }
  const char* close = chain.close();
  if (close == nullptr) {
    return walkError("not JSON", doc, nullptr);
  }
  return close;
}

// The members of an object whose span was validated already (validatedValue), for a filter
// that reads a few of them: `on_member(key, quote, value_begin, field)` for each, with `key`
// plain (a key written with an escape is an error: the filter could misread it), `quote` its
// opening quote and `value_begin` the first byte of its value. on_member returns a
// MetadataError to stop, or nullopt to go on.
template <class OnMember>
Result<Ok, MetadataError> readMembers(ondemand::object& object, const char* begin,
                                      const PaddedDocument& doc, OnMember&& on_member) {
  for (auto item : object) {
    ondemand::field field;
    if (std::move(item).get(field) != simdjson::SUCCESS) {
      return Err{walkError("not JSON", doc, begin).error()};
    }
    const char* quote = field.key().raw() - 1;
    const char* key_end = nullptr;
    const std::string_view key = plainKey(quote, &key_end);
    if (key_end == nullptr) {
      return Err{walkError("a key the filter reads is written with an escape", doc, quote).error()};
    }
    if (std::optional<MetadataError> error = on_member(key, quote, valueAfterKey(key_end), field)) {
      return Err{*error};
    }
  }
  return Ok{};
}

// The end of the value at `begin`, validated, or the error.
inline WalkEnd validatedValue(const char* begin, const PaddedDocument& doc) {
  const char* end = endOfJsonValue(begin);
  if (end == nullptr) {
    return walkError("not JSON", doc, begin);
  }
  return end;
}

// Starts simdjson on the padded document and checks it is one object; the '{' comes back in
// `open`.
inline Result<ondemand::object, MetadataError> startObject(ondemand::parser& parser,
                                                           ondemand::document& document,
                                                           const PaddedDocument& doc,
                                                           const char** open) {
  *open = skipJsonSpace(doc.begin());
  if (**open != '{') {
    return Err{MetadataError{"not a JSON object", doc.offsetOf(*open)}};
  }
  if (parser.iterate(doc.begin(), doc.size(), doc.paddedSize()).get(document) !=
      simdjson::SUCCESS) {
    return Err{MetadataError{"not JSON", 0}};
  }
  ondemand::object object;
  if (document.get_object().get(object) != simdjson::SUCCESS) {
    return Err{MetadataError{"not JSON", 0}};
  }
  return object;
}

// After the top-level object's '}': nothing but whitespace to the end.
inline bool onlySpaceAfter(const char* close, const PaddedDocument& doc) {
  return skipJsonSpace(close) == doc.end();
}

// The whole document as one object: each of its members (at most `max_members`) to
// `on_member` as walkObject hands them, then nothing but whitespace after its '}'. `document`
// holds simdjson's state and must outlive what the members' views point into.
template <class OnMember>
Result<Ok, MetadataError> walkDocument(ondemand::parser& parser, ondemand::document& document,
                                       const PaddedDocument& doc, std::size_t max_members,
                                       OnMember&& on_member) {
  const char* open = nullptr;
  auto top = startObject(parser, document, doc, &open);
  if (!top.ok()) {
    return Err{top.error()};
  }
  const WalkEnd close = walkObject(*top, open, doc, max_members, on_member);
  if (!close.ok()) {
    return Err{close.error()};
  }
  if (!onlySpaceAfter(*close, doc)) {
    return Err{MetadataError{"bytes after the document", doc.offsetOf(*close)}};
  }
  return Ok{};
}

// A filter's output, written by `filter.write(sink)` twice: once to count its bytes, then into
// `out` reserved to that size (one allocation, no copy as it grows; `out` is cleared first).
struct CountingSink {
  std::size_t size = 0;
  void put(std::string_view s) { size += s.size(); }
  void put(char) { ++size; }
};
struct StringSink {
  std::string& out;
  void put(std::string_view s) { out.append(s); }
  void put(char c) { out.push_back(c); }
};
template <class Filter>
void writeExactly(const Filter& filter, std::string& out) {
  CountingSink count;
  filter.write(count);
  out.clear();
  out.reserve(count.size);
  StringSink sink{out};
  filter.write(sink);
}

// A filter's run over the document it was made on: read with simdjson, judged (`judge(out)`),
// and written into `out.*body` exactly. simdjson's index (4 bytes per structural character) is
// freed before the output is allocated: the peak is the document and the larger of the two,
// not both. A document of 4 GiB or more is refused first: the filters keep 32-bit offsets,
// and simdjson reads no more.
template <class Out, class Filter, class Judge>
Result<Out, MetadataError> runFilter(const PaddedDocument& doc, Filter& filter,
                                     std::string Out::*body, Judge&& judge) {
  if (doc.paddedSize() >= std::numeric_limits<std::uint32_t>::max()) {
    return Err{MetadataError{"larger than 4 GiB", 0}};
  }
  Out out;
  {
    ondemand::parser parser;
    if (auto read = filter.read(parser); !read.ok()) {
      return Err{read.error()};
    }
    judge(out);
  }
  writeExactly(filter, out.*body);
  return out;
}

}  // namespace sluice::proxy::packages
