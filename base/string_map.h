#pragma once
// A hash map keyed by std::string and looked up by std::string_view without allocating (C++20
// heterogeneous lookup): a key string is made only when an entry is added. The rule index, the
// resolver's queries and cache, the log budgets and the DNS records' table use it.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sluice {

struct StringViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringViewHash, std::equal_to<>>;

}  // namespace sluice
