#pragma once
// Every form of every secret of a configuration (secret_forms.h), compiled once into one
// Aho-Corasick automaton when the secrets are read (at start and at each reload), so that
// masking a response costs one pass over it however many secrets and forms there are.
// Immutable once built: the workers' sessions share it through the Generation that owns the
// secrets, read-only.
//
// Representation: a trie of the patterns with failure links. The root, its children and any
// node with many children have a complete row of transitions, one per class of bytes (each
// byte some pattern holds is a class, all others are one), so the rows a scan spends most of
// its bytes in stay small enough for the first-level cache, at one load per byte; every other
// node has its few edges, so the memory is linear in the patterns' total length. A step follows at
// most the failure links of the depth it gained, so a scan is linear in the text. The patterns are
// secret material: every array holding their bytes is wiped when the object goes.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/secrets/secret_forms.h"

namespace sluice::proxy {

class SecretPatterns {
 public:
  // Matches nothing.
  SecretPatterns();
  // The forms of each non-empty value.
  static SecretPatterns build(std::span<const std::string_view> secrets);

  SecretPatterns(SecretPatterns&&) noexcept;
  SecretPatterns& operator=(SecretPatterns&&) noexcept;
  SecretPatterns(const SecretPatterns&) = delete;
  SecretPatterns& operator=(const SecretPatterns&) = delete;
  ~SecretPatterns();

  bool empty() const { return pattern_count_ == 0; }
  std::size_t patternCount() const { return pattern_count_; }
  // The longest pattern plus its one shared base64 character: the most a scan holds back.
  std::size_t longestMatch() const { return longest_match_; }
  // The automaton's size, for the operator's sense of what many long secrets cost.
  std::size_t memoryBytes() const;

  // --- for SecretMask ----------------------------------------------------------------------
  static constexpr std::uint32_t kNone = UINT32_MAX;
  static constexpr std::uint32_t kRoot = 0;

  // What ends at a state: the patterns that end at its node or at a node on its failure chain
  // (each a suffix of the text so far, so all inside the longest).
  struct Output {
    std::uint32_t mask_length = 0;  // the longest of them
    // The longest pattern's shared base64 character: the byte just before it is masked too if
    // it is in this set (an index in set()). A shorter pattern's lies inside the longest.
    std::uint32_t before_set = kNone;
    std::uint32_t after_set = kNone;  // the next byte is masked if it is in this set
  };

  // A state of the scan, with what the hot loop needs in the value itself: a state with a
  // complete row is its row's offset in dense_ (one load per byte, no node to look at);
  // kSparse marks a node index instead; kHasOutput a state where patterns end.
  using State = std::uint32_t;
  static constexpr State kSparse = 1u << 31;
  static constexpr State kHasOutput = 1u << 30;
  static constexpr State kValue = kHasOutput - 1;

  State start() const { return code_[kRoot]; }
  State next(State state, unsigned char c) const {
    if ((state & kSparse) == 0) {
      return dense_[state + class_of_[c]];  // a state with a row has no flag set
    }
    return sparseNext(state & kValue, c);
  }
  static bool hasOutput(State state) { return (state & kHasOutput) != 0; }
  const Output& output(State state) const { return outputs_[nodes_[nodeOf(state)].output]; }
  // How many of the last bytes scanned a later match may still start in.
  std::uint32_t hold(State state) const { return nodes_[nodeOf(state)].hold; }
  const ByteSet& set(std::uint32_t index) const { return sets_[index]; }
  // Every byte some pattern may have masked just before it.
  const ByteSet& anyBefore() const { return any_before_; }

 private:
  struct Node {
    std::uint32_t fail = kRoot;
    std::uint32_t first_edge = 0;
    std::uint32_t edge_count = 0;
    std::uint32_t depth = 0;
    std::uint32_t hold = 0;
    std::uint32_t output = kNone;  // an index in outputs_
  };
  class Builder;

  State sparseNext(std::uint32_t node, unsigned char c) const;
  std::uint32_t nodeOf(State state) const {
    return (state & kSparse) != 0 ? (state & kValue) : row_node_[(state & kValue) / classes_];
  }
  void matchNothing();
  void wipe();

  std::vector<Node> nodes_;
  std::vector<State> code_;            // each node's State
  std::vector<unsigned char> labels_;  // edges, grouped by node
  std::vector<std::uint32_t> targets_;
  std::vector<State> dense_;             // classes_ per node with a complete row
  std::vector<std::uint32_t> row_node_;  // the node of each row
  std::array<std::uint16_t, 256> class_of_{};
  std::uint32_t classes_ = 1;
  std::vector<Output> outputs_;
  std::vector<ByteSet> sets_;
  ByteSet any_before_;
  std::size_t pattern_count_ = 0;
  std::size_t longest_match_ = 0;
};

}  // namespace sluice::proxy
