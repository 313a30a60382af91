// sluice run [-c FILE]: the gateway (docs/cli.md#sluice-run). Without -c, the built-in default
// (docs/configuration.md#the-built-in-default).
// Exit 2 on a bad config (errors printed as `check` prints them), 1 when it cannot start,
// 0 after a clean shutdown. Human-facing lines go to stderr: stdout may be the audit log.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "certs/others_can_read.h"
#include "certs/shown_path.h"
#include "proxy/cli/cli.h"
#include "proxy/cli/command_help.h"
#include "proxy/cli/flags.h"
#include "proxy/config/config_files.h"
#include "proxy/server/server.h"

namespace sluice::cli {

namespace {

void setUpLogging() {
  auto logger = std::make_shared<spdlog::logger>(
      "sluice", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  spdlog::level::level_enum level = spdlog::level::info;
  if (const char* env = std::getenv("SLUICE_LOG"); env != nullptr) {
    level = spdlog::level::from_str(env);
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

// One worker per core; SLUICE_WORKERS overrides (e.g. 1 to debug).
unsigned workerCount() {
  if (const char* env = std::getenv("SLUICE_WORKERS"); env != nullptr) {
    int n = std::atoi(env);
    if (n >= 1 && n <= 256) {
      return static_cast<unsigned>(n);
    }
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

int runCommand(std::span<const std::string_view> args, Streams streams) {
  std::string error;
  auto flags = Flags::parse(args, commandFlags("run"), &error);
  if (!flags) {
    std::fprintf(streams.err, "sluice run: %s\nusage: sluice run [-c FILE]\n", error.c_str());
    return kExitUsage;
  }
  // A reload reads the same source again: the file and its sandboxes_dir, or the built-in text.
  proxy::Server::ConfigSource source;
  if (auto file = flags->get("config")) {
    source.file = std::string(*file);
    source.load = [path = source.file](proxy::ConfigFingerprint* as_read) {
      return proxy::loadConfigFile(path, as_read);
    };
  } else {
    source.load = [](proxy::ConfigFingerprint*) { return proxy::loadBuiltinConfig(); };
  }
  auto config = source.load(&source.as_read);
  if (!config) {
    proxy::printConfigErrors(streams.err, config.error());
    return kExitUsage;
  }
  setUpLogging();

  std::vector<std::string> notices;
  // Secrets are part of the configuration: one that cannot be read is a config error (exit 2),
  // named, never an empty header later.
  auto secrets = proxy::SecretValues::load(*config.value());
  if (!secrets) {
    std::fprintf(streams.err, "sluice run: %s\n", secrets.error().c_str());
    return kExitUsage;
  }
  auto server = proxy::Server::create(config.value(), std::move(secrets).value(),
                                      std::move(source), workerCount(), &notices);
  if (!server) {
    std::fprintf(streams.err, "sluice run: %s\n", server.error().c_str());
    return kExitFailure;
  }
  // Through the logger like every later line (docs/cli.md: `TIME LEVEL message`), so a log
  // reader can tell when the CA was made and which lines came before `ready`.
  for (const std::string& notice : notices) {
    spdlog::info("sluice: {}", notice);
  }
  for (const policy::Sandbox& sandbox : config.value()->sandboxes) {
    if (sandbox.transparent) {
      spdlog::info(
          "sluice: sandbox '{}': transparent listener on {} (redirect the sandbox's TCP 80/443 "
          "here; examples/sandbox-netns.sh)",
          sandbox.name, sandbox.transparent->toString());
    }
    if (sandbox.dns_listen) {
      spdlog::info("sluice: sandbox '{}': the sandbox's resolver on {}", sandbox.name,
                   sandbox.dns_listen->toString());
    }
    const std::string ca_file = certs::shownPath(sandbox.ca_dir + "/ca.pem");
    if (std::optional<std::string> why = certs::whyOthersCannotRead(ca_file)) {
      // The sandbox's clients may run as another user (docs/cli.md#sluice-env).
      spdlog::warn(
          "sluice: sandbox '{}': other users cannot open the CA certificate {} ({}): a sandbox "
          "client that runs as another user (apt's https method runs as _apt) cannot trust "
          "sluice. Let others search the directories on the way (the key stays 0600), or give "
          "the sandbox a copy of ca.pem",
          sandbox.name, ca_file, *why);
    }
    if (sandbox.listen) {
      const std::string proxy_url = "http://" + sandbox.listen->toString();
      spdlog::info("sluice: sandbox '{}': explicit proxy on {}, CA certificate {}", sandbox.name,
                   sandbox.listen->toString(), ca_file);
      spdlog::info(
          "sluice:   in the sandbox: HTTPS_PROXY={} HTTP_PROXY={} SSL_CERT_FILE={} (trust only "
          "that file: never the CA key)",
          proxy_url, proxy_url, ca_file);
    }
  }
  std::fflush(streams.err);
  return server.value()->run();
}

}  // namespace sluice::cli
