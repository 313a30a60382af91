// sluice audit verify FILE: check an audit log's hash chain (docs/cli.md#sluice-audit-verify).
// Prints "ok N records" and exits 0, or "line N: why" for the first bad line and exits 1; 2 when
// the file cannot be read or the arguments are wrong.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "proxy/audit/chain_verify.h"
#include "proxy/cli/cli.h"

namespace sluice::cli {

bool forEachLogLine(const std::string& path, std::string_view command, Streams streams,
                    const std::function<void(std::string_view line)>& take) {
  std::FILE* file = path == "-" ? stdin : std::fopen(path.c_str(), "re");
  if (file == nullptr) {
    std::fprintf(streams.err, "sluice audit %.*s: %s: %s\n", static_cast<int>(command.size()),
                 command.data(), path.c_str(), std::strerror(errno));
    return false;
  }
  char* line = nullptr;
  std::size_t capacity = 0;
  ssize_t n = 0;
  while ((n = ::getline(&line, &capacity, file)) > 0) {
    std::string_view text(line, static_cast<std::size_t>(n));
    if (text.back() == '\n') {
      text.remove_suffix(1);
    }
    take(text);
  }
  const bool read_error = std::ferror(file) != 0;
  std::free(line);
  if (file != stdin) {
    std::fclose(file);
  }
  if (read_error) {
    std::fprintf(streams.err, "sluice audit %.*s: %s: read error\n",
                 static_cast<int>(command.size()), command.data(), path.c_str());
  }
  return !read_error;
}

int auditVerifyCommand(std::span<const std::string_view> args, Streams streams) {
  if (args.size() != 1 || args.front().empty() || args.front().front() == '-') {
    std::fprintf(streams.err, "usage: sluice audit verify FILE\n");
    return kExitUsage;
  }
  std::string path(args.front());
  std::FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) {
    std::fprintf(streams.err, "sluice audit verify: %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return kExitUsage;
  }
  proxy::audit::ChainVerifier verifier;
  char* line = nullptr;
  std::size_t capacity = 0;
  ssize_t n = 0;
  while ((n = ::getline(&line, &capacity, file)) > 0) {
    std::string_view text(line, static_cast<std::size_t>(n));
    bool complete = text.back() == '\n';
    if (complete) {
      text.remove_suffix(1);
    }
    if (!verifier.feed(text, complete)) {
      break;
    }
  }
  bool read_error = std::ferror(file) != 0;
  std::free(line);
  std::fclose(file);
  if (read_error) {
    std::fprintf(streams.err, "sluice audit verify: %s: read error\n", path.c_str());
    return kExitUsage;
  }
  if (!verifier.ok()) {
    std::fprintf(streams.out, "line %llu: %s\n",
                 static_cast<unsigned long long>(verifier.badLine()), verifier.error().c_str());
    return kExitFailure;
  }
  std::fprintf(streams.out, "ok %llu records\n",
               static_cast<unsigned long long>(verifier.records()));
  return kExitOk;
}

}  // namespace sluice::cli
