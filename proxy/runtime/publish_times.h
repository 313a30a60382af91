#pragma once
// When each package version was published, as the registry's own metadata said
// (docs/packages.md#the-decision): learned while sluice filters a sandbox's metadata with a
// minimum age, and read when the sandbox then asks for a version's file, which carries no time
// of its own. Shared by the sandbox's connections on every worker (a mutex: a lookup or an
// insert is a hash-map operation, a batch per filtered document).
//
// Bounds: at most kGeneration entries in each of two generations; when the current one is
// full it becomes the previous one and the one before is dropped, so an entry lives at least
// until kGeneration newer ones were learned (a resolver fetches a package's metadata moments
// before its files). A key is the ecosystem, the normal name and the version's order key
// (version_order.h: "1.0" and "1.0.0" are one PyPI version), each bounded by what the recogniser
// and the filters accept; or, for a PyPI file, the normal name and the file's name (a PyPI
// version's files are uploaded apart, each with its own time: docs/packages.md#the-age-rule).

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "policy/package_name.h"

namespace sluice::proxy {

// The age rule's now: wall time in ms since the Unix epoch, as the registries write their times.
std::int64_t unixTimeMs();

class PublishTimes {
 public:
  static constexpr std::size_t kGeneration = 1 << 17;
  // Longer version texts are not learned (no order reads them as a version: version_order.h,
  // advisory.h's kMaxOsvVersionLength), so an entry is at most a name and this much: the bound
  // on memory is in entries and bytes alike, whatever a document's keys are.
  static constexpr std::size_t kMaxVersionLength = 256;
  // Likewise for a file name (a wheel's spells its tags: rarely over 200 bytes).
  static constexpr std::size_t kMaxFileNameLength = 512;
  using Times = std::span<const std::pair<std::string, std::int64_t>>;

  // One document's versions with their publish times (ms since the Unix epoch); a version
  // longer than kMaxVersionLength is skipped (a file of it stays of unknown age).
  void learn(policy::Ecosystem ecosystem, std::string_view name, Times versions);
  std::optional<std::int64_t> find(policy::Ecosystem ecosystem, std::string_view name,
                                   std::string_view version) const;
  // One PyPI page's files with their upload times, by file name; a name longer than
  // kMaxFileNameLength is skipped.
  void learnPypiFiles(std::string_view name, Times files);
  std::optional<std::int64_t> findPypiFile(std::string_view name, std::string_view file) const;
  std::size_t size() const;

 private:
  static std::string key(policy::Ecosystem ecosystem, std::string_view name,
                         std::string_view version);
  static std::string fileKey(std::string_view name, std::string_view file);
  // Each entry whose text is at most `max_length` bytes, under key_of(text), one lock for all.
  template <class KeyOf>
  void learnAll(Times entries, std::size_t max_length, KeyOf key_of) {
    if (entries.empty()) {
      return;
    }
    std::lock_guard lock(mutex_);
    for (const auto& [text, published] : entries) {
      if (text.size() <= max_length) {
        insert(key_of(text), published);
      }
    }
  }
  void insert(std::string key, std::int64_t published);  // mutex_ held
  std::optional<std::int64_t> lookup(const std::string& key) const;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::int64_t> current_;
  std::unordered_map<std::string, std::int64_t> previous_;
};

}  // namespace sluice::proxy
