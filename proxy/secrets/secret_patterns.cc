#include "proxy/secrets/secret_patterns.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <memory>
#include <utility>

namespace sluice::proxy {

namespace {

// Nodes that get a complete row of transitions: the root and its children (where a scan of
// text that is no secret spends nearly all its bytes) and nodes deeper down with this many
// children. Rows are capped so that many long secrets cost memory in proportion to their
// length, not 1 KiB per node.
constexpr std::size_t kDenseChildren = 4;
constexpr std::size_t kMaxDenseRows = 1024;

template <typename T>
void wipeVector(std::vector<T>& v) {
  if (v.capacity() > 0) {
    OPENSSL_cleanse(v.data(), v.capacity() * sizeof(T));
  }
  v.clear();
}

// The trie's edges spell the secrets' forms, and a vector that grows frees its old buffer:
// this allocator overwrites a buffer before it is freed.
template <typename T>
struct WipingAllocator {
  using value_type = T;
  WipingAllocator() = default;
  template <typename U>
  WipingAllocator(const WipingAllocator<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) { return std::allocator<T>().allocate(n); }
  void deallocate(T* p, std::size_t n) {
    OPENSSL_cleanse(p, n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  friend bool operator==(const WipingAllocator&, const WipingAllocator&) { return true; }
};

}  // namespace

// The trie as it grows, then the automaton's arrays from it.
class SecretPatterns::Builder {
 public:
  explicit Builder(SecretPatterns& out) : out_(out) { trie_.emplace_back(); }

  void add(const MaskPattern& pattern) {
    std::uint32_t at = kRoot;
    for (char ch : pattern.text) {
      const auto c = static_cast<unsigned char>(ch);
      std::uint32_t child = childOf(at, c);
      if (child == kNone) {
        child = static_cast<std::uint32_t>(trie_.size());
        trie_[at].children.emplace_back(c, child);
        trie_.emplace_back();
        trie_.back().depth = trie_[at].depth + 1;
      }
      at = child;
    }
    TrieNode& end = trie_[at];
    if (!end.terminal) {
      ++out_.pattern_count_;
    }
    end.terminal = true;
    end.before |= pattern.before;
    end.after |= pattern.after;
  }

  void finish() {
    breadthFirst();
    failureLinks();
    flatten();
    holdsAndOutputs();
    denseRows();
  }

 private:
  using Edge = std::pair<unsigned char, std::uint32_t>;
  struct TrieNode {
    std::vector<Edge, WipingAllocator<Edge>> children;
    std::uint32_t depth = 0;
    std::uint32_t fail = kRoot;
    bool terminal = false;
    ByteSet before;
    ByteSet after;
  };

  std::uint32_t childOf(std::uint32_t node, unsigned char c) const {
    for (const auto& [label, child] : trie_[node].children) {
      if (label == c) {
        return child;
      }
    }
    return kNone;
  }

  void breadthFirst() {
    order_.reserve(trie_.size());
    order_.push_back(kRoot);
    for (std::size_t i = 0; i < order_.size(); ++i) {
      for (const auto& [label, child] : trie_[order_[i]].children) {
        order_.push_back(child);
      }
    }
  }

  // A node's failure link is its longest proper suffix that is also in the trie; its parent's
  // is shorter, so breadth-first order has it ready.
  void failureLinks() {
    for (std::uint32_t node : order_) {
      for (const auto& [label, child] : trie_[node].children) {
        std::uint32_t fail = kRoot;
        if (node != kRoot) {
          for (std::uint32_t f = trie_[node].fail;; f = trie_[f].fail) {
            std::uint32_t next = childOf(f, label);
            if (next != kNone) {
              fail = next;
              break;
            }
            if (f == kRoot) {
              break;
            }
          }
        }
        trie_[child].fail = fail;
      }
    }
  }

  void flatten() {
    out_.nodes_.resize(trie_.size());
    out_.labels_.reserve(trie_.size());  // one edge into every node but the root
    out_.targets_.reserve(trie_.size());
    for (std::size_t i = 0; i < trie_.size(); ++i) {
      TrieNode& from = trie_[i];
      std::sort(from.children.begin(), from.children.end());
      Node& to = out_.nodes_[i];
      to.fail = from.fail;
      to.depth = from.depth;
      to.first_edge = static_cast<std::uint32_t>(out_.labels_.size());
      to.edge_count = static_cast<std::uint32_t>(from.children.size());
      for (const auto& [label, child] : from.children) {
        out_.labels_.push_back(label);
        out_.targets_.push_back(child);
      }
    }
  }

