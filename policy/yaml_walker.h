#pragma once
// Strict reading of yaml-cpp 0.7 nodes for the config loader, collecting every error rather
// than stopping at the first. yaml-cpp is permissive where an allowlist must not be: it keeps
// the first of two duplicate keys without a word, reads `0443` as octal, `yes` as true, and
// treats a missing key like a present one until as<>() throws without a position. So nothing
// here calls as<>(): maps are walked entry by entry against a fixed set of keys, and scalars
// are parsed from their text by config_scalars.h.
//
// Positions: yaml-cpp marks are 0-based; ConfigError's are 1-based. An error about a value is
// reported at the value, about a key (unknown, duplicate) at the key, about a missing key at
// the map that lacks it.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "policy/config_loader.h"

namespace sluice::policy {

// "FILE:LINE:COL: path: message" as a ConfigError; `mark` as yaml-cpp gives it (0-based; a
// null mark gives line 0). An empty path leaves the message alone.
ConfigError makeConfigError(const std::string& file, const YAML::Mark& mark, std::string_view path,
                            std::string_view message);

// A node and where to report about it. yaml-cpp gives an implicit null (`key:` at the end of a
// line) the position of the next token, often on a later line; such a map value carries its
// key's position instead.
struct YamlValue {
  YAML::Node node;
  YAML::Mark mark;
};

// The context of one file's walk: its name, the key path of the value being read, and the
// error list shared by every file of one load. Not copyable; `errors` outlives it.
class YamlWalker {
 public:
  YamlWalker(std::string file, std::vector<ConfigError>* errors);
  YamlWalker(const YamlWalker&) = delete;
  YamlWalker& operator=(const YamlWalker&) = delete;

  const std::string& file() const { return file_; }
  // "policies.mirrors.rules[0].ports[1]"; "" at the root of the file.
  const std::string& path() const { return path_; }
  void error(const YAML::Mark& mark, std::string_view message);
  // Errors in the shared list so far, across files: compare before and after reading a part
  // to learn whether it was clean.
  std::size_t errorCount() const { return errors_->size(); }

  // Extends the path for as long as it lives.
  class Scope {
   public:
    Scope(YamlWalker& walker, std::string_view key);  // ".key" ("key" at the root)
    Scope(YamlWalker& walker, std::size_t index);     // "[index]"
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    YamlWalker& walker_;
    std::size_t restore_;
  };

 private:
  std::string file_;
  std::vector<ConfigError>* errors_;
  std::string path_;
};

// For messages: "a map", "a list", "null", or a scalar's text in quotes.
std::string describeNode(const YAML::Node& node);

struct MapEntry {
  std::string key;
  YAML::Mark key_mark;
  YamlValue value;
};

// The entries of one map, checked when constructed. Reports at the current path: a value that
// is not a map ("expected a map, got a list"), a key that is not a scalar, a key not in
// `allowed` ("unknown key 'foo' (expected one of: a, b, c)"), and a duplicate key ("duplicate
// key 'ports' (first at line 12)"), whose value is ignored. An empty `allowed` takes any key
// (a map of names, such as `policies`). `walker` must outlive the reader.
class MapReader {
 public:
  MapReader(YamlWalker& walker, const YamlValue& map, std::vector<std::string_view> allowed);

  bool isMap() const { return is_map_; }
  const YamlValue& map() const { return map_; }
  // Document order, each key once (its first occurrence).
  const std::vector<MapEntry>& entries() const { return entries_; }

  const MapEntry* find(std::string_view key) const;
  // find(), reporting "missing required key 'k'" at the map when it is absent.
  const MapEntry* require(std::string_view key) const;

  // Calls read(value) with the path extended by `key` when the key is present (and, for
  // readRequired, reports it missing otherwise). Returns whether it was present.
  template <class F>
  bool read(std::string_view key, F&& read_value) const {
    return visit(find(key), key, read_value);
  }
  template <class F>
  bool readRequired(std::string_view key, F&& read_value) const {
    return visit(require(key), key, read_value);
  }

 private:
  template <class F>
  bool visit(const MapEntry* entry, std::string_view key, F& read_value) const {
    if (entry == nullptr) {
      return false;
    }
    YamlWalker::Scope scope(walker_, key);
    read_value(entry->value);
    return true;
  }

  YamlWalker& walker_;
  YamlValue map_;
  bool is_map_ = false;
  std::vector<MapEntry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // key -> position in entries_
};

// Typed scalars. Each reports its own error at the value and returns nullopt on failure.
//   readString   any scalar, quoted or not ("expected a string, got a map")
//   readInteger  a plain (unquoted, untagged) decimal number: `0443`, `0x1bb`, `+443` and "443"
//                are errors, since yaml-cpp and a reader of the file would disagree on them
//   readBool     plain `true` or `false`; yes/no/on/off and quoted forms are errors
//   readDuration a duration scalar (config_scalars.h), "2s"
//   readSize     a size scalar, "64KiB" or a plain number of bytes
std::optional<std::string> readString(YamlWalker& walker, const YamlValue& value);
std::optional<std::uint64_t> readInteger(YamlWalker& walker, const YamlValue& value);
std::optional<bool> readBool(YamlWalker& walker, const YamlValue& value);
std::optional<std::chrono::milliseconds> readDuration(YamlWalker& walker, const YamlValue& value);
std::optional<std::uint64_t> readSize(YamlWalker& walker, const YamlValue& value);

// Whether `value` is a sequence; reports "expected a list, got ..." otherwise. A scalar is not
// taken as a list of one: that would make `ports: 443` and `ports: [443]` the same, and a
// mistyped `hosts` a silent one-element allowlist.
bool checkSequence(YamlWalker& walker, const YamlValue& value);

// A list whose items read_item(YamlValue) turns into std::optional<T>, each read with the path
// extended by "[i]". Every item is read, so all bad items are reported. nullopt when the value
// is not a list, any item failed, or the list is empty and `if_empty` (the message then
// reported at the list) is not empty.
template <class T, class F>
std::optional<std::vector<T>> readList(YamlWalker& walker, const YamlValue& value,
                                       std::string_view if_empty, F&& read_item) {
  if (!checkSequence(walker, value)) {
    return std::nullopt;
  }
  if (value.node.size() == 0 && !if_empty.empty()) {
    walker.error(value.mark, if_empty);
    return std::nullopt;
  }
  std::vector<T> out;
  bool ok = true;
  std::size_t index = 0;
  for (auto it = value.node.begin(); it != value.node.end(); ++it, ++index) {
    const YAML::Node item = *it;
    YamlWalker::Scope scope(walker, index);
    std::optional<T> read = read_item(YamlValue{item, item.Mark()});
    if (read) {
      out.push_back(std::move(*read));
    } else {
      ok = false;
    }
  }
  if (!ok) {
    return std::nullopt;
  }
  return out;
}

}  // namespace sluice::policy
