#include "proxy/packages/pypi_json_api_filter.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "proxy/packages/json_walk.h"
#include "proxy/packages/pypi_file_name.h"

namespace sluice::proxy::packages {

namespace {

using policy::Ecosystem;

enum class TopKind : std::uint8_t { Other, Releases, Urls };

// Offsets into the document: 4 GiB is simdjson's own limit too.
struct TopMember {
  std::uint32_t key_begin, key_size, value_begin, value_end;
  TopKind kind;
};
// A key of `releases` and its files, files_[first_file, end_file).
struct Release {
  std::uint32_t key_begin, key_size, value_begin;
  std::uint32_t first_file, end_file;
  bool kept = true;  // its key stays
};
struct FileItem {
  std::uint32_t begin, end;
  std::string_view filename;  // unescaped, in simdjson's string buffer
  std::int64_t uploaded = 0;
  bool has_upload = false;
  bool url_names_file = false;
  bool valid = false;  // decided once info.version is known (it may come after the files)
  bool kept = false;
};

// An upload time member as written between its quotes; `is_string` false for null.
struct TimeField {
  std::string_view text;
  bool present = false;
  bool is_string = false;
};
// The members of a file object the filter reads, each at most once.
struct FileFields {
  std::optional<std::string_view> filename, url;
  TimeField upload_time, upload_time_iso;
};

// `upload_time_iso_8601` when it is a string, else `upload_time`, which PyPI writes in UTC
// without a zone: read as parseIsoTime reads the same text with a 'Z'.
std::optional<std::int64_t> uploadTimeOf(const FileFields& fields) {
  if (fields.upload_time_iso.is_string) {
    return parseIsoTime(fields.upload_time_iso.text);
  }
  const TimeField& plain = fields.upload_time;
  std::array<char, 40> zoned;  // longer than any time parseIsoTime reads
  if (!plain.is_string || plain.text.size() >= zoned.size()) {
    return std::nullopt;
  }
  std::copy(plain.text.begin(), plain.text.end(), zoned.begin());
  zoned[plain.text.size()] = 'Z';
  return parseIsoTime(std::string_view(zoned.data(), plain.text.size() + 1));
}

constexpr std::size_t kNotListed = static_cast<std::size_t>(-1);

class JsonApiFilter {
 public:
  JsonApiFilter(const PaddedDocument& doc, std::string_view project)
      : doc_(doc), project_(project) {}

  Result<Ok, MetadataError> read(ondemand::parser& parser) {
    ondemand::document document;
    auto walked = walkDocument(parser, document, doc_, kMaxJsonApiFiles,
                               [&](WalkedMember& m) { return readTopMember(m); });
    if (!walked.ok()) {
      return walked;
    }
    std::vector<std::string_view> keys;
    for (const TopMember& m : top_) {
      keys.emplace_back(doc_.begin() + m.key_begin + 1, m.key_size);
    }
    if (hasRepeated(keys)) {
      return Err{MetadataError{"a top-level key is repeated", 0}};
    }
    keys.clear();
    for (const Release& release : releases_) {
      keys.push_back(keyText(release));
    }
    // A version listed twice would be judged twice, and the client reads one of the two.
    if (hasRepeated(keys)) {
      return Err{MetadataError{"a release is repeated", 0}};
    }
    if (!info_name_ || !info_version_) {
      return Err{MetadataError{"no info with a name and a version", 0}};
    }
    if (!has_urls_) {
      return Err{MetadataError{"no urls", 0}};
    }
    return Ok{};
  }

