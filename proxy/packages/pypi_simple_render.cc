// PEP 503 pages rendered from a (filtered) PEP 691 document: renderSimpleHtml of
// pypi_simple_filter.h, where the rules are.

#include <simdjson.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include "base/ascii.h"
#include "proxy/packages/json_walk.h"
#include "proxy/packages/pypi_simple_filter.h"

namespace sluice::proxy::packages {

namespace {

// Escaped for HTML text and for a double- or single-quoted attribute alike. A control byte
// becomes U+FFFD: it has no business in these fields, and some parsers drop or keep it.
void appendEscaped(std::string& out, std::string_view text) {
  std::size_t from = 0;  // the start of the run not yet appended
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::string_view replacement;
    switch (c) {
      case '&':
        replacement = "&amp;";
        break;
      case '<':
        replacement = "&lt;";
        break;
      case '>':
        replacement = "&gt;";
        break;
      case '"':
        replacement = "&quot;";
        break;
      case '\'':
        replacement = "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          replacement = "\xef\xbf\xbd";
        }
    }
    if (!replacement.empty()) {
      out.append(text.substr(from, i - from));
      out.append(replacement);
      from = i + 1;
    }
  }
  out.append(text.substr(from));
}

bool isHashName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return ascii::isLower(c) || ascii::isDigit(c);
  });
}
bool isHex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), ascii::isHexDigit);
}

// "name=hex" of an object of hashes: sha256 when there, else the first well-formed one.
struct Hash {
  std::string_view name, value;
};

class HtmlRenderer {
 public:
  explicit HtmlRenderer(const PaddedDocument& doc) : doc_(doc) {
    anchors_.reserve(doc.size() + 512);  // a page is about as long as its JSON
  }

  Result<std::string, MetadataError> render(ondemand::parser& parser) {
    const char* open = skipJsonSpace(doc_.begin());
    const char* end = *open == '{' ? endOfJsonValue(open) : nullptr;
    if (end == nullptr || !onlySpaceAfter(end, doc_)) {
      return Err{MetadataError{"not a JSON object", 0}};
    }
    ondemand::document document;
    auto walked = walkDocument(parser, document, doc_, kMaxSimpleFiles,
                               [&](WalkedMember& m) { return readTopMember(m); });
    if (!walked.ok()) {
      return Err{walked.error()};
    }
    if (!name_) {
      return Err{MetadataError{"no name", 0}};
    }
    // The head goes in front of the anchors, in their buffer: no second copy of the page.
    std::string head =
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        "    <meta name=\"pypi:repository-version\" content=\"";
    head += api_version_;
    head += "\">\n    <title>Links for ";
    appendEscaped(head, *name_);
    head += "</title>\n  </head>\n  <body>\n    <h1>Links for ";
    appendEscaped(head, *name_);
    head += "</h1>\n";
    anchors_.insert(0, head);
    anchors_ += "  </body>\n</html>\n";
    return std::move(anchors_);
  }

 private:
  WalkEnd readTopMember(WalkedMember& m) {
    if (m.key == "name") {
      std::string_view name;
      if (readString(m, name) == nullptr) {
        return walkError("name is not a string", doc_, m.value_begin);
      }
      name_ = name;
    } else if (m.key == "meta" && *m.value_begin == '{') {
      ondemand::object meta;
      if (m.value.get_object().get(meta) != simdjson::SUCCESS) {
        return walkError("not JSON", doc_, m.value_begin);
      }
      return walkObject(meta, m.value_begin, doc_, kMaxSimpleFiles, [&](WalkedMember& field) {
        std::string_view version;
        if (field.key == "api-version" && readString(field, version) != nullptr &&
            version.size() >= 3 && version.size() <= 6 && version.substr(0, 2) == "1." &&
            std::all_of(version.begin() + 2, version.end(), ascii::isDigit)) {
          api_version_ = version;
        }
        return validatedValue(field.value_begin, doc_);
      });
    } else if (m.key == "files") {
      ondemand::array files;
      if (*m.value_begin != '[' || m.value.get_array().get(files) != simdjson::SUCCESS) {
        return walkError("files is not an array", doc_, m.value_begin);
      }
      return walkArray(
          files, m.value_begin, doc_, kMaxSimpleFiles,
          [&](const char* begin, ondemand::value& file) { return readFile(begin, file); });
    }
    return validatedValue(m.value_begin, doc_);
  }

  // The unescaped string of a member, or nullptr when it is no string; returns its end.
  const char* readString(WalkedMember& m, std::string_view& text) {
    if (*m.value_begin != '"' || m.value.get_string().get(text) != simdjson::SUCCESS) {
      return nullptr;
    }
    return endOfJsonString(m.value_begin);
  }

