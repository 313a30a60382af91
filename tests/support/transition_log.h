#pragma once
// Which state transitions the sessions of one test binary went through (told by the worker
// context's on_transition hook: "connector Resolving -> Connecting"), listed on stderr when the
// binary exits: what a reader (or the author of a new state table) needs to see which edges the
// tests exercise.
//
// installTransitionLog() starts the count and makes spdlog's default logger print at warn, or at
// SLUICE_TEST_LOG's level (debug shows every "[C42] connection Serving -> Lingering"). Idempotent.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::test_support {

void installTransitionLog();

// Counts one move of `machine` (the session harness's on_transition hook calls it).
void noteTransition(std::string_view machine, std::string_view from, std::string_view to);

// The transitions seen so far, (from, to) -> how many times.
std::map<std::pair<std::string, std::string>, std::size_t> transitionsSeen();

// How many transitions of any machine were seen so far: a driver that waits for a session to
// settle takes a change here for progress.
std::size_t transitionsCounted();

// How many times `machine` moved from `from` to `to` so far: a test takes it before and after
// what should make the move.
std::size_t timesSeen(std::string_view machine, std::string_view from, std::string_view to);

// One edge of a session state machine ("exchange", "SendingRequest", "Failed"), counted from
// when the watch was made: seen() once a session took it since.
class EdgeWatch {
 public:
  EdgeWatch(std::string machine, std::string from, std::string to)
      : machine_(std::move(machine)),
        from_(std::move(from)),
        to_(std::move(to)),
        before_(timesSeen(machine_, from_, to_)) {}
  bool seen() const { return timesSeen(machine_, from_, to_) > before_; }
  std::string name() const { return machine_ + " " + from_ + " -> " + to_; }

 private:
  std::string machine_;
  std::string from_;
  std::string to_;
  std::size_t before_;
};

}  // namespace sluice::test_support
