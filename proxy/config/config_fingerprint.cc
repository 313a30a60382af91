#include "proxy/config/config_fingerprint.h"

#include <dirent.h>

#include <algorithm>

#include "proxy/runtime/file_identity.h"

namespace sluice::proxy {

bool isSandboxFileName(std::string_view name) {
  return !name.starts_with(".") && (name.ends_with(".yaml") || name.ends_with(".yml"));
}

std::optional<std::vector<std::string>> sandboxFileNames(const std::string& dir) {
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(handle)) {
    if (isSandboxFileName(entry->d_name)) {
      names.emplace_back(entry->d_name);
    }
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());
  return names;
}

void ConfigFingerprint::addStat(const struct stat* st) {
  if (st == nullptr) {
    text_ += "-;";
    return;
  }
  text_ += FileIdentity::of(*st).toString();
  text_ += ';';
}

void ConfigFingerprint::addConfigFile(const struct stat* st) { addStat(st); }

void ConfigFingerprint::addSandboxFile(std::string_view name, const struct stat* st) {
  text_ += name;
  text_ += '=';
  addStat(st);
}

void ConfigFingerprint::addNoSandboxDir() { text_ += "no directory;"; }

ConfigFingerprint ConfigFingerprint::onDisk(const std::string& file, const std::string& dir) {
  ConfigFingerprint out;
  struct stat st {};
  out.addConfigFile(::stat(file.c_str(), &st) == 0 ? &st : nullptr);
  if (dir.empty()) {
    return out;
  }
  auto names = sandboxFileNames(dir);
  if (!names) {
    out.addNoSandboxDir();
    return out;
  }
  for (const std::string& name : *names) {
    const std::string path = dir + "/" + name;
    out.addSandboxFile(name, ::stat(path.c_str(), &st) == 0 ? &st : nullptr);
  }
  return out;
}

}  // namespace sluice::proxy
