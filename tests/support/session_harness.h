#pragma once
// A session on a real libuv loop, in-process, with every peer under the test's control: the
// harness for the session's unit tests (tests/unit/proxy/session/) and for the fuzz target that
// feeds whole sessions (tests/fuzz/fuzz_http2_session.cc).
//
// SessionBed holds what a worker lends its sessions (session/worker_context.h): the loop, a
// real GatewayState (sandbox TLS context, audit log, counters), a dns::Resolver whose only
// server is an in-process FakeDnsServer, a real UpstreamPool, and a real Generation built by
// buildGeneration() from YAML. Around it: an origin (plain) and an origin (TLS, its certificate
// from a CA made with certs/ in the bed's TempDir, which upstream.ca_file names), a port that
// never answers a connect, and a listening socket that clients connect to.
//
// startSession() below is the one function that knows the session's classes: it makes the
// session for an accepted socket (as Worker::serve does) and keeps it until it reports itself
// finished. When proxy/session changes shape, it is the one function to change; the tests only
// see sockets, the audit file, the pool and the counters.
//
// Everything runs on the test's thread: a test writes to a peer, then runs the loop until an
// event it waits for (runUntil), never for a length of time it hopes is enough. The destructor
// aborts what is left, closes every handle, runs the loop dry and checks uv_loop_close() == 0.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "proxy/dns/resolver.h"
#include "proxy/io/deferred_delete.h"
#include "proxy/runtime/gateway_state.h"
#include "proxy/runtime/generation.h"
#include "proxy/session/context/worker_context.h"
#include "proxy/session/pool/upstream_pool.h"
#include "proxy/session/upstream/http2_upstream_session.h"
#include "tests/support/audit_lines.h"
#include "tests/support/fake_dns_server.h"
#include "tests/support/loop_peer.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy::session {
class ClientConnection;  // named in the harness's .cc only (startSession)
}  // namespace sluice::proxy::session

namespace sluice::test_support {

using namespace std::chrono_literals;

// The parts of the configuration a test sets; the rest (sandbox "sb", its CA, the audit file,
// the DNS server, the rules for the bed's origins) the bed writes itself.
struct BedConfig {
  std::string limits = "{handshake_timeout: 2s, idle_timeout: 5s}";
  std::string upstream = "{connect_timeout: 2s}";  // ca_file is added
  std::string dns = "{timeout: 2s}";               // servers are added
  std::string sandbox_limits;                      // the sandbox's `limits`; "" for none
  // A secret `token` (placeholder kSecretPlaceholder, its value in a file of the bed) that no
  // rule injects: a request carrying the placeholder is secret_misuse, and a request body is
  // held and scanned before anything is resolved.
  bool with_secret = false;
  // More rules for the policy, each a YAML line "      - {name: ..., ...}\n".
  std::string extra_rules;
  // More keys of the rule `tls` (origin.test on the TLS origin's port), e.g. ", paths: [/a]".
  std::string tls_rule_keys;
  // The sandbox's CA directory, under the bed's: another one is another CA (a reload that
  // changes it leaves the sandbox's connections nothing to take up).
  std::string ca_dir = "sandbox-ca";
  // The audit file, under the bed's directory; "" for the bed's own (auditLines()).
  std::string audit_file;
  // More fields of the sandbox, each a YAML line "    field: value\n" (e.g. `transparent`).
  std::string sandbox_fields;
  // The audit file's writes fail (ENOSPC) while the test says so (SessionBed::failAuditWrites):
  // the generation's sink is one of the bed's on the same file, whose write(2) it can stop.
  bool audit_can_fail = false;
  // The worker's registry of HTTP/2 upstream sessions and dials under way, as a worker has it
  // (Http2UpstreamSessions): TLS requests offer h2 and a burst to one key waits for one dial.
  // Off by default: the origins speak HTTP/1.1 and the tests count their connections.
  bool h2_upstreams = false;
};

// Which of the sandbox's listeners a client's connection came in on.
//   Explicit     the proxy port: CONNECT, or an absolute-form request
//   Transparent  a redirected connection: the first byte tells TLS from HTTP. The bed's
//                sockets are plain loopback ones, which nftables never redirected: the
//                original destination (SO_ORIGINAL_DST) is unknown, as for any connection the
//                kernel cannot say it redirected, and the session handles it as it would there.
enum class Entry : std::uint8_t { Explicit, Transparent };

inline constexpr std::string_view kSecretPlaceholder = "sk-sluice-token";

// The names the bed's DNS server knows (all 127.0.0.1) and the rules that allow them:
//   origin.test     http on the plain origin's port, https on the TLS origin's port
//   wrongname.test  https on the TLS origin's port (whose certificate names origin.test)
//   tls-stall.test  https on the plain origin's port (which never answers a ClientHello)
//   blackhole.test  http on the blackhole's port
// Every rule has ips [127.0.0.1/32]. Any other name is NXDOMAIN and not in the policy.
inline constexpr std::string_view kSandbox = "sb";

class SessionBed {
 public:
  SessionBed();
  ~SessionBed();
  SessionBed(const SessionBed&) = delete;
  SessionBed& operator=(const SessionBed&) = delete;

