#pragma once
// What the configuration on disk is, as text that differs whenever a file the loader reads
// differs: the config file's and each sandbox file's identity (device, inode), size and
// modification time, in the loader's order.
//
// Two moments are compared. The files as the loader read them are recorded from the very
// descriptors it read (fstat), and the files as they are now are stat'ed by ConfigWatch. A
// watch that measured changes from the moment it began, instead of from what was read, would
// never notice a file dropped into sandboxes_dir while sluice was starting or reloading: the
// orchestrator that starts sluice and at once adds its first sandbox.

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy {

// Whether the loader reads a file of this name in sandboxes_dir: ending in .yaml or .yml and not
// hidden (an editor's or an orchestrator's temporary file, a ConfigMap's `..data`).
bool isSandboxFileName(std::string_view name);

// Those names in `dir`, sorted (the load order, so which of two duplicates is reported is
// stable); nullopt, errno set, if `dir` cannot be opened.
std::optional<std::vector<std::string>> sandboxFileNames(const std::string& dir);

class ConfigFingerprint {
 public:
  // The config file first, then each sandbox file in name order; `st` null: it is missing.
  void addConfigFile(const struct stat* st);
  void addSandboxFile(std::string_view name, const struct stat* st);
  void addNoSandboxDir();

  // What is on disk now: `file` and the sandbox files of `dir` (none when empty), following
  // symlinks as the loader's open() does.
  static ConfigFingerprint onDisk(const std::string& file, const std::string& dir);

  const std::string& text() const { return text_; }
  friend bool operator==(const ConfigFingerprint&, const ConfigFingerprint&) = default;

 private:
  void addStat(const struct stat* st);

  std::string text_;
};

}  // namespace sluice::proxy
