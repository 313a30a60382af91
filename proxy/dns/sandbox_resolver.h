#pragma once
// The sandbox's resolver (`dns_listen`, docs/wire.md#the-sandboxs-resolver): a DNS responder on a
// libuv loop that answers the sandbox from the policy alone. It never forwards, never recurses and
// never makes a query of its own (point 7 of docs/wire.md#the-invariant): its only outside call is
// the Answerer.
//
// What it answers (the Answerer decides the policy; this class the wire):
//   well-formed query, class IN  -> the Answerer's verdict: Addresses (A or AAAA records),
//                                   NoData (NOERROR, no records) or NxDomain
//   well-formed query, other class -> REFUSED, without asking the Answerer (sluice serves
//                                   nothing outside IN; CHAOS "version.bind" learns nothing)
//   malformed (parseQuery FormErr) -> FORMERR;  opcode other than QUERY -> NOTIMP
//   a response, or under 12 bytes -> nothing
// Addresses are only ever answered to A (IPv4 ones) and AAAA (IPv6 ones) questions: an
// Addresses verdict for any other type, or with no address of the asked family, is sent as
// NoData. So TXT, NULL, ANY, HTTPS/SVCB (no ECH configs) never carry a record.
// Responses are authoritative (AA=1), RA=0, with an OPT record when the query had one. A UDP
// response carries as many addresses as fit 512 bytes (or the client's EDNS size, at most
// 1232); over TCP all of them (up to 64).
//
// UDP and TCP (RFC 7766: 2-byte length prefix, several queries per connection, pipelined
// queries answered in order) are served on the same address and port.
//
// Bounded resources, whatever the sandbox sends:
//   - UDP: one reused reply buffer; replies go out with uv_udp_try_send and are dropped when
//     the socket buffer is full, so a flood costs CPU, never memory.
//   - TCP: at most limits.max_tcp_connections at once; a new one beyond that closes the
//     oldest. A connection idle for limits.tcp_idle_timeout (no complete query) is closed. A
//     query longer than kMaxTcpQueryBytes closes its connection. When a connection's unwritten
//     responses reach limits.max_pending_bytes, it is not read (nor its buffered queries
//     answered) until they are written. Per connection that bounds memory to about
//     64 KiB of input plus max_pending_bytes of output.
//
// Sockets are bound by net::bindSocket (proxy/net/bound_socket.h), as the gateway's listeners
// are: the TCP listener with SO_REUSEADDR (a restart binds despite TIME_WAIT; on Linux it does
// not let anyone listen beside it), "[::]" dual-stack. The UDP socket ends up with neither
// SO_REUSEADDR nor SO_REUSEPORT (libuv's uv_udp_open sets SO_REUSEADDR; start() clears it): on
// Linux, UDP SO_REUSEADDR lets any later socket that also sets it bind the same address and
// port and take the sandbox's queries, and UDP has no TIME_WAIT to justify it. Bind a specific
// address: bound to a wildcard, UDP replies leave from whichever address the kernel picks,
// which a client may ignore.
//
// Threading: one loop, one thread. Construct, start(), close() and the Answerer all run on the
// loop's thread. Several resolvers may share a loop (one per sandbox).
//
// Lifetime (close-then-free, like proxy/dns/resolver.h):
//   SandboxResolver r(loop, endpoint, answerer);
//   if (auto started = r.start(); !started) { ... started.error() ... }
//   ...
//   r.close([&] { /* now r may be destroyed */ });  // then let the loop run
// close() stops serving at once (no Answerer call after it) and uv_close()s every handle;
// `done` runs from the last close callback, after which uv_loop_close() can succeed. close()
// is needed after a failed start() too. Destroying the resolver earlier is safe as long as the
// loop runs again: the handles are left to the loop, which frees them; `done` then never runs.

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/ip_address.h"
#include "proxy/dns/dns_message.h"

namespace sluice::proxy::dns {

struct SandboxAnswer {
  // Refused: the sandbox asks faster than its limits allow (dns_queries_per_second).
  enum class Kind : std::uint8_t { Addresses, NoData, NxDomain, Refused };
  Kind kind = Kind::NxDomain;
  std::vector<policy::IpAddress> addresses;  // for Addresses
  std::uint32_t ttl = 0;                     // of the address records
};

class SandboxResolver {
 public:
  // Called on the loop thread for each well-formed class-IN query, with the QNAME as
  // parseQuery() wrote it (not canonicalised: letter case as sent, no trailing dot, odd bytes
  // as "\DDD"), the QTYPE and who asked (for the record of it). Its verdict is the whole
  // policy. It must not throw (it runs under a libuv callback) and must not close or destroy
  // the resolver.
  using Answerer = std::function<SandboxAnswer(std::string_view qname, std::uint16_t qtype,
                                               const policy::Endpoint& client)>;

