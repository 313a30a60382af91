#include "certs/public_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/stat.h>
#include <unistd.h>

namespace sluice::certs {

Result<std::string, std::string> readSmallFile(const std::string& path, std::size_t max) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) {
    return Err{path + ": " + std::strerror(errno)};
  }
  std::string bytes(max + 1, '\0');
  const std::size_t n = std::fread(bytes.data(), 1, bytes.size(), file.get());
  bytes.resize(n);
  return bytes;
}

Result<Ok, std::string> replaceFile(const std::string& dir, std::string_view name,
                                    std::string_view bytes) {
  const std::string path = dir + "/" + std::string(name);
  std::string temporary = dir + "/." + std::string(name) + ".XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) {
    return Err{temporary + ": cannot create: " + std::strerror(errno)};
  }
  std::size_t written = 0;
  bool ok = ::fchmod(fd, kPublicFileMode) == 0;
  while (ok && written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    ok = n > 0;
    written += ok ? static_cast<std::size_t>(n) : 0;
  }
  ok = ok && ::fsync(fd) == 0;
  const int err = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int failure = ok ? errno : err;
    ::unlink(temporary.c_str());
    return Err{path + ": cannot write: " + std::strerror(failure)};
  }
  return Ok{};
}

}  // namespace sluice::certs