  // Runs while simdjson's buffers live: file names and info.version are views into them.
  void judge(const VersionJudge& judge, const VersionOrder& order, FilteredJsonApi& out) {
    out.info_version = std::string(*info_version_);
    std::string version;  // one file's version as pip reads it, reused
    const auto validate = [&](FileItem& file, std::string_view group) {
      file.valid = false;
      const auto read = file.url_names_file ? versionOfFile(file.filename, project_)
                                            : std::optional<FileVersion>();
      if (read) {
        version.clear();
        appendPipVersion(version, *read);
        file.valid = order.compare(Ecosystem::Pypi, version, group) == 0;
      }
    };
    if (has_releases_) {
      for (Release& release : releases_) {
        for (std::uint32_t i = release.first_file; i < release.end_file; ++i) {
          validate(files_[i], keyText(release));
        }
        release.kept =
            judgeGroup(judge, keyText(release), release.first_file, release.end_file, out.removed);
      }
      keepUrlsAsReleases(validate);
    } else {
      for (std::uint32_t i = urls_first_; i < urls_end_; ++i) {
        validate(files_[i], *info_version_);
      }
      judgeGroup(judge, *info_version_, urls_first_, urls_end_, out.removed);
    }
    for (const FileItem& file : files_) {
      out.kept_files += file.kept ? 1 : 0;
      out.removed_files += file.valid && !file.kept ? 1 : 0;
      out.invalid_files += file.valid ? 0 : 1;
    }
    // By `order` ("2.0.0" is "2.0"), and by bytes should the order not say so.
    const auto gone =
        std::find_if(out.removed.begin(), out.removed.end(), [&](const RemovedVersion& r) {
          return r.whole && (r.version == *info_version_ ||
                             order.compare(Ecosystem::Pypi, r.version, *info_version_) == 0);
        });
    if (gone != out.removed.end()) {
      out.info_version_removed = static_cast<std::size_t>(gone - out.removed.begin());
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
      if (m.kind == TopKind::Urls) {
        writeFiles(out, urls_first_, urls_end_);
        continue;
      }
      out.put('{');
      bool first = true;
      for (const Release& release : releases_) {
        if (release.kept) {
          if (!first) {
            out.put(',');
          }
          first = false;
          out.put(text(release.key_begin, release.value_begin));
          writeFiles(out, release.first_file, release.end_file);
        }
      }
      out.put('}');
    }
    out.put('}');
  }

 private:
  WalkEnd readTopMember(WalkedMember& m) {
    TopKind kind = TopKind::Other;
    WalkEnd end = m.value_begin;
    if (m.key == "info") {
      end = readInfo(m);
    } else if (m.key == "releases") {
      ondemand::object object;
      if (*m.value_begin != '{' || m.value.get_object().get(object) != simdjson::SUCCESS) {
        return walkError("releases is not an object", doc_, m.value_begin);
      }
      kind = TopKind::Releases;
      has_releases_ = true;
      end = walkObject(object, m.value_begin, doc_, kMaxJsonApiFiles,
                       [&](WalkedMember& r) { return readRelease(r); });
    } else if (m.key == "urls") {
      kind = TopKind::Urls;
      has_urls_ = true;
      urls_first_ = static_cast<std::uint32_t>(files_.size());
      end = readFiles(m.value_begin, m.value);
      urls_end_ = static_cast<std::uint32_t>(files_.size());
    } else {
      end = validatedValue(m.value_begin, doc_);
    }
    if (end.ok()) {
      top_.push_back(TopMember{offset(m.key_begin), static_cast<std::uint32_t>(m.key.size()),
                               offset(m.value_begin), offset(*end), kind});
    }
    return end;
  }

  // `info` is copied whole: walked only to read `name` and `version`, each once.
  WalkEnd readInfo(WalkedMember& m) {
    ondemand::object object;
    if (*m.value_begin != '{' || m.value.get_object().get(object) != simdjson::SUCCESS) {
      return walkError("info is not an object", doc_, m.value_begin);
    }
    return walkObject(
        object, m.value_begin, doc_, kMaxJsonApiFiles, [&](WalkedMember& i) -> WalkEnd {
          if (i.key != "name" && i.key != "version") {
            return validatedValue(i.value_begin, doc_);
          }
          std::optional<std::string_view>& slot = i.key == "name" ? info_name_ : info_version_;
          std::string_view text;
          if (slot) {
            return walkError("info's name or version is repeated", doc_, i.key_begin);
          }
          if (*i.value_begin != '"' || i.value.get_string().get(text) != simdjson::SUCCESS) {
            return walkError("info's name or version is not a string", doc_, i.value_begin);
          }
          if (&slot == &info_name_ && !isProjectName(text, project_)) {
            return walkError("the document names another project", doc_, i.value_begin);
          }
          slot = text;
          return validatedValue(i.value_begin, doc_);
        });
  }

