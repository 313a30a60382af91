#pragma once
// The files of a PyPI page grouped by the version they are of, each version judged once (an
// internal header of the simple-API filters, JSON and HTML alike).

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
  // A file of `version`, uploaded at `uploaded` (ms since the epoch) when known.
  void add(const FileVersion& version, std::optional<std::int64_t> uploaded);
  // Judges each version once, in the order of its first file, with the earliest upload time
  // among its files (none when no file has one); appends the removed ones to `removed`.
  void judge(const VersionJudge& judge, std::vector<RemovedVersion>& removed);
  // Whether the i-th file added is of a kept version (after judge()).
  bool kept(std::size_t file) const { return files_[file].kept; }
  std::size_t size() const { return files_.size(); }

 private:
  struct File {
    std::uint32_t begin = 0, size = 0;  // the version as pip reads it, in arena_
    std::int64_t uploaded = 0;
    bool has_upload = false;
    bool kept = true;
  };
  std::string_view versionOf(const File& file) const {
    return {arena_.data() + file.begin, file.size};
  }

  std::string arena_;  // the versions one after the other: one buffer, not one string per file
  std::vector<File> files_;
};

}  // namespace sluice::proxy::packages
