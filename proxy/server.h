#pragma once
// `sluice run`: builds the gateway state, binds every listener, runs one Worker per core, and
// handles signals (SPEC §2): SIGTERM/SIGINT stop accepting, let requests in flight finish for
// up to limits.shutdown_grace, then close everything, flush the audit log and return 0.

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "policy/config.h"
#include "proxy/secret_values.h"

namespace sluice::proxy {

struct GatewayState;
class Worker;
struct ListenSocket;

class Server {
 public:
  // Everything that can fail before serving fails here, with a message naming what: a CA that
  // cannot be created or loaded, an audit file that cannot be opened, a port in use.
  static Result<std::unique_ptr<Server>, std::string> create(
      std::shared_ptr<const policy::Config> config, SecretValues secrets, unsigned workers,
      std::vector<std::string>* notices);
  ~Server();

  // Serves until SIGTERM or SIGINT; returns the process exit code.
  int run();

 private:
  Server() = default;

  std::unique_ptr<GatewayState> state_;
  std::vector<ListenSocket> sockets_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace sluice::proxy