  // Builds the generation, the resolver and the pool. Once, before the first client.
  void configure(const BedConfig& config = {});
  // A reload: a generation built from `config` with the running one as its previous (the
  // sandbox keeps its runtime unless its CA changes), published as the server publishes one.
  // The sessions see it at their next request; the bed drains none (a worker drains the
  // connections of a removed sandbox). Not with BedConfig::audit_can_fail.
  void reload(const BedConfig& config);

  // A client connected to the gateway's listening socket; the accepted end is handed to
  // startSession(). The client is the bed's (it lives until the bed ends, or forgetPeers()).
  LoopPeer& connectClient(Entry entry = Entry::Explicit);

  // Drops the clients connected so far (closing those still open) and what the origins kept:
  // a long run (a fuzz target) keeps its memory bounded. A client the test holds is gone.
  void forgetPeers();

  // Runs the loop until `done` holds; false if `limit` passed first (a safety net: tests wait
  // for events).
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s);
  // Runs the loop for `span`: for a test that something does not happen meanwhile.
  void runFor(std::chrono::milliseconds span);

  // Sessions started and not yet finished (every handle closed, and deleted).
  std::size_t liveSessions() const { return sessions_.size(); }
  std::size_t finishedSessions() const { return finished_; }
  // Waits until every session has finished.
  bool allSessionsFinished(std::chrono::milliseconds limit = 5s);
  // What the worker does at shutdown: every live session is aborted.
  void abortSessions();
  // What the worker does when it starts draining (SIGTERM): every live session is drained (no
  // new request; what is in flight finishes), and the context says so to sessions made after.
  void drainSessions();

  // With BedConfig::audit_can_fail: from now on every write(2) of the audit file fails with
  // ENOSPC (true), or goes through again (false). Records are kept meanwhile, and the sink is
  // unavailable from its first failed write until a flush writes what it keeps.
  void failAuditWrites(bool fail);
  // The sandbox's audit sink (its availability, its counters; flush() as the server's retry
  // timer does).
  proxy::audit::AuditSink& auditSink();

  std::vector<AuditLine> auditLines() const { return readAuditLines(audit_path_); }

  uv_loop_t* loop() { return &loop_; }
  testing::FakeDnsServer& dns() { return *dns_; }
  OriginServer& origin() { return *origin_; }
  OriginServer& tlsOrigin() { return *tls_origin_; }
  std::uint16_t blackholePort() const { return blackhole_->port(); }
  proxy::session::UpstreamPool& pool() { return *pool_; }
  proxy::GatewayState& state() { return state_; }
  // The sandbox's CA certificate, for a client that terminates TLS at sluice.
  std::string sandboxCaFile() const { return dir_.path() + "/sandbox-ca/ca.pem"; }
  const std::string& dir() const { return dir_.path(); }

  // --- for startSession() ---
  proxy::session::WorkerContext& context() { return context_; }
  // Keeps a started session until finished(session) (abortSessions() ends it early).
  proxy::session::ClientConnection& keep(std::unique_ptr<proxy::session::ClientConnection> session);
  // Called by the session's WorkerContext::finished; the session is deleted on the loop's next
  // turn, as the worker deletes it (the same io::DeferredDelete).
  void finished(proxy::session::ClientConnection* session);

 private:
  std::string yaml(const BedConfig& config) const;
  void forEachLiveSession(const std::function<void(proxy::session::ClientConnection&)>& act);

  TempDir dir_;
  uv_loop_t loop_{};
  uv_check_t flush_audit_{};
  std::unique_ptr<testing::FakeDnsServer> dns_;
  std::unique_ptr<certs::CertificateAuthority> origin_ca_;
  std::unique_ptr<certs::LeafCache> origin_leaves_;
  std::unique_ptr<OriginServer> origin_;
  std::unique_ptr<OriginServer> tls_origin_;
  std::unique_ptr<Blackhole> blackhole_;
  int listener_ = -1;  // where clients connect: a plain socket, accepted by connectClient()
  std::uint16_t listen_port_ = 0;
  proxy::GatewayState state_;
  std::unique_ptr<proxy::dns::Resolver> resolver_;
  std::unique_ptr<proxy::session::UpstreamPool> pool_;
  std::unique_ptr<proxy::session::Http2UpstreamSessions> h2_upstreams_;  // BedConfig::h2_upstreams
  proxy::session::WorkerContext context_;
  std::string audit_path_;
  // Whether the audit sink's writes fail now (BedConfig::audit_can_fail); shared with the sink.
  std::shared_ptr<bool> audit_failing_ = std::make_shared<bool>(false);
  bool audit_can_fail_ = false;
  std::vector<std::unique_ptr<LoopPeer>> clients_;
  std::unordered_map<proxy::session::ClientConnection*,
                     std::unique_ptr<proxy::session::ClientConnection>>
      sessions_;
  std::size_t finished_ = 0;
  // Sessions that finished, freed on the loop's next turn.
  std::optional<proxy::io::DeferredDelete<proxy::session::ClientConnection>> finished_sessions_;
};

// Makes the session for the accepted connection `fd` on the `entry` listener of sandbox
// `sandbox`, starts it, and gives it to `bed` to keep: what Worker::serve does for a connection
// it takes, limits.max_connections included (over a sandbox's limit the session refuses the
// connection with its 503; over the process-wide one it closes it). Ownership of `fd` passes.
void startSession(SessionBed& bed, int fd, std::string_view sandbox = kSandbox,
                  Entry entry = Entry::Explicit);

}  // namespace sluice::test_support
