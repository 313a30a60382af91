// libFuzzer target for the audit chain verifier (`sluice audit verify` reads files anyone with
// write access to the log may have shaped). The input is a log: split at '\n' like the
// command does, the last piece incomplete when the input does not end in '\n'.
// Invariants, each a trap on violation:
//   - the verifier never reads outside a line and never accepts after rejecting;
//   - records() + 1 == badLine() once it rejects, and records() counts the lines fed when it
//     accepts all;
//   - a log it accepts, with its first line's chain value changed, is rejected at line 1.
//
// Parser files: proxy/audit/chain_verify.cc

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/audit/chain_verify.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view log(reinterpret_cast<const char*>(data), size);
  sluice::proxy::audit::ChainVerifier verifier;
  std::uint64_t lines = 0;
  std::string_view first;
  bool accepted = true;
  while (!log.empty()) {
    std::size_t end = log.find('\n');
    bool complete = end != std::string_view::npos;
    std::string_view line = log.substr(0, complete ? end : log.size());
    log.remove_prefix(complete ? end + 1 : log.size());
    if (lines == 0) {
      first = line;
    }
    ++lines;
    if (!verifier.feed(line, complete)) {
      accepted = false;
      break;
    }
  }
  if (accepted) {
    if (!verifier.ok() || verifier.records() != lines || verifier.badLine() != 0) {
      __builtin_trap();
    }
    if (lines > 0 && first.size() > 3) {
      std::string edited(first);
      edited[edited.size() - 3] = edited[edited.size() - 3] == '0' ? '1' : '0';
      sluice::proxy::audit::ChainVerifier again;
      if (again.feed(edited)) {
        __builtin_trap();
      }
    }
  } else {
    if (verifier.ok() || verifier.badLine() != verifier.records() + 1 ||
        verifier.feed("{}", true)) {
      __builtin_trap();
    }
  }
  return 0;
}
