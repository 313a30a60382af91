#include "proxy/config_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "proxy/builtin_config.h"

namespace sluice::proxy {

namespace {

Result<std::string, std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Err{std::string("cannot read: ") + std::strerror(errno)};
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return Err{std::string("cannot read: ") + std::strerror(errno)};
  }
  return text.str();
}

bool hasYamlExtension(std::string_view name) {
  return name.ends_with(".yaml") || name.ends_with(".yml");
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

Result<std::vector<policy::ConfigText>, std::string> readSandboxDir(const std::string& dir) {
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr) {
    return Err{"cannot open sandboxes_dir " + dir + ": " + std::strerror(errno)};
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(handle)) {
    std::string_view name = entry->d_name;
    if (name.starts_with(".") || !hasYamlExtension(name)) {
      continue;
    }
    names.emplace_back(name);
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());

  std::vector<policy::ConfigText> files;
  for (const std::string& name : names) {
    std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      continue;  // a directory named x.yaml, or a file removed while we listed
    }
    auto text = readFile(path);
    if (!text) {
      return Err{path + ": " + text.error()};
    }
    files.push_back({path, std::move(text).value()});
  }
  return files;
}

policy::LoadOptions defaultLoadOptions() {
  policy::LoadOptions options;
  options.default_ca_base = defaultCaBase();
  options.read_sandbox_dir = readSandboxDir;
  return options;
}

policy::ConfigResult loadConfigFile(const std::string& path) {
  auto text = readFile(path);
  if (!text) {
    return Err{std::vector<policy::ConfigError>{{path, 0, 0, text.error()}}};
  }
  return policy::loadConfig({path, std::move(text).value()}, defaultLoadOptions());
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
