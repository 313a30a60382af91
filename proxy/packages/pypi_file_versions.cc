#include "proxy/packages/pypi_file_versions.h"

#include <algorithm>
#include <numeric>

namespace sluice::proxy::packages {

void FileVersions::add(const FileVersion& version, std::string_view file_name,
                       std::optional<std::int64_t> uploaded) {
  File file;
  file.begin = static_cast<std::uint32_t>(arena_.size());
  appendPipVersion(arena_, version);
  file.version_size = static_cast<std::uint32_t>(arena_.size() - file.begin);
  arena_.append(file_name);
  file.name_size = static_cast<std::uint32_t>(file_name.size());
  file.has_upload = uploaded.has_value();
  file.uploaded = uploaded.value_or(0);
  files_.push_back(file);
}

void FileVersions::judge(const VersionJudge& judge, std::vector<RemovedVersion>& removed) {
  // Group by spelling: two spellings of one PEP 440 version are judged apart, each with its
  // own files' earliest time, which is never more lenient than judging them together.
  std::vector<std::uint32_t> order(files_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return versionOf(files_[a]) < versionOf(files_[b]);
  });
  constexpr std::size_t kNotListed = static_cast<std::size_t>(-1);
  struct Group {
    std::optional<std::int64_t> earliest;
    bool judged = false;
    bool kept = true;
    std::size_t kept_files = 0;
    std::size_t listed = kNotListed;  // its entry in `removed`, once one of its files went
  };
  std::vector<Group> groups;
  std::vector<std::uint32_t> group_of(files_.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const File& file = files_[order[i]];
    if (i == 0 || versionOf(file) != versionOf(files_[order[i - 1]])) {
      groups.emplace_back();
    }
    Group& group = groups.back();
    group_of[order[i]] = static_cast<std::uint32_t>(groups.size() - 1);
    if (file.has_upload && (!group.earliest || file.uploaded < *group.earliest)) {
      group.earliest = file.uploaded;
    }
  }
  for (std::size_t i = 0; i < files_.size(); ++i) {
    File& file = files_[i];
    Group& group = groups[group_of[i]];
    const std::string_view version = versionOf(file);
    if (!group.judged) {
      group.judged = true;
      const VersionVerdict verdict = judge.judge(version, group.earliest);
      group.kept = verdict.keeps();
      if (!group.kept) {
        group.listed = removed.size();
        removed.push_back(
            RemovedVersion{std::string(version), verdict.reason, std::string(verdict.advisory)});
      }
    }
    // (Asked of every file, a removed version's too: the judge sees every upload time.)
    const bool too_new = judge.fileTooNew(
        nameOf(file), file.has_upload ? std::optional<std::int64_t>(file.uploaded) : std::nullopt);
    file.kept = group.kept && !too_new;
    group.kept_files += file.kept ? 1 : 0;
    if (group.kept && !file.kept && group.listed == kNotListed) {
      group.listed = removed.size();
      removed.push_back(RemovedVersion{std::string(version),
                                       policy::Reason::PackageTooNew,
                                       {},
                                       /*whole=*/false});
    }
  }
  // A kept version none of whose files stayed went whole after all.
  for (const Group& group : groups) {
    if (group.kept && group.listed != kNotListed && group.kept_files == 0) {
      removed[group.listed].whole = true;
    }
  }
}

}  // namespace sluice::proxy::packages
