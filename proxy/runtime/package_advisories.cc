#include "proxy/runtime/package_advisories.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "proxy/packages/zip_reader.h"

namespace sluice::proxy {
namespace {

namespace fs = std::filesystem;

// The whole file, at most `limit` bytes; a message when it cannot be read or is larger.
Result<std::string, std::string> readWhole(const fs::path& path, std::uint64_t limit) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    return Err{path.string() + ": " + ec.message()};
  }
  if (size > limit) {
    return Err{path.string() + ": " + std::to_string(size) + " bytes, more than the " +
               std::to_string(limit) + " an advisory file may have"};
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return Err{path.string() + ": cannot be read: " + std::strerror(errno)};
  }
  return bytes;
}

Result<Ok, std::string> readDirectory(const fs::path& root,
                                      std::vector<packages::AdvisoryEntry>& out) {
  packages::OsvReader reader;
  std::error_code ec;
  // Symbolic links below the root are not followed: a link out of the tree is not read.
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
  std::size_t visited = 0;
  std::string error;
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++visited > kMaxAdvisoryFiles) {
      return Err{root.string() + ": more than " + std::to_string(kMaxAdvisoryFiles) +
                 " files and directories below it"};
    }
    if (it.depth() > static_cast<int>(kMaxAdvisoryDepth)) {
      return Err{root.string() + ": directories deeper than " + std::to_string(kMaxAdvisoryDepth) +
                 " below it"};
    }
    const fs::directory_entry& entry = *it;
    if (entry.is_directory(ec) && entry.path().filename().string().starts_with('.')) {
      // A checkout's .git (the malicious-packages repository cloned as it is) holds no
      // advisory, and many files.
      it.disable_recursion_pending();
      continue;
    }
    if (!entry.is_regular_file(ec) || entry.path().extension() != ".json") {
      continue;
    }
    auto bytes = readWhole(entry.path(), packages::kMaxOsvDocument);
    if (!bytes) {
      return Err{bytes.error()};
    }
    if (!reader.read(bytes.value(), out, &error)) {
      return Err{entry.path().string() + ": not an OSV advisory: " + error};
    }
  }
  if (ec) {
    return Err{root.string() + ": " + ec.message()};
  }
  return Ok{};
}

Result<Ok, std::string> readZip(const fs::path& path, std::vector<packages::AdvisoryEntry>& out) {
  auto archive = readWhole(path, kMaxAdvisoryZipBytes);
  if (!archive) {
    return Err{archive.error()};
  }
  packages::ZipLimits limits;
  limits.max_entries = kMaxAdvisoryFiles;
  limits.max_member_size = packages::kMaxOsvDocument;
  auto zip = packages::ZipReader::open(archive.value(), limits);
  if (!zip) {
    return Err{path.string() + ": not a zip sluice reads: " + zip.error()};
  }
  packages::OsvReader reader;
  std::string scratch;
  std::string error;
  for (std::size_t i = 0; i < zip.value().size(); ++i) {
    const std::string_view name = zip.value().name(i);
    if (!name.ends_with(".json")) {
      continue;
    }
    auto bytes = zip.value().extract(i, scratch);
    if (!bytes) {
      return Err{path.string() + ": member " + std::string(name.substr(0, 200)) + ": " +
                 bytes.error()};
    }
    if (!reader.read(bytes.value(), out, &error)) {
      return Err{path.string() + ": member " + std::string(name.substr(0, 200)) +
                 ": not an OSV advisory: " + error};
    }
  }
  return Ok{};
}

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

Result<Ok, std::string> readAdvisories(const std::string& path,
                                       std::vector<packages::AdvisoryEntry>& out) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return Err{path + ": " + (ec ? ec.message() : std::string("no such file or directory"))};
  }
  if (fs::is_directory(status)) {
    return readDirectory(path, out);
  }
  if (fs::is_regular_file(status) && fs::path(path).extension() == ".zip") {
    return readZip(path, out);
  }
  return Err{path + ": neither a directory of OSV JSON files nor a .zip of them"};
}

Result<std::shared_ptr<const PolicyAdvisories>, std::string> PolicyAdvisories::load(
    const policy::Config& config) {
  auto loaded = std::make_shared<PolicyAdvisories>();
  // Each path read once, however many policies list it.
  std::map<std::string, std::vector<packages::AdvisoryEntry>> by_path;
  for (const std::shared_ptr<const policy::Policy>& policy : config.policies) {
    if (!policy->packages || policy->packages->advisories.empty()) {
      continue;
    }
    std::vector<packages::AdvisoryEntry> entries;
    for (const std::string& path : policy->packages->advisories) {
      auto it = by_path.find(path);
      if (it == by_path.end()) {
        std::vector<packages::AdvisoryEntry> read;
        if (auto ok = readAdvisories(path, read); !ok) {
          return Err{"policy '" + policy->name + "': advisories " + ok.error()};
        }
        it = by_path.emplace(path, std::move(read)).first;
      }
      entries.insert(entries.end(), it->second.begin(), it->second.end());
    }
    auto index = std::make_unique<packages::AdvisoryIndex>(std::move(entries));
    loaded->summary_.push_back("policy '" + policy->name + "': " + std::to_string(index->size()) +
                               " advisories (" + std::to_string(index->entryCount()) +
                               " package entries) from " +
                               std::to_string(policy->packages->advisories.size()) +
                               (policy->packages->advisories.size() == 1 ? " source" : " sources") +
                               ", fingerprint " + fingerprintText(*index));
    loaded->by_policy_.emplace(policy.get(), std::move(index));
  }
  return std::shared_ptr<const PolicyAdvisories>(std::move(loaded));
}

std::string fingerprintText(const packages::AdvisoryIndex& index) {
  return hex64(index.fingerprint());
}

const packages::AdvisoryIndex* PolicyAdvisories::find(const policy::Policy& policy) const {
  auto it = by_policy_.find(&policy);
  return it == by_policy_.end() ? nullptr : it->second.get();
}

}  // namespace sluice::proxy
