#pragma once
// Runs a program to completion and captures what it printed, for tests that exercise the real
// binary. No shell in between: arguments reach the program exactly as given.

#include <string>
#include <vector>

namespace sluice::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 if it did not exit normally (killed by a signal)
  std::string out;
  std::string err;
};

ProcessResult runProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env = {});

}  // namespace sluice::testing
