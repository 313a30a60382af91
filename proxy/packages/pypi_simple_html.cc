// PEP 503 pages filtered as received: filterSimpleHtml of pypi_simple_filter.h, where the
// rules are. The tokenizer accepts a strict subset of HTML that pip's parsers (html.parser
// today, html5lib before pip 22) read alike, and refuses the rest: a page it accepts has
// exactly the anchors it found, so none can hide from the filter.
//
// Bounds: one pass over the page (each byte looked at a bounded number of times), at most
// kMaxAttributes attributes a tag and kMaxSimpleFiles anchors; memory: the output (at most the
// page) and ~40 bytes an anchor.

#include <simdjson.h>

#include <algorithm>
#include <array>

#include "base/ascii.h"
#include "proxy/packages/pypi_file_name.h"
#include "proxy/packages/pypi_file_versions.h"
#include "proxy/packages/pypi_simple_filter.h"

namespace sluice::proxy::packages {

namespace {

constexpr std::size_t kMaxAttributes = 32;

constexpr bool isHtmlSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

// The tags a simple page is made of; no raw-text element (script, style, textarea...), no
// <base> (it changes what an href names), nothing that nests a parser of its own (svg, math).
constexpr std::string_view kTags[] = {"html", "head", "body", "meta", "title", "h1", "h2",
                                      "p",    "div",  "span", "hr",   "br",    "a"};

bool startsWithFolded(std::string_view text, std::size_t at, std::string_view word) {
  return at + word.size() <= text.size() && ascii::iequals(text.substr(at, word.size()), word);
}

// `text` with its character references decoded into `out`; false when it holds one outside
// the strict set (&amp; &lt; &gt; &quot; &apos; and &#N; / &#xN; of printable ASCII, with the
// ';'): beyond it, HTML's parsers disagree (legacy names without ';', &#128; as windows-1252).
// A '&' that starts no reference stays itself, as every parser reads it.
bool decodeReferences(std::string_view text, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::size_t amp = std::min(text.find('&', i), text.size());
    out.append(text.substr(i, amp - i));  // the run before it, in one go
    i = amp;
    if (i == text.size()) {
      break;
    }
    const std::string_view rest = text.substr(i + 1);
    if (rest.empty() || !(ascii::isAlnum(rest[0]) || rest[0] == '#')) {
      out.push_back('&');
      continue;
    }
    static constexpr std::pair<std::string_view, char> kNamed[] = {
        {"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    const auto named = std::find_if(std::begin(kNamed), std::end(kNamed), [&](const auto& n) {
      return rest.substr(0, n.first.size()) == n.first;
    });
    if (named != std::end(kNamed)) {
      out.push_back(named->second);
      i += named->first.size();
      continue;
    }
    if (rest[0] != '#') {
      return false;
    }
    const bool hex = rest.size() > 1 && (rest[1] == 'x' || rest[1] == 'X');
    std::size_t at = hex ? 2 : 1;
    int code = 0;
    const std::size_t first = at;
    while (at < rest.size() && at - first < 6 &&
           (hex ? ascii::isHexDigit(rest[at]) : ascii::isDigit(rest[at]))) {
      code = code * (hex ? 16 : 10) + ascii::hexValue(rest[at]);
      ++at;
    }
    if (at == first || at == rest.size() || rest[at] != ';' || code < 0x20 || code > 0x7e) {
      return false;
    }
    out.push_back(static_cast<char>(code));
    i += at + 1;
  }
  return true;
}

struct Attribute {
  std::string_view name;   // as written; compared folded
  std::string_view value;  // raw: references not yet decoded
};

struct Tag {
  std::string_view name;
  std::array<Attribute, kMaxAttributes> attributes;
  std::size_t count = 0;
  bool self_closing = false;
  std::size_t end = 0;  // past its '>'

  const Attribute* find(std::string_view wanted) const {
    for (std::size_t i = 0; i < count; ++i) {
      if (ascii::iequals(attributes[i].name, wanted)) {
        return &attributes[i];
      }
    }
    return nullptr;
  }
};

class SimpleHtmlFilter {
 public:
  SimpleHtmlFilter(std::string_view page, std::string_view project)
      : page_(page), project_(project) {}

  Result<Ok, MetadataError> read() {
    if (page_.find('\0') != std::string_view::npos ||
        !simdjson::validate_utf8(page_.data(), page_.size())) {
      return fail("not UTF-8 text", 0);
    }
    std::size_t pos = 0;
    for (;;) {
      const std::size_t lt = page_.find('<', pos);
      if (lt == std::string_view::npos) {
        return Ok{};
      }
      const std::size_t p = lt + 1;
      if (startsWithFolded(page_, p, "!doctype")) {
        pos = doctypeEnd(p + 8);
      } else if (p < page_.size() && page_[p] == '/') {
        pos = endTagEnd(p + 1);
      } else if (p < page_.size() && ascii::isAlpha(page_[p])) {
        Tag tag;
        if (!readTag(p, tag)) {
          return fail("a tag the filter does not read", lt);
        }
        pos = ascii::iequals(tag.name, "a") ? anchorEnd(lt, tag) : tag.end;
      } else {
        pos = 0;  // a comment, CDATA, a processing instruction, a stray '<'
      }
      if (pos == 0) {
        return fail(error_.empty() ? "a construct the filter does not read" : error_, lt);
      }
    }
  }

