#include "certs/shown_path.h"

#include <filesystem>
#include <system_error>

namespace sluice::certs {

std::string shownPath(std::string_view path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) {
    return std::string(path);
  }
  return absolute.lexically_normal().string();
}

}  // namespace sluice::certs