  // An object of hash name -> hex digest: the one to render (sha256 first).
  WalkEnd readHashes(WalkedMember& m, Hash& chosen) {
    ondemand::object hashes;
    if (*m.value_begin != '{' || m.value.get_object().get(hashes) != simdjson::SUCCESS) {
      return walkError("hashes are not an object", doc_, m.value_begin);
    }
    return walkObject(
        hashes, m.value_begin, doc_, kMaxSimpleFiles, [&](WalkedMember& hash) -> WalkEnd {
          std::string_view digest;
          const char* end = readString(hash, digest);
          if (end == nullptr) {
            return walkError("a hash is not a string", doc_, hash.value_begin);
          }
          if (isHashName(hash.key) && isHex(digest) &&
              (chosen.name.empty() || hash.key == "sha256") && chosen.name != "sha256") {
            chosen = Hash{hash.key, digest};
          }
          return end;
        });
  }

  WalkEnd readFile(const char* begin, ondemand::value& value) {
    ondemand::object object;
    if (*begin != '{' || value.get_object().get(object) != simdjson::SUCCESS) {
      return walkError("a file is not an object", doc_, begin);
    }
    std::optional<std::string_view> filename, url, requires_python, yanked_reason;
    std::optional<bool> yanked, gpg_sig;
    std::optional<Hash> metadata;  // name empty: "true"
    Hash hash;
    bool seen[8] = {};
    const WalkEnd end =
        walkObject(object, begin, doc_, kMaxSimpleFiles, [&](WalkedMember& m) -> WalkEnd {
          static constexpr std::string_view kRead[] = {
              "filename",           "url",    "hashes", "requires-python", "core-metadata",
              "dist-info-metadata", "yanked", "gpg-sig"};
          const auto which = static_cast<std::size_t>(
              std::find(std::begin(kRead), std::end(kRead), m.key) - std::begin(kRead));
          if (which == std::size(kRead)) {
            return validatedValue(m.value_begin, doc_);
          }
          if (seen[which]) {
            return walkError("a file member is repeated", doc_, m.key_begin);
          }
          seen[which] = true;
          const char c = *m.value_begin;
          std::string_view text;
          switch (which) {
            case 0:
            case 1:
              if (readString(m, text) == nullptr) {
                return walkError("a file's filename or url is not a string", doc_, m.value_begin);
              }
              (which == 0 ? filename : url) = text;
              break;
            case 2:
              return readHashes(m, hash);
            case 3:
              if (c == '"' && readString(m, text) != nullptr) {
                requires_python = text;
              }
              break;
            case 4:
            case 5:
              if (c == '{') {
                Hash chosen;
                WalkEnd hashes_end = readHashes(m, chosen);
                // core-metadata wins over the older dist-info-metadata (PEP 714).
                if (hashes_end.ok() && (which == 4 || !seen[4])) {
                  metadata = chosen.name.empty() ? Hash{"", ""} : chosen;
                }
                return hashes_end;
              }
              if (c == 't' && (which == 4 || !seen[4])) {
                metadata = Hash{};
              }
              break;
            case 6:
              if (c == '"' && readString(m, text) != nullptr) {
                yanked_reason = text;
              }
              yanked = c == '"' || c == 't';
              break;
            case 7:
              if (c == 't' || c == 'f') {
                gpg_sig = c == 't';
              }
              break;
            default:
              break;
          }
          return validatedValue(m.value_begin, doc_);
        });
    if (!end.ok()) {
      return end;
    }
    if (!filename || !url) {
      return walkError("a file has no filename or no url", doc_, begin);
    }
    anchors_ += "    <a href=\"";
    appendEscaped(anchors_, url->substr(0, url->find('#')));
    if (!hash.name.empty()) {
      anchors_ += '#';
      appendEscaped(anchors_, hash.name);
      anchors_ += '=';
      appendEscaped(anchors_, hash.value);
    }
    anchors_ += '"';
    if (requires_python) {
      anchors_ += " data-requires-python=\"";
      appendEscaped(anchors_, *requires_python);
      anchors_ += '"';
    }
    if (metadata) {
      for (const char* attribute : {" data-core-metadata=\"", " data-dist-info-metadata=\""}) {
        anchors_ += attribute;
        if (metadata->name.empty()) {
          anchors_ += "true";
        } else {
          appendEscaped(anchors_, metadata->name);
          anchors_ += '=';
          appendEscaped(anchors_, metadata->value);
        }
        anchors_ += '"';
      }
    }
    if (gpg_sig) {
      anchors_ += *gpg_sig ? " data-gpg-sig=\"true\"" : " data-gpg-sig=\"false\"";
    }
    if (yanked.value_or(false)) {
      anchors_ += " data-yanked=\"";
      appendEscaped(anchors_, yanked_reason.value_or(""));
      anchors_ += '"';
    }
    anchors_ += '>';
    appendEscaped(anchors_, *filename);
    anchors_ += "</a><br />\n";
    return end;
  }

  const PaddedDocument& doc_;
  std::optional<std::string_view> name_;
  std::string_view api_version_ = "1.0";
  std::string anchors_;
};

}  // namespace

Result<std::string, MetadataError> renderSimpleHtml(std::string& document) {
  const PaddedDocument doc(document);
  if (doc.paddedSize() >= std::numeric_limits<std::uint32_t>::max()) {
    return Err{MetadataError{"larger than 4 GiB", 0}};
  }
  ondemand::parser parser;
  HtmlRenderer renderer(doc);
  return renderer.render(parser);
}

}  // namespace sluice::proxy::packages
