#include "policy/yaml_walker.h"

#include <algorithm>
#include <utility>

#include "policy/config_scalars.h"

namespace sluice::policy {
namespace {

// yaml-cpp 0.7 gives a plain scalar the tag "?" and a quoted one "!"; anything else was
// written as an explicit tag (`!!str 443`, `!!int 443`).
constexpr std::string_view kPlainTag = "?";
constexpr std::string_view kQuotedTag = "!";

std::string expected(std::string_view what, const YAML::Node& node) {
  std::string message = "expected ";
  message += what;
  message += ", got ";
  message += describeNode(node);
  return message;
}

// A scalar that names a number, but quoted or tagged: the reader sees a number, yaml-cpp a
// string (or whatever the tag says). Refused so that the file means one thing.
std::string notPlain(std::string_view what, const YAML::Node& node) {
  std::string message = "expected " + std::string(what) + ", got ";
  if (node.Tag() == kQuotedTag) {
    message += "the quoted string " + quoteForMessage(node.Scalar()) + " (write it without quotes)";
  } else {
    message += quoteForMessage(node.Scalar()) + " tagged " + quoteForMessage(node.Tag()) +
               " (write it without a tag)";
  }
  return message;
}

bool isOneOf(std::string_view text, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words) {
    if (text == w) {
      return true;
    }
  }
  return false;
}

}  // namespace

ConfigError makeConfigError(const std::string& file, const YAML::Mark& mark, std::string_view path,
                            std::string_view message) {
  ConfigError error;
  error.file = file;
  if (!mark.is_null() && mark.line >= 0 && mark.column >= 0) {
    error.line = mark.line + 1;
    error.column = mark.column + 1;
  }
  if (!path.empty()) {
    error.message = std::string(path) + ": ";
  }
  error.message += message;
  return error;
}

YamlWalker::YamlWalker(std::string file, std::vector<ConfigError>* errors)
    : file_(std::move(file)), errors_(errors) {}

void YamlWalker::error(const YAML::Mark& mark, std::string_view message) {
  errors_->push_back(makeConfigError(file_, mark, path_, message));
}

YamlWalker::Scope::Scope(YamlWalker& walker, std::string_view key)
    : walker_(walker), restore_(walker.path_.size()) {
  if (!walker_.path_.empty()) {
    walker_.path_ += '.';
  }
  walker_.path_ += key;
}

YamlWalker::Scope::Scope(YamlWalker& walker, std::size_t index)
    : walker_(walker), restore_(walker.path_.size()) {
  walker_.path_ += '[';
  walker_.path_ += std::to_string(index);
  walker_.path_ += ']';
}

YamlWalker::Scope::~Scope() { walker_.path_.resize(restore_); }

std::string describeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return quoteForMessage(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "null";
}

MapReader::MapReader(YamlWalker& walker, const YamlValue& map,
                     std::vector<std::string_view> allowed)
    : walker_(walker), map_(map), is_map_(map.node.IsMap()) {
  if (!is_map_) {
    walker_.error(map.mark, expected("a map", map.node));
    return;
  }
  for (auto it = map.node.begin(); it != map.node.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    if (!key.IsScalar()) {
      walker_.error(key.Mark(), "map keys must be strings, got " + describeNode(key));
      continue;
    }
    const std::string& name = key.Scalar();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string message = "unknown key " + quoteForMessage(name) + " (expected one of: ";
      for (std::size_t i = 0; i < allowed.size(); ++i) {
        message += (i == 0 ? "" : ", ");
        message += allowed[i];
      }
      message += ")";
      walker_.error(key.Mark(), message);
      continue;
    }
    if (const MapEntry* earlier = find(name)) {
      walker_.error(key.Mark(), "duplicate key " + quoteForMessage(name) + " (first at line " +
                                    std::to_string(earlier->key_mark.line + 1) + ")");
      continue;
    }
    // An implicit null (`key:` then a new line) is marked at the next token; the key is
    // where the reader will look.
    YAML::Mark value_mark = value.Mark();
    if (value.IsNull() && (value_mark.is_null() || value_mark.line != key.Mark().line)) {
      value_mark = key.Mark();
    }
    index_.emplace(name, entries_.size());
    entries_.push_back(MapEntry{name, key.Mark(), YamlValue{value, value_mark}});
  }
}

