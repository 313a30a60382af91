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

void PublishTimes::learn(policy::Ecosystem ecosystem, std::string_view name,
                         std::span<const std::pair<std::string, std::int64_t>> versions) {
  if (versions.empty()) {
    return;
  }
  std::lock_guard lock(mutex_);
  for (const auto& [version, published] : versions) {
    if (version.size() > kMaxVersionLength) {
      continue;
    }
    if (current_.size() >= kGeneration) {
      previous_ = std::move(current_);
      current_ = {};
    }
    current_.insert_or_assign(key(ecosystem, name, version), published);
  }
}

std::optional<std::int64_t> PublishTimes::find(policy::Ecosystem ecosystem, std::string_view name,
                                               std::string_view version) const {
  const std::string wanted = key(ecosystem, name, version);
  std::lock_guard lock(mutex_);
  if (auto it = current_.find(wanted); it != current_.end()) {
    return it->second;
  }
  if (auto it = previous_.find(wanted); it != previous_.end()) {
    return it->second;
  }
  return std::nullopt;
}

std::size_t PublishTimes::size() const {
  std::lock_guard lock(mutex_);
  return current_.size() + previous_.size();
}

}  // namespace sluice::proxy
