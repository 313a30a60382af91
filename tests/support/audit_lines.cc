#include "tests/support/audit_lines.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "tests/support/temp_dir.h"

namespace sluice::test_support {

namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool object(AuditLine& out) {
    if (!take('{')) {
      return false;
    }
    if (take('}')) {
      return true;
    }
    do {
      std::string name;
      if (!string(name) || !take(':')) {
        return false;
      }
      AuditLine::Value value;
      if (!this->value(value)) {
        return false;
      }
      out.members[name] = std::move(value);
    } while (take(','));
    return take('}') && at_ == text_.size();
  }

 private:
  bool take(char c) {
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  bool string(std::string& out) {
    if (!take('"')) {
      return false;
    }
    while (at_ < text_.size()) {
      char c = text_[at_++];
      if (c == '"') {
        return true;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) {
        return false;
      }
      char escaped = text_[at_++];
      switch (escaped) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          unsigned code = 0;
          if (at_ + 4 > text_.size() ||
              std::from_chars(text_.data() + at_, text_.data() + at_ + 4, code, 16).ec !=
                  std::errc()) {
            return false;
          }
          at_ += 4;
          out += static_cast<char>(code);  // the records escape only bytes below 0x20
          break;
        }
        default:
          out += escaped;  // '"', '\\', '/'
      }
    }
    return false;
  }

  // Any other value, kept as its text: up to the ',' or '}' that ends it at this depth.
  bool value(AuditLine::Value& out) {
    if (at_ < text_.size() && text_[at_] == '"') {
      out.is_string = true;
      return string(out.text);
    }
    std::size_t start = at_;
    int depth = 0;
    bool in_string = false;
    for (; at_ < text_.size(); ++at_) {
      char c = text_[at_];
      if (in_string) {
        if (c == '\\') {
          ++at_;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        ++depth;
      } else if (c == ']' || c == '}') {
        if (depth == 0) {
          break;
        }
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
    }
    out.text = std::string(text_.substr(start, at_ - start));
    return !out.text.empty();
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

bool hasMember(const AuditLine& record, const ExpectedMember& member) {
  return member.value == "null" ? record.isNull(member.name) : record[member.name] == member.value;
}

}  // namespace

std::string AuditLine::operator[](std::string_view name) const {
  auto it = members.find(name);
  return it == members.end() ? "<absent>" : it->second.text;
}

bool AuditLine::isNull(std::string_view name) const {
  auto it = members.find(name);
  return it != members.end() && !it->second.is_string && it->second.text == "null";
}

std::vector<AuditLine> readAuditLines(const std::string& path) {
  std::vector<AuditLine> lines;
  std::string text = readFile(path);
  std::size_t at = 0;
  for (std::size_t end = text.find('\n'); end != std::string::npos;
       at = end + 1, end = text.find('\n', at)) {
    AuditLine line;
    line.line = text.substr(at, end - at);
    if (!Reader(line.line).object(line)) {
      ADD_FAILURE() << "not a JSON object: " << line.line;
      continue;
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

testing::AssertionResult isOneRecord(const std::vector<AuditLine>& lines,
                                     std::initializer_list<ExpectedMember> expected) {
  if (lines.size() != 1) {
    testing::AssertionResult failure = testing::AssertionFailure();
    failure << lines.size() << " records where one was expected:";
    for (const AuditLine& line : lines) {
      failure << "\n  " << line.line;
    }
    return failure;
  }
  const AuditLine& record = lines.front();
  testing::AssertionResult result = testing::AssertionSuccess();
  bool differs = false;
  for (const ExpectedMember& member : expected) {
    if (!hasMember(record, member)) {
      if (!differs) {
        result = testing::AssertionFailure();
        differs = true;
      }
      result << member.name << " is " << record[member.name] << ", expected " << member.value
             << "; ";
    }
  }
  if (differs) {
    result << "in " << record.line;
  }
  return result;
}

std::vector<AuditLine> recordsWith(const std::vector<AuditLine>& lines,
                                   std::initializer_list<ExpectedMember> expected) {
  std::vector<AuditLine> out;
  for (const AuditLine& line : lines) {
    if (std::all_of(expected.begin(), expected.end(),
                    [&](const ExpectedMember& member) { return hasMember(line, member); })) {
      out.push_back(line);
    }
  }
  return out;
}

}  // namespace sluice::test_support
