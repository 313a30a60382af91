#pragma once
// The audit file as a test reads it back: one JSON object per line, its members by name. A small
// reader of its own (strings unescaped, other values as their JSON text), not sluice's writer
// run backwards.

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test_support {

struct AuditLine {
  struct Value {
    bool is_string = false;
    std::string text;  // a string's content, else the JSON text: 200, null, ["127.0.0.1"]
  };
  std::string line;
  std::map<std::string, Value, std::less<>> members;

  // A string member's content, or the JSON text of any other value ("200", "null", "[...]");
  // "<absent>" when there is no such member.
  std::string operator[](std::string_view name) const;
  bool isNull(std::string_view name) const;
};

// Every complete line of `path`, in order. A line that is not a JSON object fails the test.
std::vector<AuditLine> readAuditLines(const std::string& path);

// One expected member of a record: its name and value as AuditLine::operator[] gives it
// ("allow", "200"); the value "null" expects JSON null (isNull), never the string "null".
struct ExpectedMember {
  std::string_view name;
  std::string_view value;
};

// Success when `lines` is exactly one record and it has every `expected` member; a failure says
// which member differs and prints the whole line:
//   ASSERT_TRUE(isOneRecord(lines, {{"decision", "deny"}, {"reason", "bad_request"}}));
testing::AssertionResult isOneRecord(const std::vector<AuditLine>& lines,
                                     std::initializer_list<ExpectedMember> expected);

// The records of `lines` that have every `expected` member (read as isOneRecord reads them), in
// order: for a connection that leaves several, e.g. one per HTTP/2 stream.
std::vector<AuditLine> recordsWith(const std::vector<AuditLine>& lines,
                                   std::initializer_list<ExpectedMember> expected);

}  // namespace sluice::test_support
