#pragma once
// The files of a PyPI page grouped by the version they are of, each version judged once and,
// when kept, each of its files by its own upload time (an internal header of the simple-API
// filters, JSON and HTML alike; docs/packages.md#the-age-rule).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/packages/pypi_file_name.h"
#include "proxy/packages/version_judge.h"

namespace sluice::proxy::packages {

class FileVersions {
 public:
  // A file named `file_name` of `version`, uploaded at `uploaded` (ms since the epoch) when
  // known.
  void add(const FileVersion& version, std::string_view file_name,
           std::optional<std::int64_t> uploaded);
  // Judges each version once, in the order of its first file, with the earliest upload time
  // among its files (none when no file has one): a version removed loses every file. A kept
  // version's files are then judged one by one (VersionJudge::fileTooNew), each with its own
  // time: a file uploaded after the version's first may be too new when the version is not.
  // Appends to `removed`, in the order of the first file that went: each removed version
  // (whole), and each kept version that lost some files (not whole, PackageTooNew).
  void judge(const VersionJudge& judge, std::vector<RemovedVersion>& removed);
  // Whether the i-th file added is kept (after judge()).
  bool kept(std::size_t file) const { return files_[file].kept; }
  std::size_t size() const { return files_.size(); }

 private:
  struct File {
    std::uint32_t begin = 0, version_size = 0, name_size = 0;  // version, then name, in arena_
    std::int64_t uploaded = 0;
    bool has_upload = false;
    bool kept = true;
  };
  std::string_view versionOf(const File& file) const {
    return {arena_.data() + file.begin, file.version_size};
  }
  std::string_view nameOf(const File& file) const {
    return {arena_.data() + file.begin + file.version_size, file.name_size};
  }

  // The versions and file names one after the other: one buffer, not two strings per file.
  std::string arena_;
  std::vector<File> files_;
};

}  // namespace sluice::proxy::packages
