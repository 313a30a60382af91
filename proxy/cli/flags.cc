#include "proxy/cli/flags.h"

namespace sluice::cli {

namespace {

const FlagSpec* findSpec(std::span<const FlagSpec> specs, std::string_view name, bool is_short) {
  for (const FlagSpec& s : specs) {
    if ((is_short ? s.short_name : s.name) == name && !name.empty()) {
      return &s;
    }
  }
  return nullptr;
}

}  // namespace

std::optional<Flags> Flags::parse(std::span<const std::string_view> args,
                                  std::span<const FlagSpec> specs, std::string* error) {
  Flags flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    bool is_short = false;
    std::string_view name;
    std::optional<std::string_view> inline_value;
    if (arg.starts_with("--") && arg.size() > 2) {
      name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string_view::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
    } else if (arg.starts_with("-") && arg.size() == 2) {
      name = arg.substr(1);
      is_short = true;
    } else {
      *error = "unexpected argument '" + std::string(arg) + "'";
      return std::nullopt;
    }
    const FlagSpec* spec = findSpec(specs, name, is_short);
    if (spec == nullptr) {
      *error = "unknown flag " + std::string(arg);
      return std::nullopt;
    }
    std::string key(spec->name);
    if (!spec->repeatable && flags.values_.count(key) != 0) {
      *error = "--" + key + " given more than once";
      return std::nullopt;
    }
    std::string_view value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        *error = "--" + key + " needs a value";
        return std::nullopt;
      }
    } else if (inline_value) {
      *error = "--" + key + " takes no value";
      return std::nullopt;
    }
    flags.values_[key].push_back(value);
  }
  return flags;
}

std::optional<std::string_view> Flags::get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) {
    return std::nullopt;
  }
  return it->second.front();
}

std::vector<std::string_view> Flags::all(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string_view>{} : it->second;
}

std::optional<Flags> parseFlagsAmongFiles(std::span<const std::string_view> args,
                                          std::span<const FlagSpec> specs,
                                          std::vector<std::string>& files, std::string* error) {
  std::vector<std::string_view> flag_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (!arg.starts_with("-") || arg == "-") {
      files.emplace_back(arg);
      continue;
    }
    // Flags::parse judges it; here only whether the next argument is its value.
    flag_args.push_back(arg);
    const bool is_short = !arg.starts_with("--");
    const std::string_view name = arg.substr(is_short ? 1 : 2);
    for (const FlagSpec& spec : specs) {
      if ((is_short ? spec.short_name : spec.name) == name && spec.takes_value &&
          i + 1 < args.size()) {
        flag_args.push_back(args[++i]);
      }
    }
  }
  return Flags::parse(flag_args, specs, error);
}

}  // namespace sluice::cli