  struct Limits {
    std::size_t max_tcp_connections = 64;
    std::chrono::milliseconds tcp_idle_timeout{10000};
    std::size_t max_pending_bytes = 16 * 1024;  // unwritten TCP responses per connection
  };
  // Longer queries close their TCP connection. A query is a header, one question and an OPT
  // record (whose options, cookies or RFC 7830 padding, stay well under this).
  static constexpr std::size_t kMaxTcpQueryBytes = 4096;
  static constexpr std::size_t kMaxAddresses = 64;  // used of one verdict

  SandboxResolver(uv_loop_t* loop, policy::Endpoint endpoint, Answerer answer);
  SandboxResolver(uv_loop_t* loop, policy::Endpoint endpoint, Answerer answer, Limits limits);
  ~SandboxResolver();
  SandboxResolver(const SandboxResolver&) = delete;
  SandboxResolver& operator=(const SandboxResolver&) = delete;

  // Binds TCP, then UDP on the same address and port, and starts serving both. Port 0 (tests)
  // takes a free port for TCP and the same number for UDP. Errors name the endpoint, e.g.
  // "10.200.0.1:53 (udp): Address already in use"; after one, nothing is served (close() still
  // releases what was bound). Calls after the first successful one do nothing.
  Result<Ok, std::string> start();

  // Whether start() could bind `endpoint` now (both protocols; the sockets are closed again),
  // with the error start() would give. A reload asks before it commits to a new dns_listen:
  // the resolver itself starts on worker 0 only once the reload is in force.
  static Result<Ok, std::string> probe(const policy::Endpoint& endpoint);

  // Starts closing; see the header comment. Only the first call counts; `done` may be empty
  // and may destroy the resolver.
  void close(std::function<void()> done);

  // The endpoint as bound (the real port when 0 was asked), once start() succeeded.
  const policy::Endpoint& endpoint() const { return endpoint_; }

  // Every message received counts once in `queries` and once in exactly one of answered,
  // nxdomain, nodata, formerr, notimp, refused or dropped (no reply: a response or a runt, a
  // TCP query too long or cut off by its client). A UDP reply the kernel would not take
  // (EAGAIN) counts in `dropped` as well as in its outcome.
  struct Stats {
    std::uint64_t queries = 0;   // DNS messages received (UDP datagrams, TCP messages)
    std::uint64_t answered = 0;  // NOERROR with at least one address
    std::uint64_t nxdomain = 0;
    std::uint64_t nodata = 0;  // NOERROR without records
    std::uint64_t formerr = 0;
    std::uint64_t notimp = 0;
    std::uint64_t refused = 0;  // class other than IN
    std::uint64_t dropped = 0;
    std::uint64_t tcp_connections = 0;  // accepted, in all
    std::uint64_t tcp_evicted = 0;      // closed to make room for a newer one
    std::uint64_t tcp_read_pauses = 0;  // reading stopped: unwritten answers reached the cap
  };
  const Stats& stats() const { return stats_; }
  // TCP connections open now (not counting ones already closing).
  std::size_t tcpConnections() const { return open_connections_; }

 private:
  struct Connection;

  // Answers one DNS message (no TCP prefix) by appending to `out`, within the UDP size limit
  // when `udp`; returns whether anything was appended. Counts it in stats_. `client` asked.
  bool respond(std::span<const std::uint8_t> message, bool udp, const policy::Endpoint& client,
               std::vector<std::uint8_t>& out);
  void acceptConnection();
  void evictOldest();
  void pump(Connection& c);
  std::size_t processBuffered(Connection& c);
  void flush(Connection& c);
  void startReading(Connection& c);
  void stopReading(Connection& c);
  void armIdle(Connection& c);
  void closeConnection(Connection& c);
  void maybeDone();

  static void onUdpRecv(uv_udp_t* udp, ssize_t nread, const uv_buf_t* buf, const sockaddr* peer,
                        unsigned flags) noexcept;
  static void onTcpConnection(uv_stream_t* server, int status) noexcept;
  static void onTcpRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void onTcpWrite(uv_write_t* req, int status) noexcept;
  static void onIdleTimer(uv_timer_t* timer) noexcept;
  static void onListenerClosed(uv_handle_t* handle) noexcept;
  static void onConnectionHandleClosed(uv_handle_t* handle) noexcept;

  uv_loop_t* loop_;
  policy::Endpoint endpoint_;
  Answerer answer_;
  Limits limits_;
  uv_udp_t* udp_;                 // heap: freed by its close callback, which may outlive *this
  uv_tcp_t* listener_;            // same
  Connection* oldest_ = nullptr;  // every connection not yet freed, oldest first
  Connection* newest_ = nullptr;
  std::size_t open_connections_ = 0;
  int live_handles_ = 0;             // handles not yet through their close callback
  std::vector<std::uint8_t> reply_;  // the UDP reply being built; reused
  Stats stats_;
  bool started_ = false;
  bool closing_ = false;
  std::function<void()> done_;
};

}  // namespace sluice::proxy::dns
