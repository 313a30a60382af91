#pragma once
// `sluice run`: builds the gateway state, binds every listener, runs one Worker per core, and
// on the main thread handles signals (docs/cli.md#signals), reloads and the admin endpoint:
// - SIGHUP, or a change of the config file or of sandboxes_dir: reload. Everything is read,
//   validated and built first (config, secrets, CAs of new sandboxes, audit files, new
//   listening sockets, a moved admin address); any failure keeps the running configuration,
//   logs each error and counts sluice_config_reloads_total{result="failed"}. Then each worker
//   takes up the new generation (proxy/runtime/generation.h).
// - SIGTERM/SIGINT: stop accepting, let requests in flight finish for up to
//   limits.shutdown_grace, then close everything, flush the audit log and return 0.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "policy/config.h"
#include "policy/config_loader.h"
#include "proxy/config/config_fingerprint.h"
#include "proxy/runtime/secret_values.h"

namespace sluice::proxy {

struct GatewayState;
struct Generation;
class Worker;
struct ListenSocket;
class ConfigWatch;
namespace admin {
class AdminServer;
}

class Server {
 public:
  // Where a reload reads the configuration again.
  struct ConfigSource {
    std::string file;  // watched for changes; empty: nothing to watch (the built-in default)
    // Reads the configuration again, recording in `as_read` the files as it read them.
    std::function<policy::ConfigResult(ConfigFingerprint* as_read)> load;
    ConfigFingerprint as_read;  // the files create()'s configuration was read from
  };

  // Everything that can fail before serving fails here, with a message naming what: a CA that
  // cannot be created or loaded, an audit file that cannot be opened, a port in use.
  static Result<std::unique_ptr<Server>, std::string> create(
      std::shared_ptr<const policy::Config> config, SecretValues secrets, ConfigSource source,
      unsigned workers, std::vector<std::string>* notices);
  ~Server();

  // Serves until SIGTERM or SIGINT; returns the process exit code.
  int run();

 private:
  struct MainLoop;
  // A configuration ready to be put in force (prepare()).
  struct Prepared {
    std::shared_ptr<const Generation> generation;
    std::vector<std::shared_ptr<const ListenSocket>> sockets;
    std::unique_ptr<admin::AdminServer> admin;  // bound, not started; null: address unchanged
  };
  Server() = default;

  // Binds, probes and builds what `config` needs beside the running generation (none at
  // start); fails, leaving nothing behind, with the first problem.
  Result<Prepared, std::string> prepare(std::shared_ptr<const policy::Config> config,
                                        SecretValues secrets, std::vector<std::string>* notices);
  // Reloads from source_; `why` is for the log ("SIGHUP", "the config file changed").
  void reload(std::string_view why);
  // The body of /metrics.
  std::string renderMetrics() const;
  // What /healthz reports, one line each: audit files that cannot be written, the drain.
  std::string healthProblems(bool draining) const;

  ConfigSource source_;
  std::unique_ptr<GatewayState> state_;
  std::shared_ptr<const Generation> generation_;  // the one in force (main thread)
  std::vector<std::shared_ptr<const ListenSocket>> sockets_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<admin::AdminServer> admin_;
  MainLoop* main_ = nullptr;  // while run() runs
};

}  // namespace sluice::proxy
