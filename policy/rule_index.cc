#include "policy/rule_index.h"

#include <algorithm>

#include "policy/config.h"

namespace sluice::policy {

void RuleIndex::build(const std::vector<Rule>& rules) {
  exact_.clear();
  wildcard_.clear();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    auto index = static_cast<std::uint32_t>(i);
    for (const HostPattern& pattern : rules[i].hosts) {
      // Exact names and addresses share a map: a canonical name never looks like a canonical
      // address text (its last label is never numeric, and it has no ':').
      Map& map = pattern.kind() == HostPattern::Kind::Wildcard ? wildcard_ : exact_;
      std::vector<std::uint32_t>& list = map[pattern.base()];
      if (list.empty() || list.back() != index) {
        list.push_back(index);
      }
    }
  }
}

std::size_t RuleIndex::matching(const CanonicalHost& host, std::uint32_t* out,
                                std::size_t capacity) const {
  std::size_t n = 0;
  bool overflow = false;
  auto take = [&](const Map& map, std::string_view key) {
    auto it = map.find(key);
    if (it == map.end()) {
      return;
    }
    for (std::uint32_t index : it->second) {
      if (n == capacity) {
        overflow = true;
        return;
      }
      out[n++] = index;
    }
  };

  std::string_view name = host.text();
  take(exact_, name);
  if (!host.isIpLiteral() && !wildcard_.empty()) {
    // "*.base" matches names with at least one label before ".base": look up every proper
    // suffix that starts after a dot.
    for (std::size_t dot = name.find('.'); dot != std::string_view::npos;
         dot = name.find('.', dot + 1)) {
      take(wildcard_, name.substr(dot + 1));
    }
  }
  if (overflow) {
    return capacity + 1;
  }
  std::sort(out, out + n);
  return static_cast<std::size_t>(std::unique(out, out + n) - out);
}

}  // namespace sluice::policy
