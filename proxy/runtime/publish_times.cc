#include "proxy/runtime/publish_times.h"

#include <chrono>

#include "proxy/packages/version_order.h"

namespace sluice::proxy {

std::int64_t unixTimeMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string PublishTimes::key(policy::Ecosystem ecosystem, std::string_view name,
                              std::string_view version) {
  std::string out;
  out += ecosystem == policy::Ecosystem::Npm ? 'n' : 'p';
  out += name;
  out += '\0';  // (no name holds one)
  out += packages::versionKey(ecosystem, version);
  return out;
}

std::string PublishTimes::fileKey(std::string_view name, std::string_view file) {
  std::string out;
  out += 'f';
  out += name;
  out += '\0';
  out += file;
  return out;
}

void PublishTimes::insert(std::string key, std::int64_t published) {
  if (current_.size() >= kGeneration) {
    previous_ = std::move(current_);
    current_ = {};
  }
  current_.insert_or_assign(std::move(key), published);
}

std::optional<std::int64_t> PublishTimes::lookup(const std::string& key) const {
  std::lock_guard lock(mutex_);
  if (auto it = current_.find(key); it != current_.end()) {
    return it->second;
  }
  if (auto it = previous_.find(key); it != previous_.end()) {
    return it->second;
  }
  return std::nullopt;
}

void PublishTimes::learn(policy::Ecosystem ecosystem, std::string_view name, Times versions) {
  learnAll(versions, kMaxVersionLength,
           [&](std::string_view version) { return key(ecosystem, name, version); });
}

std::optional<std::int64_t> PublishTimes::find(policy::Ecosystem ecosystem, std::string_view name,
                                               std::string_view version) const {
  return lookup(key(ecosystem, name, version));
}

void PublishTimes::learnPypiFiles(std::string_view name, Times files) {
  learnAll(files, kMaxFileNameLength, [&](std::string_view file) { return fileKey(name, file); });
}

std::optional<std::int64_t> PublishTimes::findPypiFile(std::string_view name,
                                                       std::string_view file) const {
  return lookup(fileKey(name, file));
}

std::size_t PublishTimes::size() const {
  std::lock_guard lock(mutex_);
  return current_.size() + previous_.size();
}

}  // namespace sluice::proxy