const MapEntry* MapReader::find(std::string_view key) const {
  const auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const MapEntry* MapReader::require(std::string_view key) const {
  const MapEntry* entry = find(key);
  if (entry == nullptr && is_map_) {
    walker_.error(map_.mark, "missing required key " + quoteForMessage(key));
  }
  return entry;
}

std::optional<std::string> readString(YamlWalker& walker, const YamlValue& value) {
  if (!value.node.IsScalar()) {
    walker.error(value.mark, expected("a string", value.node));
    return std::nullopt;
  }
  return value.node.Scalar();
}

std::optional<std::uint64_t> readInteger(YamlWalker& walker, const YamlValue& value) {
  if (!value.node.IsScalar()) {
    walker.error(value.mark, expected("a number", value.node));
    return std::nullopt;
  }
  if (value.node.Tag() != kPlainTag) {
    walker.error(value.mark, notPlain("a number", value.node));
    return std::nullopt;
  }
  auto parsed = parseDecimal(value.node.Scalar());
  if (!parsed) {
    walker.error(value.mark, parsed.error());
    return std::nullopt;
  }
  return parsed.value();
}

std::optional<bool> readBool(YamlWalker& walker, const YamlValue& value) {
  if (!value.node.IsScalar()) {
    walker.error(value.mark, expected("true or false", value.node));
    return std::nullopt;
  }
  if (value.node.Tag() != kPlainTag) {
    walker.error(value.mark, notPlain("true or false", value.node));
    return std::nullopt;
  }
  const std::string& text = value.node.Scalar();
  if (text == "true" || text == "false") {
    return text == "true";
  }
  // YAML 1.1 reads all of these as booleans, YAML 1.2 none of them; say which we mean.
  if (isOneOf(text, {"yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
                     "y", "Y", "n", "N"})) {
    walker.error(value.mark, "yes/no/on/off are not booleans here; write true or false");
    return std::nullopt;
  }
  if (isOneOf(text, {"True", "TRUE", "False", "FALSE"})) {
    walker.error(value.mark, quoteForMessage(text) + ": write true or false in lower case");
    return std::nullopt;
  }
  walker.error(value.mark, expected("true or false", value.node));
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> readDuration(YamlWalker& walker, const YamlValue& value) {
  if (!value.node.IsScalar()) {
    walker.error(value.mark, expected("a duration", value.node));
    return std::nullopt;
  }
  auto parsed = parseDuration(value.node.Scalar());
  if (!parsed) {
    walker.error(value.mark, parsed.error());
    return std::nullopt;
  }
  return parsed.value();
}

std::optional<std::uint64_t> readSize(YamlWalker& walker, const YamlValue& value) {
  if (!value.node.IsScalar()) {
    walker.error(value.mark, expected("a size", value.node));
    return std::nullopt;
  }
  auto parsed = parseSize(value.node.Scalar());
  if (!parsed) {
    walker.error(value.mark, parsed.error());
    return std::nullopt;
  }
  return parsed.value();
}

bool checkSequence(YamlWalker& walker, const YamlValue& value) {
  if (value.node.IsSequence()) {
    return true;
  }
  std::string message = expected("a list", value.node);
  if (value.node.IsScalar() &&
      quoteForMessage(value.node.Scalar()) == "'" + value.node.Scalar() + "'") {
    message += " (write [" + value.node.Scalar() + "] for a list of one)";
  }
  walker.error(value.mark, message);
  return false;
}

}  // namespace sluice::policy
