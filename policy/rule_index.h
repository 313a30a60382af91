#pragma once
// An index from host to the rules whose `hosts` match it, built once per policy so a decision
// costs a few hash lookups rather than a scan of every pattern. Exact names and IP literals are
// looked up directly; wildcards by each proper suffix of the host ("a.b.example.com" looks up
// "b.example.com", "example.com", "com").

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/string_map.h"
#include "policy/host_name.h"

namespace sluice::policy {

struct Rule;

class RuleIndex {
 public:
  void build(const std::vector<Rule>& rules);

  // Appends to `out` the indexes of the rules whose hosts match `host`, ascending, each once.
  // Returns the number written; stops at `capacity` and returns capacity + 1 if more matched.
  std::size_t matching(const CanonicalHost& host, std::uint32_t* out, std::size_t capacity) const;

 private:
  using Map = StringMap<std::vector<std::uint32_t>>;
  Map exact_;      // canonical name or address text -> rules
  Map wildcard_;   // wildcard base -> rules
};

}  // namespace sluice::policy