  // Which nodes get rows, every node's State, then the rows in breadth-first order: a missing
  // edge goes where the failure link's state goes, and every state on that chain is shallower,
  // so its row is complete already.
  void denseRows() {
    for (std::uint32_t node : order_) {
      // A node where patterns end keeps its edges: a state with a row is then a plain offset,
      // which the scan uses as it is, and the output check waits for the rare other states.
      const bool wanted =
          (trie_[node].depth <= 1 || trie_[node].children.size() >= kDenseChildren) &&
          out_.nodes_[node].output == kNone;
      if (node == kRoot || (wanted && out_.row_node_.size() < kMaxDenseRows)) {
        out_.row_node_.push_back(node);
      }
    }
    out_.code_.resize(trie_.size());
    for (std::uint32_t node = 0; node < trie_.size(); ++node) {
      out_.code_[node] = kSparse | node;
    }
    std::array<unsigned char, 257> member{};  // a byte of each class
    out_.classes_ = 1;                        // class 0: bytes no pattern holds
    std::array<bool, 256> used{};
    for (unsigned char label : out_.labels_) {
      used[label] = true;
    }
    for (unsigned c = 0; c < 256; ++c) {
      if (used[c]) {
        out_.class_of_[c] = static_cast<std::uint16_t>(out_.classes_);
        member[out_.classes_++] = static_cast<unsigned char>(c);
      } else {
        out_.class_of_[c] = 0;
        member[0] = static_cast<unsigned char>(c);
      }
    }
    for (std::size_t row = 0; row < out_.row_node_.size(); ++row) {
      out_.code_[out_.row_node_[row]] = static_cast<State>(row * out_.classes_);
    }
    for (std::uint32_t node = 0; node < trie_.size(); ++node) {
      if (out_.nodes_[node].output != kNone) {
        out_.code_[node] |= kHasOutput;
      }
    }
    out_.dense_.assign(out_.row_node_.size() * out_.classes_, out_.code_[kRoot]);
    for (std::size_t row = 0; row < out_.row_node_.size(); ++row) {
      const std::uint32_t node = out_.row_node_[row];
      State* transitions = out_.dense_.data() + row * out_.classes_;
      // Bytes of one class go to the same state from every node: no edge is labelled with
      // the bytes of class 0, and every other class is one byte.
      for (std::uint32_t k = 0; k < out_.classes_; ++k) {
        const unsigned char byte = member[k];
        const std::uint32_t child = childOf(node, byte);
        if (child != kNone) {
          transitions[k] = out_.code_[child];
        } else if (node != kRoot) {
          transitions[k] = out_.next(out_.code_[trie_[node].fail], byte);
        }
      }
    }
    OPENSSL_cleanse(member.data(), member.size());  // the bytes the secrets hold
    OPENSSL_cleanse(used.data(), used.size());
  }

  void holdsAndOutputs() {
    for (std::uint32_t node : order_) {
      const TrieNode& t = trie_[node];
      Node& n = out_.nodes_[node];
      // A later match can only start in the longest suffix that can still grow.
      n.hold = (node == kRoot || !t.children.empty()) ? t.depth : out_.nodes_[t.fail].hold;
      const std::uint32_t inherited = node == kRoot ? kNone : out_.nodes_[t.fail].output;
      if (!t.terminal) {
        n.output = inherited;
        continue;
      }
      out_.longest_match_ =
          std::max<std::size_t>(out_.longest_match_, t.depth + (t.before.empty() ? 0 : 1));
      out_.any_before_ |= t.before;
      Output output;
      output.mask_length = t.depth;  // the longest: the others end here too and are suffixes
      if (!t.before.empty()) {
        output.before_set = addSet(t.before);
      }
      ByteSet after = t.after;
      if (inherited != kNone && out_.outputs_[inherited].after_set != kNone) {
        after |= out_.sets_[out_.outputs_[inherited].after_set];
      }
      if (!after.empty()) {
        output.after_set = addSet(after);
      }
      n.output = static_cast<std::uint32_t>(out_.outputs_.size());
      out_.outputs_.push_back(output);
    }
  }

