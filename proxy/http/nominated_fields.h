#pragma once
// The fields of one head that its Connection fields name: hop-by-hop (RFC 9110 §7.6.1), so the
// head writer drops them. Internal to proxy/http/.
//
// Cost: a sandbox chooses how many fields its head has and how many Connection tokens, so
// matching every field against every token (or every Connection value) costs their product,
// quadratic in the head's size. Here, with at most kFewTokens tokens in all (nearly every head
// that has a Connection field: "keep-alive", "close", "Upgrade"), each field name is compared
// with each token, at most kFewTokens times the field count; with more, the field names are
// sorted once and each token is looked up by binary search: time linear in the head's size times
// log2 of its field count (at most 8 with the parsers' 256-field limit). Either way no allocation
// for a head of up to kInlineFields fields.
//
// Lifetime: holds no reference to the block; build it again after the block changes.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "proxy/http/header_block.h"

namespace sluice::proxy::http::detail {

class NominatedFields {
 public:
  // The parsers' default field limit: a head with more fields than this (built by hand, or by a
  // parser given a higher limit) is handled the same way, with storage from the heap.
  static constexpr std::size_t kInlineFields = 256;
  // Up to this many Connection tokens (all fields together), each field is compared with each
  // token and nothing is sorted: sorting a response's names for its one "keep-alive" cost more
  // than the rest of writing the head.
  static constexpr std::size_t kFewTokens = 4;

  explicit NominatedFields(const HeaderBlock& headers);
  NominatedFields(const NominatedFields&) = delete;
  NominatedFields& operator=(const NominatedFields&) = delete;

  // Whether field `i` of the block is named by a token of one of its Connection fields (ASCII
  // case-insensitively, after OWS trimming). Never for a Connection field itself: those are
  // hop-by-hop by name, and leaving them out of the search keeps a head made of Connection
  // fields cheap.
  bool contains(std::size_t i) const { return any_ && marked_[group_[i]] != 0; }

  // Comparisons of names made while building (tests count them to show the cost is no worse
  // than n log n, where n is the head's size).
  std::size_t comparisons() const { return comparisons_; }

 private:
  void build(const HeaderBlock& headers);

  bool any_ = false;
  std::size_t comparisons_ = 0;
  // order_[k]: the candidate (a field not called Connection) whose name is k-th in sorted
  // order. group_[i]: the sorted position of the first candidate with field i's name, or the
  // candidate count for a Connection field. marked_[k]: a token names the group that starts at
  // k (marked_[candidate count] is never set).
  std::uint32_t* order_ = nullptr;
  std::uint32_t* group_ = nullptr;
  std::uint8_t* marked_ = nullptr;
  std::array<std::uint32_t, kInlineFields> inline_order_;
  std::array<std::uint32_t, kInlineFields> inline_group_;
  std::array<std::uint8_t, kInlineFields> inline_marked_;
  std::vector<std::uint32_t> heap_;        // only for a head of more than kInlineFields fields
  std::vector<std::uint8_t> heap_marked_;  // n + 1
};

}  // namespace sluice::proxy::http::detail
