#pragma once
// Reading the pages of docs/ in tests that keep them honest: a page from the source tree, the
// text under one heading, the cells of its tables, and the anchors its headings get. Just enough
// Markdown for the pages as they are written (ATX headings, pipe tables with one row per line).
#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/temp_dir.h"

namespace sluice::test_support {

// docs/<page> of the source tree ("" when it cannot be read).
inline std::string docsPage(std::string_view page) {
  return readFile(std::string(SLUICE_SOURCE_DIR) + "/docs/" + std::string(page));
}

// The lines of `text`, without their '\n' (a last line without one included).
inline std::vector<std::string_view> linesOf(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string_view::npos ? text.size() : end;
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Whether `line` opens or closes a ``` block, indented ones (inside a list item) too.
inline bool isFence(std::string_view line) {
  return line.substr(std::min(line.find_first_not_of(' '), line.size())).starts_with("```");
}

// The text under the heading line that reads exactly `heading` ("## upstream"), up to the next
// heading of any level (a '#' line inside a ``` block is not one); "" when there is none.
inline std::string docsSection(const std::string& page, std::string_view heading) {
  std::size_t begin = std::string::npos;
  bool fenced = false;
  std::size_t at = 0;
  while (at < page.size()) {
    std::size_t end = page.find('\n', at);
    end = end == std::string::npos ? page.size() : end;
    std::string_view line = std::string_view(page).substr(at, end - at);
    if (line.starts_with("```")) {
      fenced = !fenced;
    } else if (!fenced && line.starts_with('#')) {
      if (begin != std::string::npos) {
        return page.substr(begin, at - begin);
      }
      if (line == heading) {
        begin = end;
      }
    }
    at = end + 1;
  }
  return begin == std::string::npos ? std::string() : page.substr(begin);
}

// The cells of every table row in `section`, trimmed; header and separator rows included.
inline std::vector<std::vector<std::string>> tableRows(const std::string& section) {
  std::vector<std::vector<std::string>> rows;
  for (std::string_view line : linesOf(section)) {
    if (line.starts_with('|')) {
      std::vector<std::string> cells;
      std::size_t from = 1;
      while (from < line.size()) {
        std::size_t bar = line.find('|', from);
        if (bar == std::string_view::npos) {
          break;
        }
        std::string_view cell = line.substr(from, bar - from);
        while (!cell.empty() && cell.front() == ' ') {
          cell.remove_prefix(1);
        }
        while (!cell.empty() && cell.back() == ' ') {
          cell.remove_suffix(1);
        }
        cells.emplace_back(cell);
        from = bar + 1;
      }
      rows.push_back(std::move(cells));
    }
  }
  return rows;
}

// The `code spans` of a text, in order, without their backquotes.
inline std::vector<std::string> codeSpans(std::string_view text) {
  std::vector<std::string> spans;
  std::size_t at = 0;
  for (;;) {
    std::size_t open = text.find('`', at);
    if (open == std::string_view::npos) {
      break;
    }
    std::size_t close = text.find('`', open + 1);
    if (close == std::string_view::npos) {
      break;
    }
    spans.emplace_back(text.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return spans;
}

// The anchor GitHub gives a heading (the text after its '#'s): a link's text stands for the
// link, letters are lowered, each space becomes '-', and every other character but ASCII
// letters, digits, '-' and '_' is dropped ("HTTP/2 toward origins" -> "http2-toward-origins",
// "`sluice explain`" -> "sluice-explain"). Bytes of 0x80 and above are kept, as GitHub keeps
// non-ASCII letters (it drops non-ASCII punctuation, which no heading here has).
inline std::string headingAnchor(std::string_view text) {
  std::string anchor;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ']' && i + 1 < text.size() && text[i + 1] == '(') {
      const std::size_t close = text.find(')', i);
      i = close == std::string_view::npos ? text.size() : close;  // the link's target
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c >= 'A' && c <= 'Z') {
      anchor += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
               u >= 0x80) {
      anchor += c;
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

// The anchors of a page: each ATX heading's outside ``` blocks, indented ones too (a repeated
// one numbered "-1", "-2"... as GitHub does), and each <a id="..."> or <a name="...">.
inline std::set<std::string> pageAnchors(const std::string& page) {
  std::set<std::string> anchors;
  bool fenced = false;
  for (std::string_view line : linesOf(page)) {
    if (isFence(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      continue;
    }
    for (std::string_view attribute : {"<a id=\"", "<a name=\""}) {
      for (std::size_t open = line.find(attribute); open != std::string_view::npos;
           open = line.find(attribute, open + 1)) {
        const std::size_t from = open + attribute.size();
        const std::size_t close = line.find('"', from);
        if (close != std::string_view::npos) {
          anchors.emplace(line.substr(from, close - from));
        }
      }
    }
    std::size_t level = 0;
    while (level < line.size() && line[level] == '#') {
      ++level;
    }
    if (level == 0 || level > 6 || level == line.size() || line[level] != ' ') {
      continue;
    }
    std::string_view text = line.substr(level + 1);
    while (!text.empty() && (text.back() == '#' || text.back() == ' ')) {
      text.remove_suffix(1);  // a closing sequence of '#'s
    }
    const std::string anchor = headingAnchor(text);
    std::string unique = anchor;
    for (int n = 1; anchors.contains(unique); ++n) {
      unique = anchor + "-" + std::to_string(n);
    }
    anchors.insert(unique);
  }
  return anchors;
}

}  // namespace sluice::test_support
