#pragma once
// A fresh directory under /tmp for one test, removed with everything in it when it ends.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace sluice::test_support {

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

 private:
  std::string path_;
};

}  // namespace sluice::test_support
