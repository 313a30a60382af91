#pragma once
// A state machine's transitions as data: the states' names and the list of moves allowed, each
// with the reason it happens. The session's machines (connection_state.h, exchange_state.h,
// connector_state.h) are each one such table; their transition() functions refuse any move the
// table does not list, and ARCHITECTURE.md draws each machine from its table
// (tests/unit/proxy/session/state_diagram_test.cc keeps the drawing and the table equal).
//
// Checking a move costs one load and a shift: each state's allowed next states are a bitmask
// computed at compile time from the list. A state listed twice as the same move, a state
// without a name, or a move from or to a state out of range do not compile.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::proxy::session {

template <typename State>
struct Transition {
  State from;
  State to;
  std::string_view why;  // one line: the event that makes this move (drawn beside the edge)
};

template <typename State, std::size_t kStates, std::size_t kEdges>
class TransitionTable {
  static_assert(kStates <= 32, "a state's next states are one 32-bit mask");

 public:
  consteval TransitionTable(std::string_view machine, std::array<std::string_view, kStates> names,
                            std::array<Transition<State>, kEdges> edges)
      : machine_(machine), names_(names), edges_(edges) {
    for (std::string_view name : names_) {
      if (name.empty()) {
        throw "every state needs a name";  // (a compile error: this runs at compile time)
      }
    }
    for (const Transition<State>& edge : edges_) {
      std::size_t from = index(edge.from);
      std::size_t to = index(edge.to);
      if (from >= kStates || to >= kStates) {
        throw "a move from or to a state the table does not name";
      }
      if (((next_[from] >> to) & 1u) != 0) {
        throw "the same move is listed twice";
      }
      next_[from] |= std::uint32_t{1} << to;
    }
  }

  constexpr bool allows(State from, State to) const {
    return index(from) < kStates && ((next_[index(from)] >> index(to)) & 1u) != 0;
  }
  constexpr std::string_view name(State s) const {
    return index(s) < kStates ? names_[index(s)] : std::string_view("?");
  }
  constexpr std::string_view machine() const { return machine_; }
  constexpr const std::array<std::string_view, kStates>& names() const { return names_; }
  constexpr const std::array<Transition<State>, kEdges>& edges() const { return edges_; }

  static constexpr std::size_t index(State s) { return static_cast<std::size_t>(s); }

 private:
  std::string_view machine_;
  std::array<std::string_view, kStates> names_;
  std::array<Transition<State>, kEdges> edges_;
  std::array<std::uint32_t, kStates> next_{};
};

template <typename State, std::size_t kStates, std::size_t kEdges>
TransitionTable(std::string_view, std::array<std::string_view, kStates>,
                std::array<Transition<State>, kEdges>) -> TransitionTable<State, kStates, kEdges>;

}  // namespace sluice::proxy::session