  void judge(const VersionJudge& judge, FilteredSimplePage& out) {
    versions_.judge(judge, out.removed);
    for (Anchor& anchor : anchors_) {
      if (anchor.names == Anchor::Names::Nothing) {
        continue;  // kept: pip skips an anchor without href
      }
      const bool valid = anchor.names == Anchor::Names::File;
      anchor.kept = valid && versions_.kept(anchor.version);
      out.kept_files += anchor.kept ? 1 : 0;
      out.removed_files += valid && !anchor.kept ? 1 : 0;
      out.invalid_files += valid ? 0 : 1;
    }
  }

  void write(std::string& out) const {
    out.reserve(page_.size());
    std::size_t from = 0;
    for (const Anchor& anchor : anchors_) {
      if (!anchor.kept) {
        out.append(page_.substr(from, anchor.begin - from));
        from = anchor.end;
      }
    }
    out.append(page_.substr(from));
  }

 private:
  struct Anchor {
    std::size_t begin = 0, end = 0;  // what goes with it: the element and a <br> right after
    enum class Names : std::uint8_t { Nothing, File, Invalid } names = Names::Invalid;
    std::uint32_t version = 0;  // its index in versions_ when it names a file
    bool kept = true;
  };

  Result<Ok, MetadataError> fail(std::string_view what, std::size_t at) const {
    return Err{MetadataError{what, at}};
  }

  // <!DOCTYPE html> and nothing else: past its '>', or 0.
  std::size_t doctypeEnd(std::size_t p) const {
    const std::size_t after_space = skipSpace(p);
    if (after_space == p || !startsWithFolded(page_, after_space, "html")) {
      return 0;
    }
    p = skipSpace(after_space + 4);
    return p < page_.size() && page_[p] == '>' ? p + 1 : 0;
  }

  // </name> of a known tag but a: past its '>', or 0 (a stray </a> is no anchor, but a page
  // with one is not a page this filter must read).
  std::size_t endTagEnd(std::size_t p) const {
    const std::size_t name_end = nameEnd(p);
    const std::string_view name = page_.substr(p, name_end - p);
    if (name.empty() || !isKnownTag(name) || ascii::iequals(name, "a")) {
      return 0;
    }
    p = skipSpace(name_end);
    return p < page_.size() && page_[p] == '>' ? p + 1 : 0;
  }

  // A start tag whose name begins at `p`: name, attributes (whitespace before each; a value
  // double- or single-quoted without '<', or unquoted of safe bytes; no name twice), '>' or
  // "/>".
  bool readTag(std::size_t p, Tag& tag) const {
    const std::size_t name_end = nameEnd(p);
    tag.name = page_.substr(p, name_end - p);
    if (!isKnownTag(tag.name)) {
      return false;
    }
    p = name_end;
    for (;;) {
      const std::size_t after_space = skipSpace(p);
      const bool spaced = after_space > p;
      p = after_space;
      if (p >= page_.size()) {
        return false;
      }
      if (page_[p] == '>' || (page_[p] == '/' && p + 1 < page_.size() && page_[p + 1] == '>')) {
        tag.self_closing = page_[p] == '/';
        tag.end = p + (tag.self_closing ? 2 : 1);
        return true;
      }
      const std::size_t attribute_end = attributeNameEnd(p);
      if (!spaced || attribute_end == p || tag.count == kMaxAttributes) {
        return false;
      }
      Attribute attribute{page_.substr(p, attribute_end - p), {}};
      if (tag.find(attribute.name) != nullptr) {
        return false;
      }
      p = skipSpace(attribute_end);
      if (p < page_.size() && page_[p] == '=') {
        p = skipSpace(p + 1);
        if (p >= page_.size()) {
          return false;
        }
        const char quote = page_[p];
        std::size_t value_end;
        if (quote == '"' || quote == '\'') {
          value_end = page_.find(quote, p + 1);
          if (value_end == std::string_view::npos) {
            return false;
          }
          attribute.value = page_.substr(p + 1, value_end - p - 1);
          if (attribute.value.find('<') != std::string_view::npos) {
            return false;
          }
          p = value_end + 1;
        } else {
          value_end = p;
          while (value_end < page_.size() &&
                 (ascii::isAlnum(page_[value_end]) ||
                  std::string_view("-._:/?#%+!~,;@&").find(page_[value_end]) !=
                      std::string_view::npos)) {
            ++value_end;
          }
          if (value_end == p) {
            return false;
          }
          attribute.value = page_.substr(p, value_end - p);
          p = value_end;
        }
      }
      tag.attributes[tag.count++] = attribute;
    }
  }

