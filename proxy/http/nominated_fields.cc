#include "proxy/http/nominated_fields.h"

#include <algorithm>

namespace sluice::proxy::http::detail {
namespace {

// A total order of names, ASCII case-insensitive: by length first (a comparison of names of
// different lengths reads no byte), then bytewise.
int compareNames(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return a.size() < b.size() ? -1 : 1;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char x = ascii::toLower(a[i]);
    const char y = ascii::toLower(b[i]);
    if (x != y) {
      return x < y ? -1 : 1;
    }
  }
  return 0;
}

bool isConnection(std::string_view name) { return ascii::iequals(name, "Connection"); }

}  // namespace

NominatedFields::NominatedFields(const HeaderBlock& headers) {
  // The tokens of the Connection fields, while they are few: each is then compared with each
  // field name (length first), at most kFewTokens comparisons per field, and nothing is sorted.
  std::string_view tokens[kFewTokens];
  std::size_t count = 0;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (!isConnection(headers.name(i))) {
      continue;
    }
    std::string_view list = headers.value(i);
    while (true) {
      const std::size_t comma = list.find(',');
      const std::string_view token = ascii::trimOws(list.substr(0, comma));
      if (!token.empty()) {
        if (count == kFewTokens) {
          build(headers);  // many tokens (hostile or odd): sorted names, binary search
          return;
        }
        tokens[count++] = token;
      }
      if (comma == std::string_view::npos) {
        break;
      }
      list.remove_prefix(comma + 1);
    }
  }
  if (count == 0) {
    return;  // no Connection field (the common case), or only empty ones: nothing is nominated
  }
  if (headers.size() > kInlineFields) {
    build(headers);  // only the sorted path has storage from the heap
    return;
  }
  group_ = inline_group_.data();  // each field its own group
  marked_ = inline_marked_.data();
  for (std::size_t i = 0; i < headers.size(); ++i) {
    group_[i] = static_cast<std::uint32_t>(i);
    marked_[i] = 0;
    const std::string_view name = headers.name(i);
    if (isConnection(name)) {
      continue;  // hop-by-hop by name; never a candidate
    }
    for (std::size_t t = 0; t < count; ++t) {
      ++comparisons_;
      if (compareNames(name, tokens[t]) == 0) {
        marked_[i] = 1;
        break;
      }
    }
  }
  any_ = true;
}

void NominatedFields::build(const HeaderBlock& headers) {
  const std::size_t n = headers.size();
  if (n <= kInlineFields) {
    order_ = inline_order_.data();
    group_ = inline_group_.data();
    marked_ = inline_marked_.data();
  } else {
    heap_.resize(2 * n);
    heap_marked_.resize(n + 1);
    order_ = heap_.data();
    group_ = heap_.data() + n;
    marked_ = heap_marked_.data();
  }
  // The Connection fields are hop-by-hop by name: only the others are candidates, sorted by
  // name. A field that is no candidate points at the slot after the last one, never marked.
  std::size_t candidates = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!isConnection(headers.name(i))) {
      order_[candidates++] = static_cast<std::uint32_t>(i);
    }
  }
  std::sort(order_, order_ + candidates, [&](std::uint32_t a, std::uint32_t b) {
    ++comparisons_;
    return compareNames(headers.name(a), headers.name(b)) < 0;
  });
  for (std::size_t k = 0; k <= candidates && k < n; ++k) {
    marked_[k] = 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    group_[i] = static_cast<std::uint32_t>(candidates);
  }
  for (std::size_t k = 0; k < candidates; ++k) {
    const bool starts_group =
        k == 0 || compareNames(headers.name(order_[k]), headers.name(order_[k - 1])) != 0;
    group_[order_[k]] = starts_group ? static_cast<std::uint32_t>(k) : group_[order_[k - 1]];
  }

  for (std::size_t i = 0; i < n; ++i) {
    if (!isConnection(headers.name(i))) {
      continue;
    }
    std::string_view list = headers.value(i);
    while (true) {
      const std::size_t comma = list.find(',');
      const std::string_view token = ascii::trimOws(list.substr(0, comma));
      if (!token.empty()) {
        std::uint32_t* const end = order_ + candidates;
        const std::uint32_t* found =
            std::lower_bound(order_, end, token, [&](std::uint32_t field, std::string_view t) {
              ++comparisons_;
              return compareNames(headers.name(field), t) < 0;
            });
        if (found != end && compareNames(headers.name(*found), token) == 0) {
          marked_[found - order_] = 1;  // lower_bound: the first of its group
        }
      }
      if (comma == std::string_view::npos) {
        break;
      }
      list.remove_prefix(comma + 1);
    }
  }
  any_ = true;
}

}  // namespace sluice::proxy::http::detail
