#include "certs/others_can_read.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sluice::certs {

namespace {

std::string modeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

std::optional<std::string> whyOthersCannotRead(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return path + " is not an absolute path";
  }
  // Each directory on the way, from the root down: another user needs to search it.
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      return dir + ": " + std::strerror(errno);
    }
    if ((st.st_mode & S_IXOTH) == 0) {
      return dir + " is mode " + modeText(st.st_mode);
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return path + ": " + std::strerror(errno);
  }
  if ((st.st_mode & S_IROTH) == 0) {
    return path + " is mode " + modeText(st.st_mode);
  }
  return std::nullopt;
}

}  // namespace sluice::certs