  WalkEnd readRelease(WalkedMember& m) {
    Release release{offset(m.key_begin), static_cast<std::uint32_t>(m.key.size()),
                    offset(m.value_begin), static_cast<std::uint32_t>(files_.size()), 0};
    const WalkEnd end = readFiles(m.value_begin, m.value);
    release.end_file = static_cast<std::uint32_t>(files_.size());
    releases_.push_back(release);
    return end;
  }

  WalkEnd readFiles(const char* begin, ondemand::value& value) {
    ondemand::array array;
    if (*begin != '[' || value.get_array().get(array) != simdjson::SUCCESS) {
      return walkError("a release or urls is not an array", doc_, begin);
    }
    return walkArray(array, begin, doc_, kMaxJsonApiFiles,
                     [&](const char* file, ondemand::value& v) { return readFile(file, v); });
  }

  WalkEnd readFile(const char* begin, ondemand::value& value) {
    if (files_.size() >= kMaxJsonApiFiles) {
      return walkError("too many files", doc_, begin);
    }
    ondemand::object object;
    if (*begin != '{' || value.get_object().get(object) != simdjson::SUCCESS) {
      return walkError("a file is not an object", doc_, begin);
    }
    const WalkEnd end = validatedValue(begin, doc_);
    if (!end.ok()) {
      return end;
    }
    // The span is valid JSON: simdjson walks it only for the members read.
    FileFields fields;
    const auto read = readMembers(
        object, begin, doc_,
        [&](std::string_view key, const char* quote, const char* value_begin,
            ondemand::field& field) -> std::optional<MetadataError> {
          if (key == "filename" || key == "url") {
            std::optional<std::string_view>& slot = key == "url" ? fields.url : fields.filename;
            std::string_view text;
            if (slot) {
              return walkError("a file member is repeated", doc_, quote).error();
            }
            if (value_begin == nullptr || *value_begin != '"' ||
                field.value().get_string().get(text) != simdjson::SUCCESS) {
              return walkError("a file member is not a string", doc_, value_begin).error();
            }
            slot = text;
          } else if (key == "upload_time" || key == "upload_time_iso_8601") {
            TimeField& slot = key == "upload_time" ? fields.upload_time : fields.upload_time_iso;
            if (slot.present) {
              return walkError("a file member is repeated", doc_, quote).error();
            }
            slot.present = true;
            if (value_begin != nullptr && *value_begin == '"') {
              // Read as written: an escaped time is none (as npm's `time`).
              const char* time_end = endOfJsonString(value_begin);
              if (time_end == nullptr) {
                return walkError("not JSON", doc_, value_begin).error();
              }
              slot.text = std::string_view(value_begin + 1,
                                           static_cast<std::size_t>(time_end - value_begin - 2));
              slot.is_string = true;
            } else if (value_begin == nullptr || *value_begin != 'n') {  // valid span: null
              return walkError("a file member is not a string", doc_, value_begin).error();
            }
          }
          return std::nullopt;
        });
    if (!read.ok()) {
      return Err{read.error()};
    }
    if (!fields.filename || !fields.url) {
      return walkError("a file has no filename or no url", doc_, begin);
    }
    FileItem file{offset(begin), offset(*end), *fields.filename};
    FileNameBuffer buffer;
    const auto url_name = fileNameOfUrl(*fields.url, buffer);
    file.url_names_file = url_name && *url_name == *fields.filename;
    const auto uploaded = uploadTimeOf(fields);
    file.has_upload = uploaded.has_value();
    file.uploaded = uploaded.value_or(0);
    files_.push_back(file);
    return end;
  }

  // Judges one version (the files [first, end) validated for it): each of its valid files is
  // asked about, whatever the version's verdict. Whether its key stays: kept, with a file left
  // or none to lose.
  bool judgeGroup(const VersionJudge& judge, std::string_view version, std::uint32_t first,
                  std::uint32_t end, std::vector<RemovedVersion>& removed) {
    std::optional<std::int64_t> earliest;
    for (std::uint32_t i = first; i < end; ++i) {
      const FileItem& file = files_[i];
      if (file.valid && file.has_upload && (!earliest || file.uploaded < *earliest)) {
        earliest = file.uploaded;
      }
    }
    const VersionVerdict verdict = judge.judge(version, earliest);
    const bool kept = verdict.keeps();
    std::size_t listed = kNotListed;
    if (!kept) {
      listed = removed.size();
      removed.push_back(
          RemovedVersion{std::string(version), verdict.reason, std::string(verdict.advisory)});
    }
    std::size_t kept_files = 0;
    for (std::uint32_t i = first; i < end; ++i) {
      FileItem& file = files_[i];
      if (!file.valid) {
        continue;
      }
      const bool too_new = judge.fileTooNew(
          file.filename,
          file.has_upload ? std::optional<std::int64_t>(file.uploaded) : std::nullopt);
      file.kept = kept && !too_new;
      kept_files += file.kept ? 1 : 0;
      if (kept && !file.kept && listed == kNotListed) {
        listed = removed.size();
        removed.push_back(RemovedVersion{std::string(version),
                                         policy::Reason::PackageTooNew,
                                         {},
                                         /*whole=*/false});
      }
    }
    if (kept && listed != kNotListed && kept_files == 0) {
      removed[listed].whole = true;  // a kept version none of whose files stayed
      return false;
    }
    return kept;
  }