  std::uint32_t addSet(const ByteSet& set) {
    for (std::size_t i = 0; i < out_.sets_.size(); ++i) {
      if (out_.sets_[i] == set) {
        return static_cast<std::uint32_t>(i);
      }
    }
    out_.sets_.push_back(set);
    return static_cast<std::uint32_t>(out_.sets_.size() - 1);
  }

  SecretPatterns& out_;
  std::vector<TrieNode> trie_;
  std::vector<std::uint32_t> order_;
};

SecretPatterns::State SecretPatterns::sparseNext(std::uint32_t node, unsigned char c) const {
  for (;;) {
    const Node& n = nodes_[node];
    const unsigned char* labels = labels_.data() + n.first_edge;
    for (std::uint32_t i = 0; i < n.edge_count; ++i) {
      if (labels[i] == c) {
        return code_[targets_[n.first_edge + i]];
      }
    }
    const State fail = code_[n.fail];
    if ((fail & kSparse) == 0) {
      return dense_[(fail & kValue) + class_of_[c]];
    }
    node = fail & kValue;
  }
}

SecretPatterns::SecretPatterns() { matchNothing(); }

// One root whose every transition comes back to it, and no output.
void SecretPatterns::matchNothing() {
  nodes_.assign(1, Node{});
  code_.assign(1, 0);  // row 0
  row_node_.assign(1, kRoot);
  class_of_.fill(0);
  classes_ = 1;
  dense_.assign(1, 0);
}

SecretPatterns SecretPatterns::build(std::span<const std::string_view> secrets) {
  SecretPatterns patterns;
  patterns.nodes_.clear();
  patterns.code_.clear();
  patterns.row_node_.clear();
  patterns.dense_.clear();
  {
    Builder builder(patterns);
    for (std::string_view secret : secrets) {
      std::vector<MaskPattern> forms = maskPatterns(secret);
      for (MaskPattern& form : forms) {
        builder.add(form);
        OPENSSL_cleanse(form.text.data(), form.text.capacity());
      }
    }
    builder.finish();
  }
  return patterns;
}

SecretPatterns::SecretPatterns(SecretPatterns&& other) noexcept { *this = std::move(other); }

SecretPatterns& SecretPatterns::operator=(SecretPatterns&& other) noexcept {
  if (this != &other) {
    wipe();
    nodes_ = std::move(other.nodes_);
    code_ = std::move(other.code_);
    row_node_ = std::move(other.row_node_);
    labels_ = std::move(other.labels_);
    targets_ = std::move(other.targets_);
    dense_ = std::move(other.dense_);
    outputs_ = std::move(other.outputs_);
    sets_ = std::move(other.sets_);
    class_of_ = other.class_of_;
    classes_ = other.classes_;
    any_before_ = other.any_before_;
    pattern_count_ = std::exchange(other.pattern_count_, 0);
    longest_match_ = std::exchange(other.longest_match_, 0);
    other.wipe();
    other.matchNothing();
  }
  return *this;
}

SecretPatterns::~SecretPatterns() { wipe(); }

void SecretPatterns::wipe() {
  // Labels and rows spell the patterns; the links and sets say much about them.
  wipeVector(nodes_);
  wipeVector(code_);
  wipeVector(row_node_);
  wipeVector(labels_);
  wipeVector(targets_);
  wipeVector(dense_);
  wipeVector(outputs_);
  wipeVector(sets_);
  OPENSSL_cleanse(class_of_.data(), sizeof(class_of_));  // says which bytes the secrets hold
  any_before_ = ByteSet();
}

std::size_t SecretPatterns::memoryBytes() const {
  return nodes_.capacity() * sizeof(Node) + code_.capacity() * 4 + labels_.capacity() +
         targets_.capacity() * 4 + dense_.capacity() * 4 + row_node_.capacity() * 4 +
         outputs_.capacity() * sizeof(Output) + sets_.capacity() * sizeof(ByteSet);
}

}  // namespace sluice::proxy
