// libFuzzer target for the configuration loader (policy/config_loader.h): YAML text -> Config
// or errors. A configuration is written by an operator, but also generated, templated and
// copied around; a loader that crashes, hangs or accepts something half-read fails open.
// Parser files: policy/config_loader.cc policy/config_loader_rules.cc
//   policy/config_loader_sandboxes.cc policy/yaml_walker.cc policy/config_scalars.cc
//
// The input is the main file; if it holds a NUL byte, what follows the first NUL is one file of
// `sandboxes_dir` (read by the loader's callback when the main file names one).
// Invariants, each a trap on violation (a hang is libFuzzer's -timeout):
//   - either a Config or at least one error, never both nor neither;
//   - every error names its file (one of the two), has a line and column from 1 that lie
//     within that file's text (the line at most one past its last; the column at most one past
//     that line's end), a non-empty message, and prints as "FILE:LINE:COL: message"; the
//     errors are in file, line, column order. The one exception: a file with no YAML document
//     in it gets "FILE: empty ...", without a position;
//   - loading is a pure function: the same text loads the same way twice (the same errors, or
//     a Config with the same sandboxes and policies);
//   - a file with a NUL byte in it is never loaded (yaml-cpp would stop reading there);
//   - a loaded Config has a sandbox, and every sandbox a listener, a policy that is one of the
//     Config's policies, a unique name and own_endpoints that hold each of its listeners; every
//     injected secret names one of the Config's secrets.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config_loader.h"

namespace {

namespace sp = sluice::policy;

constexpr const char* kMainFile = "/fuzz/sluice.yaml";
constexpr const char* kDirFile = "/fuzz/sandboxes.d/one.yaml";

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

sp::ConfigResult load(std::string_view main, std::string_view dir_file, bool* dir_read = nullptr) {
  sp::LoadOptions options;
  options.default_ca_base = "/fuzz/state";
  options.read_sandbox_dir =
      [dir_file,
       dir_read](const std::string&) -> sluice::Result<std::vector<sp::ConfigText>, std::string> {
    if (dir_read != nullptr) {
      *dir_read = true;
    }
    return std::vector<sp::ConfigText>{{kDirFile, std::string(dir_file)}};
  };
  return sp::loadConfig({kMainFile, std::string(main)}, options);
}

// Lines of `text` as 1-based line -> length; a final line without '\n' counts.
std::vector<std::size_t> lineLengths(std::string_view text) {
  std::vector<std::size_t> lengths;
  while (true) {
    const std::size_t nl = text.find('\n');
    lengths.push_back(nl == std::string_view::npos ? text.size() : nl);
    if (nl == std::string_view::npos) {
      return lengths;
    }
    text.remove_prefix(nl + 1);
  }
}

void checkError(const sp::ConfigError& e, std::string_view main, std::string_view dir_file) {
  check(e.file == kMainFile || e.file == kDirFile);
  check(!e.message.empty());
  if (e.line == 0) {
    // The one error without a position: the file holds no YAML document (empty, comments
    // only, a bare "---" or "~"), so there is nothing to point at.
    check(e.column == 0);
    check(e.message.starts_with(e.file == kMainFile ? "empty config:" : "empty sandbox file:"));
    check(e.toString() == e.file + ": " + e.message);
    return;
  }
  check(e.line >= 1 && e.column >= 1);
  const std::vector<std::size_t> lines = lineLengths(e.file == kMainFile ? main : dir_file);
  check(static_cast<std::size_t>(e.line) <= lines.size() + 1);
  if (static_cast<std::size_t>(e.line) <= lines.size()) {
    check(static_cast<std::size_t>(e.column) <= lines[static_cast<std::size_t>(e.line) - 1] + 1);
  }
  const std::string prefix =
      e.file + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": ";
  check(e.toString() == prefix + e.message);
}

bool before(const sp::ConfigError& a, const sp::ConfigError& b) {
  const int fa = a.file == kMainFile ? 0 : 1;
  const int fb = b.file == kMainFile ? 0 : 1;
  if (fa != fb) {
    return fa < fb;
  }
  return a.line != b.line ? a.line < b.line : a.column < b.column;
}

void checkConfig(const sp::Config& c) {
  check(!c.sandboxes.empty());
  for (const sp::Sandbox& s : c.sandboxes) {
    check(!s.name.empty());
    check(c.findSandbox(s.name) == &s);
    check(s.listen || s.transparent);
    check(s.policy != nullptr);
    check(std::any_of(c.policies.begin(), c.policies.end(),
                      [&](const auto& p) { return p == s.policy; }));
    check(s.own_endpoints != nullptr);
    for (const auto& endpoint : {s.listen, s.transparent, s.dns_listen}) {
      if (endpoint) {
        check(std::find(s.own_endpoints->begin(), s.own_endpoints->end(), *endpoint) !=
              s.own_endpoints->end());
      }
    }
  }
  for (const auto& policy : c.policies) {
    check(policy != nullptr && c.findPolicy(policy->name) == policy.get());
    for (const sp::Rule& rule : policy->rules) {
      check(!rule.name.empty() && !rule.hosts.empty());
      for (const sp::SecretInjection& injection : rule.inject) {
        check(c.findSecret(injection.secret) != nullptr);
      }
    }
  }
}

std::string summary(const sp::ConfigResult& r) {
  std::string s;
  if (!r.ok()) {
    for (const sp::ConfigError& e : r.error()) {
      s.append(e.toString()).append("\n");
    }
    return s;
  }
  for (const sp::Sandbox& sandbox : (*r)->sandboxes) {
    s.append(sandbox.name).append(" ").append(sandbox.policy->name).append(" ");
    s.append(sandbox.listen ? sandbox.listen->toString() : "-").append("\n");
  }
  for (const auto& policy : (*r)->policies) {
    s.append(policy->name).append(" ").append(std::to_string(policy->rules.size())).append("\n");
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view main = input.substr(0, nul);
  const std::string_view dir_file =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);

  bool dir_read = false;
  const sp::ConfigResult result = load(main, dir_file, &dir_read);
  if (result.ok()) {
    check(*result != nullptr);
    // yaml-cpp stops at a NUL: a file holding one is refused, never loaded in part.
    check(!dir_read || dir_file.find('\0') == std::string_view::npos);
    checkConfig(**result);
  } else {
    const std::vector<sp::ConfigError>& errors = result.error();
    check(!errors.empty());
    for (std::size_t i = 0; i < errors.size(); ++i) {
      checkError(errors[i], main, dir_file);
      check(i == 0 || !before(errors[i], errors[i - 1]));
    }
  }
  check(summary(load(main, dir_file)) == summary(result));
  return 0;
}
