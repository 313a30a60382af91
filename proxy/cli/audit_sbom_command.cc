// sluice audit sbom FILE... [-o FILE] [--sandbox NAME]: a CycloneDX 1.5 SBOM of the package files
// the sandboxes fetched, from their audit logs (docs/cli.md#sluice-audit-sbom). It trusts the
// logs: `sluice audit verify` checks them. Exit 0, or 2 for bad arguments or a file that cannot
// be read or written.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/version.h"
#include "proxy/audit/audit_sbom.h"
#include "proxy/audit/audit_summary.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"

namespace sluice::cli {

namespace {

constexpr std::string_view kUsageLine =
    "usage: sluice audit sbom FILE... [-o FILE] [--sandbox NAME]\n";

int badInput(Streams streams, const std::string& problem) {
  std::fprintf(streams.err, "sluice audit sbom: %s\n%.*s", problem.c_str(),
               static_cast<int>(kUsageLine.size()), kUsageLine.data());
  return kExitUsage;
}

// `text` into `path` whole or not at all: a temporary file beside it, renamed over it.
bool writeWhole(const std::string& path, std::string_view text) {
  std::string temp = path + ".XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    return false;
  }
  bool ok = true;
  for (std::size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    ok = n > 0;
    done += ok ? static_cast<std::size_t>(n) : 0;
  }
  const mode_t mask = ::umask(0);  // as a file the shell writes: 0666 less the umask (mkstemp's
  ::umask(mask);                   // is 0600)
  ok = ::fchmod(fd, 0666 & ~mask) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (ok && ::rename(temp.c_str(), path.c_str()) == 0) {
    return true;
  }
  const int saved = errno;
  ::unlink(temp.c_str());
  errno = saved;
  return false;
}

}  // namespace

int auditSbomCommand(std::span<const std::string_view> args, Streams streams) {
  const std::span<const FlagSpec> specs = commandFlags("audit sbom");
  std::vector<std::string> files;
  std::string error;
  auto flags = parseFlagsAmongFiles(args, specs, files, &error);
  if (!flags) {
    return badInput(streams, error);
  }
  if (files.empty()) {
    return badInput(streams, "no audit file given");
  }
  proxy::audit::Sbom sbom(std::string(flags->get("sandbox").value_or("")));
  for (const std::string& path : files) {
    if (!forEachLogLine(path, "sbom", streams, [&](std::string_view line) { sbom.add(line); })) {
      return kExitUsage;
    }
  }
  proxy::audit::SbomMeta meta;
  std::random_device random;  // getrandom(2): the serial number only has to be unique
  unsigned char bytes[16];
  for (unsigned char& b : bytes) {
    b = static_cast<unsigned char>(random());
  }
  meta.serial = proxy::audit::uuidUrn(bytes);
  meta.timestamp = proxy::audit::canonicalTime(
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  meta.tool_version = SLUICE_VERSION;
  const std::string out = proxy::audit::sbomJson(sbom, meta);
  if (auto path = flags->get("output")) {
    if (!writeWhole(std::string(*path), out)) {
      std::fprintf(streams.err, "sluice audit sbom: %.*s: %s\n", static_cast<int>(path->size()),
                   path->data(), std::strerror(errno));
      return kExitUsage;
    }
  } else {
    std::fwrite(out.data(), 1, out.size(), streams.out);
  }
  if (sbom.skipped() != 0) {
    std::fprintf(streams.err, "sluice audit sbom: %s skipped (not records, or a package unread)\n",
                 proxy::audit::countOf(sbom.skipped(), "line").c_str());
  }
  return kExitOk;
}

}  // namespace sluice::cli
