#include "tests/support/session_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "policy/config_loader.h"
#include "proxy/session/client_connection.h"
#include "proxy/tls/tls_context.h"
#include "tests/support/loop_driver.h"
#include "tests/support/transition_log.h"

namespace sluice::test_support {

namespace {

// The worker's pool bounds for one worker (Worker's poolLimits).
proxy::session::UpstreamPool::Limits poolLimits(const policy::Config& config) {
  proxy::session::UpstreamPool::Limits limits;
  limits.per_key = 16;
  limits.per_sandbox = static_cast<std::size_t>(config.upstream.max_idle_per_sandbox);
  limits.total = static_cast<std::size_t>(config.upstream.max_idle);
  limits.idle = std::min(std::chrono::milliseconds(30000), config.limits.idle_timeout);
  return limits;
}

const char* handleType(uv_handle_t* handle) { return uv_handle_type_name(handle->type); }

}  // namespace

SessionBed::SessionBed() {
  // As the server does (proxy/server/server.cc): a peer that closed mid-write is an error value
  // for the session, not the death of the test binary.
  std::signal(SIGPIPE, SIG_IGN);
  // The sessions' transitions are counted (and with SLUICE_TEST_LOG=debug, their [C42] lines
  // printed).
  installTransitionLog();
  context_.on_transition = [](const proxy::session::StateChange& change) {
    noteTransition(change.machine, change.from, change.to);
  };
  EXPECT_EQ(uv_loop_init(&loop_), 0);
  // As the worker does: a finished session is freed on the loop's next turn, never inside the
  // close callback that handed it back.
  finished_sessions_.emplace(&loop_);
  // As the worker does: what the callbacks of one round wrote to the audit file goes out after
  // it (sessions also flush their own records before their answers).
  uv_check_init(&loop_, &flush_audit_);
  flush_audit_.data = this;
  uv_check_start(&flush_audit_, [](uv_check_t* check) {
    auto* bed = static_cast<SessionBed*>(check->data);
    if (bed->context_.generation != nullptr) {
      for (const auto& sink : bed->context_.generation->audit_sinks) {
        sink->flush();
      }
    }
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(&flush_audit_));

  dns_ = std::make_unique<testing::FakeDnsServer>(&loop_);
  for (const char* name : {"origin.test", "wrongname.test", "tls-stall.test", "blackhole.test"}) {
    testing::FakeDnsServer::Zone zone;
    zone.a = {"127.0.0.1"};
    dns_->set(name, zone);
  }

  auto ca = certs::CertificateAuthority::create(dir_.path() + "/origin-ca", "session test origins");
  EXPECT_TRUE(ca) << (ca ? "" : ca.error());
  origin_ca_ = std::make_unique<certs::CertificateAuthority>(std::move(ca).value());
  origin_leaves_ = std::make_unique<certs::LeafCache>(*origin_ca_);
  auto leaf = origin_leaves_->get("origin.test");
  EXPECT_TRUE(leaf) << (leaf ? "" : leaf.error());
  origin_ = std::make_unique<OriginServer>(&loop_);
  tls_origin_ = std::make_unique<OriginServer>(&loop_, leaf.value()->certificate.get(),
                                               origin_leaves_->key());
  blackhole_ = std::make_unique<Blackhole>();

  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(::listen(listener_, 64), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  listen_port_ = ntohs(address.sin_port);

  state_.sandbox_tls = proxy::tls::makeServerContext();
  audit_path_ = dir_.path() + "/audit.jsonl";
}

std::string SessionBed::yaml(const BedConfig& config) const {
  const std::string plain = std::to_string(origin_->port());
  const std::string tls = std::to_string(tls_origin_->port());
  const std::string blackhole = std::to_string(blackhole_->port());
  std::string upstream = config.upstream;
  upstream.insert(upstream.find('{') + 1, "ca_file: " + origin_ca_->certificatePath() + ", ");
  std::string dns = config.dns;
  dns.insert(dns.find('{') + 1, "servers: [\"" + dns_->address() + "\"], ");
  std::string text =
      "version: 1\n"
      "audit: {path: " +
      (config.audit_file.empty() ? audit_path_ : dir_.path() + "/" + config.audit_file) +
      "}\n"
      "dns: " +
      dns +
      "\n"
      "upstream: " +
      upstream +
      "\n"
      "limits: " +
      config.limits +
      "\n"
      "sandboxes:\n"
      "  - name: " +
      std::string(kSandbox) +
      "\n"
      "    listen: 127.0.0.1:" +
      std::to_string(listen_port_) +
      "\n"
      "    ca: " +
      dir_.path() + "/" + config.ca_dir +
      "\n"
      "    policy: p\n";
  if (!config.sandbox_limits.empty()) {
    text += "    limits: " + config.sandbox_limits + "\n";
  }
  text += config.sandbox_fields;
  text +=
      "policies:\n"
      "  p:\n"
      "    rules:\n"
      "      - {name: plain, hosts: [origin.test], schemes: [http], ports: [" +
      plain +
      "], ips: [127.0.0.1/32]}\n"
      "      - {name: tls, hosts: [origin.test], ports: [" +
      tls + "], ips: [127.0.0.1/32]" + config.tls_rule_keys +
      "}\n"
      "      - {name: wrongname, hosts: [wrongname.test], ports: [" +
      tls +
      "], ips: [127.0.0.1/32]}\n"
      "      - {name: tls-stall, hosts: [tls-stall.test], ports: [" +
      plain +
      "], ips: [127.0.0.1/32]}\n"
      "      - {name: blackhole, hosts: [blackhole.test], schemes: [http], ports: [" +
      blackhole + "], ips: [127.0.0.1/32]}\n";
  text += config.extra_rules;
  if (config.with_secret) {
    text +=
        "secrets:\n"
        "  token:\n"
        "    file: " +
        dir_.write("token", "the-real-token\n") +
        "\n"
        "    placeholder: " +
        std::string(kSecretPlaceholder) + "\n";
  }
  return text;
}

void SessionBed::configure(const BedConfig& config) {
  auto loaded = policy::loadConfig({"session-test.yaml", yaml(config)}, {});
  ASSERT_TRUE(loaded) << loaded.error().front().toString() << "\n" << yaml(config);
  auto secrets = proxy::SecretValues::load(*loaded.value());
  ASSERT_TRUE(secrets) << secrets.error();
  auto built = proxy::buildGeneration(loaded.value(), std::move(secrets).value(), nullptr,
                                      state_.audit, nullptr);
  ASSERT_TRUE(built) << built.error();
  std::shared_ptr<const proxy::Generation> generation = built.value();
  if (config.audit_can_fail) {
    // The same generation, but its audit sink is the bed's: on the same (empty) file, through a
    // write(2) that fails while the test says so. (The sink the gateway's AuditLog opened for
    // the path stays unused.)
    proxy::audit::AuditSinkOptions options;
    options.write = [failing = audit_failing_](int fd, const char* data,
                                               std::size_t size) -> ssize_t {
      if (*failing) {
        errno = ENOSPC;
        return -1;
      }
      return ::write(fd, data, size);
    };
    const int fd = ::open(audit_path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << audit_path_;
    std::shared_ptr<proxy::audit::AuditSink> sink = proxy::audit::AuditSink::onDescriptor(
        audit_path_, fd, true, std::string(proxy::audit::kGenesisChain), std::move(options));
    auto switched = std::make_shared<proxy::Generation>(*generation);
    switched->audit_sinks = {sink};
    for (proxy::SandboxView& view : switched->sandboxes) {
      view.audit = sink.get();
    }
    generation = std::move(switched);
    audit_can_fail_ = true;
  }
  state_.generation.publish(generation);
  context_.generation = generation;
  const policy::Config& c = *generation->config;
  resolver_ = std::make_unique<proxy::dns::Resolver>(&loop_, c.dns);
  pool_ = std::make_unique<proxy::session::UpstreamPool>(&loop_, poolLimits(c));
  context_.worker = 0;
  context_.loop = &loop_;
  context_.state = &state_;
  context_.resolver = resolver_.get();
  context_.pool = pool_.get();
  if (config.h2_upstreams) {
    h2_upstreams_ = std::make_unique<proxy::session::Http2UpstreamSessions>(context_, *pool_);
    context_.h2_upstreams = h2_upstreams_.get();
  }
}

void SessionBed::reload(const BedConfig& config) {
  ASSERT_FALSE(config.audit_can_fail || audit_can_fail_) << "reload() keeps the gateway's sinks";
  auto loaded = policy::loadConfig({"session-test.yaml", yaml(config)}, {});
  ASSERT_TRUE(loaded) << loaded.error().front().toString() << "\n" << yaml(config);
  auto secrets = proxy::SecretValues::load(*loaded.value());
  ASSERT_TRUE(secrets) << secrets.error();
  const std::shared_ptr<const proxy::Generation> previous = context_.currentGeneration();
  auto built = proxy::buildGeneration(loaded.value(), std::move(secrets).value(), previous.get(),
                                      state_.audit, nullptr);
  ASSERT_TRUE(built) << built.error();
  state_.generation.publish(built.value());
}

LoopPeer& SessionBed::connectClient(Entry entry) {
  EXPECT_NE(pool_, nullptr) << "configure() the bed first";
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(listen_port_);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Blocking: on loopback the handshake completes in the call, and the listener has room.
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  int accepted = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  EXPECT_GE(accepted, 0);
  clients_.push_back(std::make_unique<LoopPeer>(&loop_));
  EXPECT_EQ(clients_.back()->open(fd), 0);
  // The loop's clock, as a worker's is when its accept callback runs: the session's deadlines
  // count from it.
  uv_update_time(&loop_);
  startSession(*this, accepted, kSandbox, entry);
  return *clients_.back();
}

void SessionBed::forgetPeers() {
  clients_.clear();  // each closes its handle, freed by its close callback
  origin_->forget();
  tls_origin_->forget();
}

bool SessionBed::runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  return runLoopUntil(&loop_, done, limit);
}

void SessionBed::runFor(std::chrono::milliseconds span) {
  runLoopUntil(
      &loop_, [] { return false; }, span);
}

bool SessionBed::allSessionsFinished(std::chrono::milliseconds limit) {
  return runUntil([this] { return sessions_.empty(); }, limit);
}

void SessionBed::forEachLiveSession(
    const std::function<void(proxy::session::ClientConnection&)>& act) {
  // Keys first: acting on a session may finish it, which erases it from sessions_.
  std::vector<proxy::session::ClientConnection*> live;
  for (const auto& [session, owned] : sessions_) {
    live.push_back(session);
  }
  for (proxy::session::ClientConnection* session : live) {
    if (sessions_.count(session) != 0) {
      act(*session);
    }
  }
}

void SessionBed::abortSessions() {
  forEachLiveSession([](proxy::session::ClientConnection& session) { session.abort(); });
}

void SessionBed::drainSessions() {
  context_.draining = true;
  forEachLiveSession([](proxy::session::ClientConnection& session) { session.drain(); });
}

void SessionBed::failAuditWrites(bool fail) {
  EXPECT_TRUE(audit_can_fail_) << "configure the bed with BedConfig::audit_can_fail";
  *audit_failing_ = fail;
}

proxy::audit::AuditSink& SessionBed::auditSink() {
  return *context_.generation->sandboxes.front().audit;
}

proxy::session::ClientConnection& SessionBed::keep(
    std::unique_ptr<proxy::session::ClientConnection> session) {
  proxy::session::ClientConnection* key = session.get();
  sessions_.emplace(key, std::move(session));
  return *key;
}

void SessionBed::finished(proxy::session::ClientConnection* session) {
  auto it = sessions_.find(session);
  ASSERT_NE(it, sessions_.end()) << "a session finished twice, or one the bed never kept";
  finished_sessions_->add(std::move(it->second));  // as the worker's sessionFinished()
  sessions_.erase(it);
  ++finished_;
}

SessionBed::~SessionBed() {
  abortSessions();
  EXPECT_TRUE(allSessionsFinished()) << sessions_.size() << " session(s) never finished";
  finished_sessions_->close(nullptr);
  for (auto& client : clients_) {
    client->close();
  }
  origin_->close();
  tls_origin_->close();
  dns_->close();
  if (h2_upstreams_) {
    h2_upstreams_->close(nullptr);  // (their connections close in the pool)
  }
  if (pool_) {
    pool_->close(nullptr);
  }
  if (resolver_) {
    resolver_->close(nullptr);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&flush_audit_), nullptr);
  // Run the loop dry, within a bound: a handle left active would otherwise hang the test.
  bool expired = false;
  uv_timer_t guard;
  uv_timer_init(&loop_, &guard);
  guard.data = &expired;
  uv_timer_start(
      &guard, [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; }, 5000, 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(&guard));
  while (uv_loop_alive(&loop_) != 0 && !expired) {
    uv_run(&loop_, UV_RUN_ONCE);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);
  int rc = uv_loop_close(&loop_);
  if (rc != 0) {
    std::string open;
    uv_walk(
        &loop_,
        [](uv_handle_t* handle, void* arg) {
          static_cast<std::string*>(arg)->append(std::string(" ") + handleType(handle));
        },
        &open);
    ADD_FAILURE() << "handles left open on the loop:" << open;
  }
  EXPECT_EQ(state_.open_connections.load(), 0u) << "a session was never deleted";
  ::close(listener_);
  clients_.clear();  // their handles are closed and freed
}

// The one function that names the session's classes (see the header).
void startSession(SessionBed& bed, int fd, std::string_view sandbox_name, Entry entry) {
  using Session = proxy::session::ClientConnection;
  proxy::session::WorkerContext& context = bed.context();
  context.finished = [&bed](Session* finished) { bed.finished(finished); };
  // A copy: what the session is made with must not change under it (Worker::serve).
  const std::shared_ptr<const proxy::Generation> generation = context.currentGeneration();
  const proxy::SandboxView* view = generation->find(sandbox_name);
  if (view == nullptr) {
    ::close(fd);
    ADD_FAILURE() << "no sandbox " << sandbox_name;
    return;
  }
  const std::uint64_t id = bed.state().next_connection_id.fetch_add(1);
  Session* session = &bed.keep(std::make_unique<Session>(
      context, generation, *view, id,
      entry == Entry::Transparent ? Session::Listener::Transparent : Session::Listener::Explicit));
  const auto& sandbox_max = view->sandbox->limits.max_connections;
  const Session::OpenCount open = session->openedAs();
  const bool over_global = open.gateway > generation->config->limits.max_connections;
  const bool over_sandbox = sandbox_max && static_cast<std::uint64_t>(open.sandbox) > *sandbox_max;
  if (!session->start(fd)) {
    return;
  }
  if (over_global || over_sandbox) {
    session->refuseConnection(policy::Reason::TooManyConnections, !over_global);
  }
}

}  // namespace sluice::test_support
