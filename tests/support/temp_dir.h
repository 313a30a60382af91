#pragma once
// A fresh directory under /tmp for one test, removed with everything in it when it ends; and
// whole-file reads and writes for what tests put in it.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>

namespace sluice::test_support {

// The whole of `path`; "" if it cannot be read.
inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `text` as the whole of `path`, written and closed (a watcher sees one close-after-write).
inline void writeFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.flush()) {
    ADD_FAILURE() << "cannot write " << path;
  }
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/sluice-test-XXXXXX";
    if (::mkdtemp(name) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
    }
    path_ = name;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Writes `text` as the file `name` (a path relative to the directory); returns its path.
  std::string write(std::string_view name, std::string_view text) const {
    std::string path = file(name);
    writeFile(path, text);
    return path;
  }

 private:
  std::string path_;
};

}  // namespace sluice::test_support
