#include "proxy/config/config_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "proxy/config/builtin_config.h"

namespace sluice::proxy {

namespace {

// The whole of `path`; `as_read` (when given) gets the identity of the very file read, not of
// whatever the name points at a moment later.
Result<std::string, std::string> readFile(const std::string& path, struct stat* as_read) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Err{std::string("cannot read: ") + std::strerror(errno)};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return Err{std::string("cannot read: ") + std::strerror(error)};
  }
  std::string text;
  // One byte more than the size, so that a file read whole is known to end without a regrowth.
  text.resize(S_ISREG(st.st_mode) ? static_cast<std::size_t>(st.st_size) + 1 : 4096);
  std::size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      text.resize(text.size() * 2);
    }
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return Err{std::string("cannot read: ") + std::strerror(error)};
    }
    if (n == 0) {
      break;
    }
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(used);
  if (as_read != nullptr) {
    *as_read = st;
  }
  return text;
}

}  // namespace

std::string defaultCaBase() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state == '/') {
    return std::string(state) + "/sluice";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/sluice";
  }
  return "./sluice-state";
}

Result<std::vector<policy::ConfigText>, std::string> readSandboxDir(const std::string& dir,
                                                                    ConfigFingerprint* as_read) {
  auto names = sandboxFileNames(dir);
  if (!names) {
    const int error = errno;
    if (as_read != nullptr) {
      as_read->addNoSandboxDir();
    }
    return Err{"cannot open sandboxes_dir " + dir + ": " + std::strerror(error)};
  }

  std::vector<policy::ConfigText> files;
  for (const std::string& name : *names) {
    std::string path = dir + "/" + name;
    struct stat st {};
    const bool found = ::stat(path.c_str(), &st) == 0;
    if (!found || !S_ISREG(st.st_mode)) {
      // A directory named x.yaml, or a file removed while we listed: recorded as it is, so
      // that it is no difference from what ConfigWatch sees.
      if (as_read != nullptr) {
        as_read->addSandboxFile(name, found ? &st : nullptr);
      }
      continue;
    }
    auto text = readFile(path, &st);
    if (!text) {
      return Err{path + ": " + text.error()};
    }
    if (as_read != nullptr) {
      as_read->addSandboxFile(name, &st);
    }
    files.push_back({path, std::move(text).value()});
  }
  return files;
}

policy::LoadOptions defaultLoadOptions(ConfigFingerprint* as_read) {
  policy::LoadOptions options;
  options.default_ca_base = defaultCaBase();
  options.read_sandbox_dir = [as_read](const std::string& dir) {
    return readSandboxDir(dir, as_read);
  };
  return options;
}

policy::ConfigResult loadConfigFile(const std::string& path, ConfigFingerprint* as_read) {
  struct stat st {};
  auto text = readFile(path, &st);
  if (as_read != nullptr) {
    as_read->addConfigFile(text ? &st : nullptr);
  }
  if (!text) {
    return Err{std::vector<policy::ConfigError>{{path, 0, 0, text.error()}}};
  }
  return policy::loadConfig({path, std::move(text).value()}, defaultLoadOptions(as_read));
}

policy::ConfigResult loadBuiltinConfig() {
  return policy::loadConfig({std::string(kBuiltinConfigName), std::string(builtinConfigText())},
                            defaultLoadOptions());
}

void printConfigErrors(std::FILE* stream, const std::vector<policy::ConfigError>& errors) {
  for (const policy::ConfigError& e : errors) {
    std::fprintf(stream, "%s\n", e.toString().c_str());
  }
}

}  // namespace sluice::proxy
