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

}  // namespace sluice::test_support