  // `urls` lists again files of info.version's release: each stays exactly when a valid file
  // of its name stayed there (by name: the url a client downloads names it), and one that
  // `releases` does not list is invalid.
  template <class Validate>
  void keepUrlsAsReleases(Validate& validate) {
    std::vector<std::uint32_t> by_name;  // valid files of releases, by name, kept ones first
    for (const Release& release : releases_) {
      for (std::uint32_t i = release.first_file; i < release.end_file; ++i) {
        if (files_[i].valid) {
          by_name.push_back(i);
        }
      }
    }
    std::sort(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
      const FileItem& x = files_[a];
      const FileItem& y = files_[b];
      return x.filename != y.filename ? x.filename < y.filename : x.kept > y.kept;
    });
    for (std::uint32_t i = urls_first_; i < urls_end_; ++i) {
      FileItem& file = files_[i];
      validate(file, *info_version_);
      const auto at = std::lower_bound(
          by_name.begin(), by_name.end(), file.filename,
          [&](std::uint32_t a, std::string_view name) { return files_[a].filename < name; });
      if (at == by_name.end() || files_[*at].filename != file.filename) {
        file.valid = false;
      } else {
        file.kept = file.valid && files_[*at].kept;
      }
    }
  }

  template <class Sink>
  void writeFiles(Sink& out, std::uint32_t first, std::uint32_t end) const {
    out.put('[');
    bool any = false;
    for (std::uint32_t i = first; i < end; ++i) {
      if (files_[i].kept) {
        if (any) {
          out.put(',');
        }
        any = true;
        out.put(text(files_[i].begin, files_[i].end));
      }
    }
    out.put(']');
  }

  static bool hasRepeated(std::vector<std::string_view>& keys) {
    std::sort(keys.begin(), keys.end());
    return std::adjacent_find(keys.begin(), keys.end()) != keys.end();
  }

  std::uint32_t offset(const char* p) const { return static_cast<std::uint32_t>(doc_.offsetOf(p)); }
  std::string_view text(std::uint32_t begin, std::uint32_t end) const {
    return {doc_.begin() + begin, end - begin};
  }
  std::string_view keyText(const Release& release) const {
    return {doc_.begin() + release.key_begin + 1, release.key_size};
  }

  const PaddedDocument& doc_;
  std::string_view project_;
  std::vector<TopMember> top_;
  std::vector<Release> releases_;
  std::vector<FileItem> files_;  // in document order: each release's, and urls', together
  std::uint32_t urls_first_ = 0, urls_end_ = 0;
  std::optional<std::string_view> info_name_, info_version_;  // in simdjson's string buffer
  bool has_releases_ = false;
  bool has_urls_ = false;
};

}  // namespace

Result<FilteredJsonApi, MetadataError> filterPypiJsonApi(std::string& document,
                                                         std::string_view project,
                                                         const VersionJudge& judge,
                                                         const VersionOrder& order) {
  const auto normalized = policy::normalizePackageName(Ecosystem::Pypi, project);
  if (!normalized) {
    return Err{MetadataError{"not a project name", 0}};
  }
  const PaddedDocument doc(document);
  JsonApiFilter filter(doc, *normalized);
  return runFilter<FilteredJsonApi>(doc, filter, &FilteredJsonApi::body,
                                    [&](FilteredJsonApi& out) { filter.judge(judge, order, out); });
}

}  // namespace sluice::proxy::packages
