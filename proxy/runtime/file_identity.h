#pragma once
// Which file a path names and which version of it: device, inode, size and modification time.
// A file replaced by a rename (an editor, a ConfigMap, `install`) is another inode; one
// rewritten in place another size or mtime. What the configuration watch compares, and what
// tells a reload that a CA or trust file was replaced under the same name.

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

namespace sluice::proxy {

struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;

  static FileIdentity of(const struct stat& st) {
    return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
            static_cast<std::int64_t>(st.st_size), static_cast<std::int64_t>(st.st_mtim.tv_sec),
            static_cast<std::int64_t>(st.st_mtim.tv_nsec)};
  }
  // Following symlinks, as open() does; nullopt if there is nothing there.
  static std::optional<FileIdentity> ofPath(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return std::nullopt;
    }
    return of(st);
  }

  std::string toString() const {
    return std::to_string(device) + ":" + std::to_string(inode) + ":" + std::to_string(size) +
           ":" + std::to_string(mtime_sec) + "." + std::to_string(mtime_nsec);
  }
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

}  // namespace sluice::proxy
