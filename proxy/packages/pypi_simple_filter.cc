#include "proxy/packages/pypi_simple_filter.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "proxy/packages/json_walk.h"
#include "proxy/packages/pypi_file_name.h"
#include "proxy/packages/pypi_file_versions.h"

namespace sluice::proxy::packages {

namespace {

using policy::Ecosystem;

enum class TopKind : std::uint8_t { Other, Files, Versions };

struct TopMember {
  std::uint32_t key_begin, key_size, value_begin, value_end;
  TopKind kind;
};
struct FileItem {
  std::uint32_t begin, end;
  std::uint32_t version = 0;  // its index in FileVersions when valid
  bool valid = false;
  bool kept = false;
};
struct VersionItem {
  std::uint32_t begin, end;
  std::string_view text;  // unescaped, in simdjson's string buffer
  bool kept = true;
};

// The members of a file object the filter reads, each at most once.
struct FileFields {
  std::optional<std::string_view> filename, url, upload_time;
};

class SimpleJsonFilter {
 public:
  SimpleJsonFilter(const PaddedDocument& doc, std::string_view project)
      : doc_(doc), project_(project) {}

  Result<Ok, MetadataError> read(ondemand::parser& parser) {
    ondemand::document document;
    auto walked = walkDocument(parser, document, doc_, kMaxSimpleFiles,
                               [&](WalkedMember& m) { return readTopMember(m); });
    if (!walked.ok()) {
      return walked;
    }
    std::vector<std::string_view> keys;
    for (const TopMember& m : top_) {
      keys.emplace_back(doc_.begin() + m.key_begin + 1, m.key_size);
    }
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      return Err{MetadataError{"a top-level key is repeated", 0}};
    }
    if (!has_name_ || !has_files_) {
      return Err{MetadataError{"no name or no files", 0}};
    }
    return Ok{};
  }

  void judge(const VersionJudge& judge, const VersionOrder& order, FilteredSimplePage& out) {
    versions_.judge(judge, out.removed);
    for (FileItem& file : files_) {
      file.kept = file.valid && versions_.kept(file.version);
      out.kept_files += file.kept ? 1 : 0;
      out.removed_files += file.valid && !file.kept ? 1 : 0;
      out.invalid_files += file.valid ? 0 : 1;
    }
    // A `versions` entry goes when it is a removed version, however spelled ("1.0" is
    // "1.0.0"): by `order`, and by its bytes should the order not say so. A version that kept
    // some of its files stays.
    std::vector<std::string_view> by_order, by_bytes;
    for (const RemovedVersion& r : out.removed) {
      if (r.whole) {
        by_order.emplace_back(r.version);
      }
    }
    by_bytes = by_order;
    const auto less = [&](std::string_view a, std::string_view b) {
      return order.compare(Ecosystem::Pypi, a, b) < 0;
    };
    std::stable_sort(by_order.begin(), by_order.end(), less);
    std::sort(by_bytes.begin(), by_bytes.end());
    for (VersionItem& item : version_items_) {
      const auto at = std::partition_point(by_order.begin(), by_order.end(),
                                           [&](std::string_view r) { return less(r, item.text); });
      item.kept = !(at != by_order.end() && order.compare(Ecosystem::Pypi, *at, item.text) == 0) &&
                  !std::binary_search(by_bytes.begin(), by_bytes.end(), item.text);
    }
  }

  template <class Sink>
  void write(Sink& out) const {
    out.put('{');
    for (std::size_t i = 0; i < top_.size(); ++i) {
      const TopMember& m = top_[i];
      if (i > 0) {
        out.put(',');
      }
      if (m.kind == TopKind::Other) {
        out.put(text(m.key_begin, m.value_end));
        continue;
      }
      out.put(text(m.key_begin, m.value_begin));
      out.put('[');
      if (m.kind == TopKind::Files) {
        writeKept(out, files_);
      } else {
        writeKept(out, version_items_);
      }
      out.put(']');
    }
    out.put('}');
  }

 private:
  WalkEnd readTopMember(WalkedMember& m) {
    TopKind kind = TopKind::Other;
    WalkEnd end = m.value_begin;
    if (m.key == "name") {
      std::string_view name;
      if (*m.value_begin != '"' || m.value.get_string().get(name) != simdjson::SUCCESS) {
        return walkError("name is not a string", doc_, m.value_begin);
      }
      if (!isProjectName(name, project_)) {
        return walkError("the page names another project", doc_, m.value_begin);
      }
      has_name_ = true;
      end = validatedValue(m.value_begin, doc_);
    } else if (m.key == "files" || m.key == "versions") {
      ondemand::array array;
      if (*m.value_begin != '[' || m.value.get_array().get(array) != simdjson::SUCCESS) {
        return walkError("files or versions is not an array", doc_, m.value_begin);
      }
      if (m.key == "files") {
        kind = TopKind::Files;
        has_files_ = true;
        end = walkArray(array, m.value_begin, doc_, kMaxSimpleFiles,
                        [&](const char* begin, ondemand::value& v) { return readFile(begin, v); });
      } else {
        kind = TopKind::Versions;
        end =
            walkArray(array, m.value_begin, doc_, kMaxSimpleFiles,
                      [&](const char* begin, ondemand::value& v) { return readVersion(begin, v); });
      }
    } else {
      end = validatedValue(m.value_begin, doc_);
    }
    if (end.ok()) {
      top_.push_back(TopMember{offset(m.key_begin), static_cast<std::uint32_t>(m.key.size()),
                               offset(m.value_begin), offset(*end), kind});
    }
    return end;
  }

