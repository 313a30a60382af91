// sluice env -c FILE --sandbox NAME: the shell lines a sandbox needs to use sluice
// (docs/cli.md#sluice-env): the proxy variables (both spellings: curl reads only the lower-case
// http_proxy, Go and Python read either), NO_PROXY for the sandbox's own loopback, and the sandbox
// CA's path in every variable common clients read, so `eval "$(sluice env ...)"` is the whole
// set-up. A transparent-only sandbox gets the CA lines alone: it needs no proxy.

#include <cstdio>
#include <string>

#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"
#include "proxy/cli/shown_path.h"
#include "proxy/config/config_files.h"

namespace sluice::cli {

namespace {

constexpr std::string_view kUsageLine = "usage: sluice env -c FILE --sandbox NAME\n";

// Variables that name a CA bundle file (docs/cli.md#sluice-env says whose each is). npm needs its
// own: Debian's npm ships a global npmrc with `cafile=` the system bundle, which replaces Node's
// trust list and so NODE_EXTRA_CA_CERTS; npm_config_cafile is read before that file.
constexpr std::string_view kCaVariables[] = {"SSL_CERT_FILE",
                                             "REQUESTS_CA_BUNDLE",
                                             "PIP_CERT",
                                             "CURL_CA_BUNDLE",
                                             "NODE_EXTRA_CA_CERTS",
                                             "npm_config_cafile",
                                             "GIT_SSL_CAINFO",
                                             "CARGO_HTTP_CAINFO",
                                             "AWS_CA_BUNDLE",
                                             "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
                                             "DENO_CERT",
                                             "BUNDLE_SSL_CA_CERT",
                                             "HEX_CACERTS_PATH"};

// The sandbox's own loopback is not egress: local services in it are reached directly.
constexpr std::string_view kNoProxy = "localhost,127.0.0.1,::1";

// `value` as one shell word: single quotes, each ' written as '\''.
std::string shellQuote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

void exportLine(std::FILE* out, std::string_view name, std::string_view value) {
  std::string quoted = shellQuote(value);
  std::fprintf(out, "export %.*s=%s\n", static_cast<int>(name.size()), name.data(),
               quoted.c_str());
}

int badInput(Streams streams, const std::string& problem) {
  std::fprintf(streams.err, "sluice env: %s\n%.*s", problem.c_str(),
               static_cast<int>(kUsageLine.size()), kUsageLine.data());
  return kExitUsage;
}

}  // namespace

int envCommand(std::span<const std::string_view> args, Streams streams) {
  std::string error;
  auto flags = Flags::parse(args, commandFlags("env"), &error);
  if (!flags) {
    return badInput(streams, error);
  }
  if (!flags->get("config") || !flags->get("sandbox")) {
    return badInput(streams, "-c FILE and --sandbox NAME are required");
  }
  std::string path(*flags->get("config"));
  auto config = proxy::loadConfigFile(path);
  if (!config) {
    proxy::printConfigErrors(streams.err, config.error());
    return kExitUsage;
  }
  std::string_view name = *flags->get("sandbox");
  const policy::Sandbox* sandbox = nullptr;
  for (const policy::Sandbox& s : config.value()->sandboxes) {
    if (s.name == name) {
      sandbox = &s;
    }
  }
  if (sandbox == nullptr) {
    return badInput(streams, "no sandbox named '" + std::string(name) + "' in " + path);
  }
  if (sandbox->listen && sandbox->listen->isWildcard()) {
    return badInput(streams, "sandbox '" + sandbox->name + "' listens on " +
                                 sandbox->listen->toString() +
                                 " (every address): which one the sandbox reaches is not "
                                 "in the config; give `listen` that address");
  }
  // The CA as `sluice run` started from this directory finds it.
  const std::string ca_file = shownPath(sandbox->ca_dir + "/ca.pem");

  std::fprintf(streams.out, "# sluice: sandbox '%s'%s; CA certificate %s\n",
               sandbox->name.c_str(),
               sandbox->listen ? (", explicit proxy " + sandbox->listen->toString()).c_str()
                               : " (transparent: no proxy variables needed)",
               ca_file.c_str());
  if (sandbox->listen) {
    std::string url = "http://" + sandbox->listen->toString();
    for (std::string_view variable : {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}) {
      exportLine(streams.out, variable, url);
    }
    exportLine(streams.out, "NO_PROXY", kNoProxy);
    exportLine(streams.out, "no_proxy", kNoProxy);
  }
  for (std::string_view variable : kCaVariables) {
    exportLine(streams.out, variable, ca_file);
  }
  return kExitOk;
}

}  // namespace sluice::cli
