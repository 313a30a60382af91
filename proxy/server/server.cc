#include "proxy/server/server.h"

#include <spdlog/spdlog.h>
#include <uv.h>

#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>

#include "base/version.h"
#include "proxy/admin/admin_server.h"
#include "proxy/config/config_watch.h"
#include "proxy/dns/sandbox_resolver.h"
#include "proxy/io/loop_handles.h"
#include "proxy/io/timer.h"
#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/server/worker.h"

namespace sluice::proxy {

namespace {

// Memory that idle connections give back must leave the process, or RSS stays at the peak of
// the busiest second (floods included). Two glibc knobs:
// - allocations from this size up get their own mapping, returned at free(): the TLS record
//   buffers (about 17 KiB each, two per TLS connection, taken at the handshake and given back
//   when the connection idles) otherwise leave 17 KiB holes between the objects of
//   longer-lived connections;
// - every few seconds, if connections ended or idled meanwhile, malloc_trim() hands the free
//   pages inside the heap back. It walks the free lists of each arena under that arena's lock:
//   about 20 ms in all with 2,000 connections held (measured), on this thread, never a
//   worker's; a worker that allocates meanwhile waits for its arena, once per period at most.
constexpr int kMmapThreshold = 16 * 1024;
constexpr std::chrono::milliseconds kTrimEvery{5000};
// How often audit files that could not be written are tried again, traffic or not: how soon a
// gateway idle since its disk filled serves its sandboxes again once the disk has room.
constexpr std::chrono::milliseconds kAuditRetryEvery{250};

// What a config needs besides passing the loader, before it can be served.
Result<Ok, std::string> checkServable(const policy::Config& config) {
  for (const policy::Sandbox& sandbox : config.sandboxes) {
    if (sandbox.dns_listen && sandbox.dns_listen->isWildcard()) {
      // Its address is the answer the sandbox gets for every allowed name.
      return Err{"sandbox '" + sandbox.name + "': dns_listen " + sandbox.dns_listen->toString() +
                 " must be the sandbox-facing address, not a wildcard"};
    }
  }
  return Ok{};
}

// The listening sockets `config` needs. A socket of `previous` at the same address, for the
// same kind of listener, is kept (for another sandbox: the same socket under a second fd, so
// connections queued on it are not lost); the rest are bound now. Nothing of `previous` is
// closed here: a reload that fails later leaves the running listeners as they were.
Result<ListenSet, std::string> bindListeners(const policy::Config& config,
                                             const ListenSet& previous) {
  ListenSet sockets;
  for (const policy::Sandbox& sandbox : config.sandboxes) {
    for (bool transparent : {false, true}) {
      const auto& endpoint = transparent ? sandbox.transparent : sandbox.listen;
      if (!endpoint) {
        continue;
      }
      auto same = std::find_if(previous.begin(), previous.end(), [&](const auto& s) {
        return s->transparent == transparent && s->socket.endpoint() == *endpoint;
      });
      if (same != previous.end() && (*same)->sandbox == sandbox.name) {
        sockets.push_back(*same);
        continue;
      }
      auto socket = same != previous.end() ? (*same)->socket.duplicate()
                                           : net::BoundSocket::bind(*endpoint, 1024);
      if (!socket) {
        return Err{"sandbox '" + sandbox.name + (transparent ? "' transparent " : "' listen ") +
                   socket.error()};
      }
      sockets.push_back(std::make_shared<const ListenSocket>(
          ListenSocket{std::move(socket).value(), sandbox.name, transparent}));
    }
  }
  return sockets;
}

// The sandbox resolvers a reload adds (a dns_listen no sandbox of the running generation has
// at that address) must be able to bind: they start on worker 0 once the reload is in force,
// too late to refuse it.
Result<Ok, std::string> probeNewResolvers(const policy::Config& config, const Generation* running) {
  for (const policy::Sandbox& sandbox : config.sandboxes) {
    if (!sandbox.dns_listen) {
      continue;
    }
    const SandboxView* before = running != nullptr ? running->find(sandbox.name) : nullptr;
    if (before != nullptr && before->sandbox->dns_listen == sandbox.dns_listen) {
      continue;  // kept running
    }
    if (auto probed = dns::SandboxResolver::probe(*sandbox.dns_listen); !probed) {
      return Err{"sandbox '" + sandbox.name + "' dns_listen " + probed.error()};
    }
  }
  return Ok{};
}

std::vector<std::string> sandboxNames(const Generation* generation) {
  std::vector<std::string> names;
  if (generation != nullptr) {
    for (const SandboxView& view : generation->sandboxes) {
      names.push_back(view.sandbox->name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

// The main thread's loop: signals, reloads, the admin endpoint, the drain, and trimming the
// heap. The signal handles stay open until the workers are gone and the signals blocked:
// closing the last handle of a signal restores its default action, and a SIGTERM arriving
// after that (a supervisor repeating itself) would kill the process with 143 instead of the
// clean 0. They are unref'd, so they do not keep the loop alive; `alive` does, until the
// shutdown.
struct Server::MainLoop {
  Server* server = nullptr;
  uv_loop_t loop{};
  std::vector<std::unique_ptr<io::Signal>> signals;  // SIGTERM, SIGINT, SIGHUP
  std::optional<io::Async> alive;
  std::optional<io::Timer> poll;
  std::optional<io::Timer> grace;
  std::optional<io::Timer> trim;
  std::optional<io::Timer> audit_retry;
  std::unique_ptr<ConfigWatch> watch;
  bool draining = false;
  bool shut_down = false;

  admin::AdminServer::Handlers adminHandlers() {
    return admin::AdminServer::Handlers{[this] { return server->renderMetrics(); },
                                        [this] { return server->healthProblems(draining); }};
  }

  std::size_t sessions() const {
    std::size_t n = 0;
    for (const auto& w : server->workers_) {
      n += w->sessions();
    }
    return n;
  }

  void shutdownWorkers() {
    if (shut_down) {
      return;
    }
    shut_down = true;
    for (auto& w : server->workers_) {
      w->shutdown();
    }
    alive->close(nullptr);
    for (auto* timer : {&poll, &grace, &trim, &audit_retry}) {
      (*timer)->close(nullptr);
    }
    if (server->admin_ != nullptr) {
      server->admin_->close(nullptr);
    }
  }

  void startDrain(int signum) {
    if (draining) {
      spdlog::warn("sluice: second signal {}: closing every connection now", signum);
      shutdownWorkers();
      return;
    }
    draining = true;
    const auto grace_period = server->generation_->config->limits.shutdown_grace;
    if (watch != nullptr) {
      watch->close([this] { watch.reset(); });
    }
    for (auto& w : server->workers_) {
      w->stopAccepting();
    }
    // The workers close their dup()s; closing the original too makes the kernel refuse new
    // connections at once, instead of queueing them until exit.
    server->sockets_.clear();
    // Said once it holds: from here, a connection a worker accepts is closed unread.
    spdlog::info("sluice: signal {}: no new connections; {} in flight get up to {} ms", signum,
                 sessions(), grace_period.count());
    poll->startRepeating(std::chrono::milliseconds(20), [this] { onPoll(); });
    grace->start(grace_period, [this] { onGrace(); });
  }

  void onSignal(int signum) {
    if (signum == SIGHUP) {
      if (!draining) {
        server->reload("SIGHUP");
      }
      return;
    }
    startDrain(signum);
  }
  void onPoll() {
    if (sessions() == 0) {
      shutdownWorkers();
    }
  }
  void onTrim() {
    // Audit files of removed sandboxes close once their last connection is gone.
    server->state_->audit.closeUnused();
    if (server->state_->heap_shrank.exchange(false, std::memory_order_relaxed)) {
      malloc_trim(0);
    }
  }
  void onGrace() {
    spdlog::warn("sluice: shutdown_grace over: closing {} connections", sessions());
    shutdownWorkers();
  }
};

Server::~Server() = default;

// Everything a configuration needs before it can be put in force, in the order that leaves
// nothing behind when a step fails: addresses first (listeners, new dns_listen probed, a new
// admin address), then what creates files (a new sandbox's CA, audit files). The same at start
// and at each reload; the running generation (none at start) is what is kept or reused.
Result<Server::Prepared, std::string> Server::prepare(std::shared_ptr<const policy::Config> config,
                                                      SecretValues secrets,
                                                      std::vector<std::string>* notices) {
  const policy::Config& c = *config;
  if (auto servable = checkServable(c); !servable) {
    return Err{servable.error()};
  }
  Prepared prepared;
  auto sockets = bindListeners(c, sockets_);
  if (!sockets) {
    return Err{sockets.error()};
  }
  prepared.sockets = std::move(sockets).value();
  if (auto probed = probeNewResolvers(c, generation_.get()); !probed) {
    return Err{probed.error()};
  }
  const std::optional<policy::Endpoint> admin_before =
      generation_ != nullptr ? generation_->config->admin.listen : std::nullopt;
  if (c.admin.listen && c.admin.listen != admin_before) {
    // Bound before the old one closes: a reload that moves the admin address to one in use
    // fails whole. (Moving it back and forth to the same address is not supported.)
    auto admin = admin::AdminServer::bind(*c.admin.listen);
    if (!admin) {
      return Err{admin.error()};
    }
    prepared.admin = std::move(admin).value();
  }
  auto generation = buildGeneration(std::move(config), std::move(secrets), generation_.get(),
                                    state_->audit, notices);
  if (!generation) {
    return Err{generation.error()};
  }
  prepared.generation = std::move(generation).value();
  return prepared;
}

Result<std::unique_ptr<Server>, std::string> Server::create(
    std::shared_ptr<const policy::Config> config, SecretValues secrets, ConfigSource source,
    unsigned workers, std::vector<std::string>* notices) {
  std::unique_ptr<Server> server(new Server());
  server->source_ = std::move(source);
  server->state_ = std::make_unique<GatewayState>();
  server->state_->sandbox_tls = tls::makeServerContext();
  if (!server->state_->sandbox_tls) {
    return Err{std::string("cannot create the sandbox-facing TLS context")};
  }
  auto prepared = server->prepare(std::move(config), std::move(secrets), notices);
  if (!prepared) {
    return Err{prepared.error()};
  }
  server->generation_ = std::move(prepared->generation);
  server->state_->generation.publish(server->generation_);
  server->sockets_ = std::move(prepared->sockets);
  server->admin_ = std::move(prepared->admin);
  for (unsigned i = 0; i < std::max(1u, workers); ++i) {
    server->workers_.push_back(std::make_unique<Worker>(*server->state_, static_cast<int>(i)));
  }
  std::vector<Worker*> peers;
  for (auto& worker : server->workers_) {
    peers.push_back(worker.get());
  }
  for (auto& worker : server->workers_) {
    worker->setPeers(peers);
  }
  return server;
}

void Server::reload(std::string_view why) {
  spdlog::info("sluice: {}: reloading {}", why,
               source_.file.empty() ? std::string("the built-in configuration") : source_.file);
  auto fail = [&](const std::string& message) {
    spdlog::error("sluice: reload refused, the running configuration stays in force: {}", message);
    state_->metrics.countReload(false);
  };
  ConfigFingerprint as_read;
  auto config = source_.load(&as_read);
  if (!config) {
    for (const policy::ConfigError& e : config.error()) {
      spdlog::error("sluice: reload: {}", e.toString());
    }
    fail(std::to_string(config.error().size()) + " error(s) in the configuration");
    return;
  }
  auto secrets = SecretValues::load(*config.value());
  if (!secrets) {
    return fail(secrets.error());
  }
  std::vector<std::string> notices;
  auto prepared = prepare(config.value(), std::move(secrets).value(), &notices);
  if (!prepared) {
    return fail(prepared.error());
  }
  const policy::Config& c = *config.value();
  std::unique_ptr<admin::AdminServer> moved_admin = std::move(prepared->admin);
  if (moved_admin != nullptr) {
    if (auto started = moved_admin->start(&main_->loop, main_->adminHandlers()); !started) {
      admin::AdminServer* unused = moved_admin.release();
      unused->close([unused] { delete unused; });
      return fail(started.error());
    }
  }
  const std::optional<policy::Endpoint> admin_before = generation_->config->admin.listen;

  // Everything is ready: from here on the reload cannot fail.
  std::vector<std::string> before = sandboxNames(generation_.get());
  generation_ = std::move(prepared->generation);
  sockets_ = std::move(prepared->sockets);
  // From here every new request, on every worker, is judged by the new generation; the
  // workers' loops then open and close listeners to match.
  state_->generation.publish(generation_);
  for (auto& worker : workers_) {
    worker->adopt(generation_, sockets_);
  }
  if (c.admin.listen != admin_before) {
    if (admin_ != nullptr) {
      admin::AdminServer* old = admin_.release();
      old->close([old] { delete old; });
    }
    admin_ = std::move(moved_admin);
  }
  if (main_->watch != nullptr) {
    main_->watch->loaded(c.sandboxes_dir, std::move(as_read));
  }
  state_->metrics.countReload(true);
  for (const std::string& notice : notices) {
    spdlog::info("sluice: {}", notice);
  }
  std::vector<std::string> after = sandboxNames(generation_.get());
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(removed));
  spdlog::info(
      "sluice: reloaded: configuration {} in force, {} sandboxes (added: {}; removed: "
      "{})",
      generation_->number, after.size(), joined(added), joined(removed));
  // Where each new sandbox listens and which CA its clients must trust, as `run` prints at start.
  for (const std::string& name : added) {
    const policy::Sandbox& sandbox = *generation_->find(name)->sandbox;
    for (const auto& [what, endpoint] : {std::pair{"explicit proxy", sandbox.listen},
                                         std::pair{"transparent", sandbox.transparent},
                                         std::pair{"resolver", sandbox.dns_listen}}) {
      if (endpoint) {
        spdlog::info("sluice: sandbox '{}': {} on {}", name, what, endpoint->toString());
      }
    }
    spdlog::info("sluice: sandbox '{}': CA certificate {}/ca.pem", name, sandbox.ca_dir);
  }
}

std::string Server::renderMetrics() const {
  std::vector<admin::SandboxSample> samples;
  for (const SandboxView& view : generation_->sandboxes) {
    samples.push_back(admin::SandboxSample{view.sandbox->name, &view.runtime->metrics,
                                           view.runtime->leaves->stats().minted});
  }
  const std::vector<std::shared_ptr<audit::AuditSink>> sinks = state_->audit.sinks();
  std::vector<admin::AuditSample> audits;
  for (const auto& sink : sinks) {
    const audit::AuditSink::Status s = sink->status();
    audits.push_back(admin::AuditSample{sink->path(), s.failing, s.pending_records, s.pending_bytes,
                                        s.write_failures, s.refused_connections,
                                        s.refused_streams});
  }
  // The package firewall's advisories, per policy (docs/packages.md#advisories). The texts
  // are reserved for every policy first, so the samples' views into them stay put.
  const std::vector<std::shared_ptr<const policy::Policy>>& policies =
      generation_->config->policies;
  std::vector<std::string> fingerprints;
  fingerprints.reserve(policies.size());
  std::vector<admin::AdvisorySample> advisories;
  for (const auto& policy : policies) {
    const packages::AdvisoryIndex* index =
        generation_->advisories ? generation_->advisories->find(*policy) : nullptr;
    if (index != nullptr) {
      fingerprints.push_back(fingerprintText(*index));
      advisories.push_back(admin::AdvisorySample{policy->name, index->size(), fingerprints.back()});
    }
  }
  return admin::renderPrometheus(state_->metrics, samples, SLUICE_VERSION, audits, advisories);
}

std::string Server::healthProblems(bool draining) const {
  std::string problems;
  for (const auto& sink : state_->audit.sinks()) {
    if (std::string failure = sink->describeFailure(); !failure.empty()) {
      problems += failure + '\n';
    }
  }
  if (draining) {
    problems += "draining\n";
  }
  return problems;
}

int Server::run() {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that closes mid-write is an error value, not a death
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  // Workers start with SIGTERM, SIGINT and SIGHUP blocked (a thread inherits its creator's
  // mask), so these signals only ever reach the main thread and its loop. The main thread
  // unblocks them only once its handlers are installed: one sent meanwhile (a supervisor that
  // saw the signal blocked and took that for handled) waits, pending, instead of killing the
  // process by its default action.
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGHUP);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &handled, &previous);
  for (auto& worker : workers_) {
    auto started = worker->start(generation_, sockets_);
    if (!started) {
      spdlog::error("sluice: {}", started.error());
      for (auto& w : workers_) {
        w->shutdown();
        w->join();
      }
      return 1;
    }
  }

  MainLoop main;
  main.server = this;
  main_ = &main;
  uv_loop_init(&main.loop);
  for (int signum : {SIGTERM, SIGINT, SIGHUP}) {
    main.signals.push_back(std::make_unique<io::Signal>(
        &main.loop, signum, [&main](int arrived) { main.onSignal(arrived); }));
    main.signals.back()->unref();
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  main.alive.emplace(&main.loop, nullptr);
  main.poll.emplace(&main.loop);
  main.grace.emplace(&main.loop);
  main.trim.emplace(&main.loop);
  main.trim->startRepeating(kTrimEvery, [&main] { main.onTrim(); });
  main.trim->unref();
  main.audit_retry.emplace(&main.loop);
  main.audit_retry->startRepeating(kAuditRetryEvery,
                                   [&main] { main.server->state_->audit.retry(); });
  main.audit_retry->unref();
  int rc = 0;
  if (admin_ != nullptr) {
    if (auto started = admin_->start(&main.loop, main.adminHandlers()); !started) {
      spdlog::error("sluice: {}", started.error());
      rc = 1;
      main.startDrain(SIGTERM);
      main.shutdownWorkers();
    }
  }
  if (rc == 0 && !source_.file.empty()) {
    main.watch = std::make_unique<ConfigWatch>(&main.loop, source_.file,
                                               [this] { reload("the configuration changed"); });
    main.watch->loaded(generation_->config->sandboxes_dir, std::move(source_.as_read));
  }

  if (rc == 0) {
    spdlog::info("sluice: ready ({} workers)", workers_.size());
  }
  uv_run(&main.loop, UV_RUN_DEFAULT);

  for (auto& worker : workers_) {
    worker->join();
  }
  // The signal handles live in `main`, on this stack, and libuv's process-wide handler
  // would reach them after we return. From here on the only thread left blocks the signals:
  // one arriving now stays pending until the process has exited with 0, so the handles can
  // be closed (which restores the default actions) and the loop freed.
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  for (auto& signal : main.signals) {
    signal->close(nullptr);
  }
  if (main.watch != nullptr) {
    main.watch->close(nullptr);
  }
  uv_run(&main.loop, UV_RUN_DEFAULT);
  uv_loop_close(&main.loop);
  main_ = nullptr;
  spdlog::info("sluice: stopped");
  return rc;
}

}  // namespace sluice::proxy