  WalkEnd readFile(const char* begin, ondemand::value& value) {
    ondemand::object object;
    if (*begin != '{' || value.get_object().get(object) != simdjson::SUCCESS) {
      return walkError("a file is not an object", doc_, begin);
    }
    const WalkEnd end = validatedValue(begin, doc_);
    if (!end.ok()) {
      return end;
    }
    // The span is valid JSON: simdjson walks it only for the three members read.
    FileFields fields;
    const auto read = readMembers(
        object, begin, doc_,
        [&](std::string_view key, const char* quote, const char* value_begin,
            ondemand::field& field) -> std::optional<MetadataError> {
          std::optional<std::string_view>* slot = key == "filename"      ? &fields.filename
                                                  : key == "url"         ? &fields.url
                                                  : key == "upload-time" ? &fields.upload_time
                                                                         : nullptr;
          if (slot == nullptr) {
            return std::nullopt;
          }
          if (slot->has_value()) {
            return walkError("a file member is repeated", doc_, quote).error();
          }
          if (slot == &fields.upload_time && value_begin != nullptr && *value_begin == '"') {
            // Read as written: an escaped time is none (as npm's `time`).
            const char* time_end = endOfJsonString(value_begin);
            *slot = std::string_view(value_begin + 1,
                                     static_cast<std::size_t>(time_end - value_begin - 2));
            return std::nullopt;
          }
          if (slot == &fields.upload_time && value_begin != nullptr && *value_begin == 'n') {
            *slot = std::string_view();  // null: no time
            return std::nullopt;
          }
          std::string_view text;
          if (value_begin == nullptr || *value_begin != '"' ||
              field.value().get_string().get(text) != simdjson::SUCCESS) {
            return walkError("a file member is not a string", doc_, value_begin).error();
          }
          *slot = text;
          return std::nullopt;
        });
    if (!read.ok()) {
      return Err{read.error()};
    }
    if (!fields.filename || !fields.url) {
      return walkError("a file has no filename or no url", doc_, begin);
    }
    FileItem file{offset(begin), offset(*end)};
    FileNameBuffer buffer;
    const auto url_name = fileNameOfUrl(*fields.url, buffer);
    const auto version = versionOfFile(*fields.filename, project_);
    if (url_name && *url_name == *fields.filename && version) {
      file.valid = true;
      file.version = static_cast<std::uint32_t>(versions_.size());
      versions_.add(*version, *fields.filename,
                    fields.upload_time ? parseIsoTime(*fields.upload_time) : std::nullopt);
    }
    files_.push_back(file);
    return end;
  }

  WalkEnd readVersion(const char* begin, ondemand::value& value) {
    VersionItem item{offset(begin), 0, {}};
    if (*begin != '"' || value.get_string().get(item.text) != simdjson::SUCCESS) {
      return walkError("a version is not a string", doc_, begin);
    }
    const char* end = endOfJsonString(begin);
    if (end == nullptr) {
      return walkError("not JSON", doc_, begin);
    }
    item.end = offset(end);
    version_items_.push_back(item);
    return end;
  }

  template <class Sink, class T>
  void writeKept(Sink& out, const std::vector<T>& items) const {
    bool first = true;
    for (const T& item : items) {
      if (item.kept) {
        if (!first) {
          out.put(',');
        }
        first = false;
        out.put(text(item.begin, item.end));
      }
    }
  }

  std::uint32_t offset(const char* p) const { return static_cast<std::uint32_t>(doc_.offsetOf(p)); }
  std::string_view text(std::uint32_t begin, std::uint32_t end) const {
    return {doc_.begin() + begin, end - begin};
  }

  const PaddedDocument& doc_;
  std::string_view project_;
  std::vector<TopMember> top_;
  std::vector<FileItem> files_;
  std::vector<VersionItem> version_items_;
  FileVersions versions_;
  bool has_name_ = false;
  bool has_files_ = false;
};

}  // namespace

Result<FilteredSimplePage, MetadataError> filterSimpleJson(std::string& document,
                                                           std::string_view project,
                                                           const VersionJudge& judge,
                                                           const VersionOrder& order) {
  const auto normalized = policy::normalizePackageName(Ecosystem::Pypi, project);
  if (!normalized) {
    return Err{MetadataError{"not a project name", 0}};
  }
  const PaddedDocument doc(document);
  SimpleJsonFilter filter(doc, *normalized);
  return runFilter<FilteredSimplePage>(
      doc, filter, &FilteredSimplePage::body,
      [&](FilteredSimplePage& out) { filter.judge(judge, order, out); });
}

}  // namespace sluice::proxy::packages
