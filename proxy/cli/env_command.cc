// sluice env -c FILE --sandbox NAME: the shell lines a sandbox needs to use sluice
// (docs/cli.md#sluice-env): the proxy variables (both spellings: curl reads only the lower-case
// http_proxy, Go and Python read either), NO_PROXY for the sandbox's own loopback, and the sandbox
// CA's path in every variable common clients read, so `eval "$(sluice env ...)"` is the whole
// set-up; and for Java, which reads none of them, JAVA_TOOL_OPTIONS with a PKCS#12 trust store
// and the proxy. A transparent-only sandbox gets the CA lines alone: it needs no proxy.

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "certs/client_configs.h"
#include "certs/others_can_read.h"
#include "certs/shown_path.h"
#include "certs/trust_store.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"
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
// The same hosts in Java's syntax (http.nonProxyHosts, which https follows too).
constexpr std::string_view kJavaNonProxyHosts = "localhost|127.0.0.1|[::1]";

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

// Java reads none of the variables above: its trust store and its proxy are system properties,
// which JAVA_TOOL_OPTIONS hands every JVM started in the sandbox (Maven, Gradle, java itself).
// The trust store is ca.p12 beside ca.pem (certs/trust_store.h). The line appends to whatever
// JAVA_TOOL_OPTIONS the shell had (a later -D wins), so a sandbox's own options survive. The
// JVM splits the variable at white space and takes no quotes, so a path with white space cannot
// be carried: a comment then says so.
void javaLines(std::FILE* out, const policy::Sandbox& sandbox, const std::string& trust_store) {
  if (trust_store.find_first_of(" \t\n\r\f\v'\"") != std::string::npos) {
    std::fprintf(out,
                 "# JAVA_TOOL_OPTIONS: not set: the trust store's path %s has white space or a "
                 "quote, which the JVM cannot read from it\n",
                 trust_store.c_str());
    return;
  }
  std::string options =
      "-Djavax.net.ssl.trustStore=" + trust_store +
      " -Djavax.net.ssl.trustStorePassword=" + std::string(certs::kTrustStorePassword) +
      " -Djavax.net.ssl.trustStoreType=PKCS12";
  if (sandbox.listen) {
    const std::string host = sandbox.listen->ip.toString();
    const std::string port = std::to_string(sandbox.listen->port);
    for (std::string_view scheme : {"https", "http"}) {
      options += " -D" + std::string(scheme) + ".proxyHost=" + host + " -D" + std::string(scheme) +
                 ".proxyPort=" + port;
    }
    options += " -Dhttp.nonProxyHosts=" + std::string(kJavaNonProxyHosts);
  }
  std::fprintf(out, "export JAVA_TOOL_OPTIONS=\"${JAVA_TOOL_OPTIONS:+$JAVA_TOOL_OPTIONS }\"%s\n",
               shellQuote(options).c_str());
}

// Clients no variable reaches (docs/cli.md#clients-the-variables-do-not-reach): the line says
// what each needs instead, with the path filled in.
void unreachedClientLines(std::FILE* out, const std::string& ca_file) {
  const std::string quoted = shellQuote(ca_file);
  std::fprintf(out,
               "# sluice: clients these variables do not reach: Chromium and Firefox (an NSS "
               "database) certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n sluice -i %s; apt run "
               "through sudo, which drops APT_CONFIG: -o Acquire::https::CaInfo=%s\n",
               quoted.c_str(), quoted.c_str());
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
  const std::string ca_file = certs::shownPath(sandbox->ca_dir + "/ca.pem");

  std::fprintf(streams.out, "# sluice: sandbox '%s'%s; CA certificate %s\n",
               sandbox->name.c_str(),
               sandbox->listen ? (", explicit proxy " + sandbox->listen->toString()).c_str()
                               : " (transparent: no proxy variables needed)",
               ca_file.c_str());
  std::error_code no_file;
  std::optional<std::string> why;
  if (std::filesystem::exists(ca_file, no_file)) {  // (else `sluice run` makes it, readable)
    why = certs::whyOthersCannotRead(ca_file);
  }
  if (why) {
    std::fprintf(streams.out,
                 "# sluice: other users cannot open it (%s): a client that runs as another user "
                 "(apt's https method runs as _apt) cannot trust sluice\n",
                 why->c_str());
  }
  if (sandbox->listen) {
    std::string url = "http://" + sandbox->listen->toString();
    for (std::string_view variable : {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}) {
      exportLine(streams.out, variable, url);
    }
    exportLine(streams.out, "NO_PROXY", kNoProxy);
    exportLine(streams.out, "no_proxy", kNoProxy);
    // Node's own fetch, https and WebSocket read the proxy variables only when told to (newer
    // Node; an older one ignores it). npm and its agents read them anyway.
    exportLine(streams.out, "NODE_USE_ENV_PROXY", "1");
  }
  for (std::string_view variable : kCaVariables) {
    exportLine(streams.out, variable, ca_file);
  }
  // GnuTLS wget and apt's https method read a file, not a variable: sluice writes theirs beside
  // ca.pem (certs/client_configs.h), and these variables name them.
  exportLine(streams.out, "WGETRC",
             certs::shownPath(sandbox->ca_dir + "/" + std::string(certs::kWgetrcFile)));
  exportLine(streams.out, "APT_CONFIG",
             certs::shownPath(sandbox->ca_dir + "/" + std::string(certs::kAptConfFile)));
  javaLines(streams.out, *sandbox,
            certs::shownPath(sandbox->ca_dir + "/" + std::string(certs::kTrustStoreFile)));
  unreachedClientLines(streams.out, ca_file);
  return kExitOk;
}

}  // namespace sluice::cli
