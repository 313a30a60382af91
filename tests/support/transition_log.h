#pragma once
// Which state transitions the sessions of one test binary went through, read from their debug
// lines ("[C42] Resolving -> Connecting"), and listed on stderr when the binary exits: what a
// reader (or the author of a new state table) needs to see which edges the tests exercise.
//
// installTransitionLog() makes spdlog's default logger keep debug lines for this log only; with
// SLUICE_TEST_LOG=debug (or another level) they are printed as well. Idempotent.

#include <cstddef>
#include <map>
#include <string>
#include <utility>

namespace sluice::test_support {

void installTransitionLog();

// The transitions seen so far, (from, to) -> how many times.
std::map<std::pair<std::string, std::string>, std::size_t> transitionsSeen();

}  // namespace sluice::test_support