  // An anchor starting at `lt` whose start tag is read: its text up to "</a>", then what it
  // names. Past the element (and a <br> right after, which goes with it), or 0.
  std::size_t anchorEnd(std::size_t lt, const Tag& tag) {
    if (tag.self_closing) {
      return 0;
    }
    const std::size_t close = page_.find('<', tag.end);
    if (close == std::string_view::npos || !startsWithFolded(page_, close, "</a")) {
      error_ = "an anchor holds a tag or is not closed";
      return 0;
    }
    const std::size_t gt = skipSpace(close + 3);
    if (gt >= page_.size() || page_[gt] != '>') {
      error_ = "an anchor holds a tag or is not closed";
      return 0;
    }
    if (anchors_.size() == kMaxSimpleFiles) {
      error_ = "too many anchors";
      return 0;
    }
    Anchor anchor{lt, gt + 1};
    for (const std::string_view br : {"<br>", "<br/>", "<br />"}) {
      if (startsWithFolded(page_, anchor.end, br)) {
        anchor.end += br.size();
        break;
      }
    }
    // An anchor on a line of its own takes the line with it (the page stays tidy).
    std::size_t line = lt;
    while (line > 0 && (page_[line - 1] == ' ' || page_[line - 1] == '\t')) {
      --line;
    }
    const std::string_view rest = page_.substr(anchor.end);
    const std::size_t newline =
        rest.substr(0, 1) == "\n" ? 1 : (rest.substr(0, 2) == "\r\n" ? 2 : 0);
    if ((line == 0 || page_[line - 1] == '\n') && newline > 0) {
      anchor.begin = line;
      anchor.end += newline;
    }
    const Attribute* href = tag.find("href");
    if (href == nullptr) {
      anchor.names = Anchor::Names::Nothing;
    } else if (!decodeReferences(href->value, href_) ||
               !decodeReferences(page_.substr(tag.end, close - tag.end), text_)) {
      error_ = "a character reference the filter does not read";
      return 0;
    } else {
      FileNameBuffer buffer;
      const auto name = fileNameOfUrl(href_, buffer);
      const std::size_t text_begin = text_.find_first_not_of(" \t\n\r\f");
      const std::size_t text_end = text_.find_last_not_of(" \t\n\r\f");
      const std::string_view text =
          text_begin == std::string::npos
              ? std::string_view()
              : std::string_view(text_).substr(text_begin, text_end + 1 - text_begin);
      const auto version = name && *name == text ? versionOfFile(*name, project_) : std::nullopt;
      if (version) {
        anchor.names = Anchor::Names::File;
        anchor.version = static_cast<std::uint32_t>(versions_.size());
        versions_.add(*version, *name, std::nullopt);
      }
    }
    anchors_.push_back(anchor);
    return anchor.end;
  }

  bool isKnownTag(std::string_view name) const {
    return std::any_of(std::begin(kTags), std::end(kTags),
                       [&](std::string_view known) { return ascii::iequals(name, known); });
  }
  std::size_t skipSpace(std::size_t p) const {
    while (p < page_.size() && isHtmlSpace(page_[p])) {
      ++p;
    }
    return p;
  }
  std::size_t nameEnd(std::size_t p) const {
    while (p < page_.size() && ascii::isAlnum(page_[p])) {
      ++p;
    }
    return p;
  }
  std::size_t attributeNameEnd(std::size_t p) const {
    if (p >= page_.size() || !(ascii::isAlpha(page_[p]) || page_[p] == '_' || page_[p] == ':')) {
      return p;
    }
    while (p < page_.size() && (ascii::isAlnum(page_[p]) || page_[p] == '-' || page_[p] == '_' ||
                                page_[p] == ':' || page_[p] == '.')) {
      ++p;
    }
    return p;
  }

  std::string_view page_;
  std::string_view project_;
  std::vector<Anchor> anchors_;
  FileVersions versions_;
  std::string href_, text_;  // scratch: decoded references
  std::string_view error_;
};

}  // namespace

Result<FilteredSimplePage, MetadataError> filterSimpleHtml(std::string_view page,
                                                           std::string_view project,
                                                           const VersionJudge& judge) {
  const auto normalized = policy::normalizePackageName(policy::Ecosystem::Pypi, project);
  if (!normalized) {
    return Err{MetadataError{"not a project name", 0}};
  }
  SimpleHtmlFilter filter(page, *normalized);
  if (auto read = filter.read(); !read.ok()) {
    return Err{read.error()};
  }
  FilteredSimplePage out;
  filter.judge(judge, out);
  filter.write(out.body);
  return out;
}

}  // namespace sluice::proxy::packages
