// sluice version: the version, and the versions of the libraries it runs on, which is what an
// operator needs to know when a CVE is announced for one of them.
#include <ares.h>
#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <spdlog/version.h>
#include <uv.h>

#include <cstdio>

#include "base/version.h"
#include "proxy/cli/cli.h"

namespace sluice::cli {

int versionCommand(std::span<const std::string_view> args, Streams streams) {
  if (!args.empty()) {
    std::fprintf(streams.err, "usage: sluice version\n");
    return kExitUsage;
  }
  std::fprintf(streams.out, "sluice %s\n", SLUICE_VERSION);
  std::fprintf(
      streams.out, "  %s, c-ares %s, libuv %s, llhttp %d.%d.%d, nghttp2 %s, spdlog %d.%d.%d\n",
      OpenSSL_version(OPENSSL_VERSION), ares_version(nullptr), uv_version_string(),
      LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH,
      nghttp2_version(0)->version_str, SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH);
  return kExitOk;
}

}  // namespace sluice::cli
