#pragma once
// The audit log: one JSON line per record (audit_record.h), through spdlog. write() leaves a
// line in the sink's memory and flush() hands everything kept to the OS with write(2)
// (audit_file_sink.h). A session flushes at the end of each of its callbacks, before the bytes it
// produced go to the client, and before it closes: a record is on record before its answer is
// complete and before its connection closes. Lines of several sessions (and workers) that meet
// in memory go out together; each worker also flushes after every round of I/O callbacks.
//
// Every line ends with "chain": the hex SHA-256 of the previous line's chain (64 hex digits;
// 64 "0"s for a file's first record) followed by this line's bytes up to `,"chain"`
// (docs/audit.md#the-chain).
// A file that already holds records continues its chain from its last complete line.
//
// No record is lost to a file that cannot be written (a full disk, an I/O error, /dev/full):
// a line leaves memory only once the OS has taken all of it. While some are left the sink is
// *unavailable*: every flush tries again, so does AuditLog::retry() (the main thread, a few
// times a second, so an idle gateway recovers too), and the sessions of the sandboxes writing
// here answer their new requests 503 audit_unavailable (each such answer a record, kept like
// the others). Lines keep the chain values computed when they were written, so when the file
// takes them again the chain goes on unbroken. Past kPendingLimit bytes kept, new connections of
// those sandboxes are closed before a byte is read (Worker::serve): see
// docs/audit.md#when-the-audit-file-cannot-be-written.
// The first failure logs one error, the recovery one warning; /healthz and /metrics show it.
//
// One AuditSink per distinct path ("-" is stdout); sandboxes with the same path share it.
// Thread-safe: workers on every thread write; a mutex per sink keeps chain order = file order.
// status() and available() read atomics only, for the request path and the admin endpoint.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/evp.h>

#include "base/result.h"
#include "certs/openssl_ptr.h"
#include "policy/config.h"
#include "proxy/audit/audit_file_sink.h"
#include "proxy/audit/audit_record.h"
#include "proxy/audit/dns_record.h"

namespace spdlog {
class logger;
}

namespace sluice::proxy::audit {

inline constexpr std::string_view kGenesisChain =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The chain value of a line: hex SHA-256 of `previous` (64 hex chars) then `body` (the line up
// to, not including, `,"chain"`).
std::string chainOf(std::string_view previous, std::string_view body);

// Bytes of lines a sink keeps unwritten before the sandboxes writing to it get no new
// connection. A record is at most about 6 KiB (audit_record.h), most are about 500 bytes:
// thousands of records, a few MiB per file, whatever the sandboxes do.
inline constexpr std::size_t kPendingLimit = 4 * 1024 * 1024;

struct AuditSinkOptions {
  std::size_t pending_limit = kPendingLimit;
  WriteFunction write;  // empty: write(2)
};

class AuditSink {
 public:
  using Options = AuditSinkOptions;

  // Opens `path` for append, creating it with mode 0600 ("-" is stdout).
  static Result<std::unique_ptr<AuditSink>, std::string> open(const std::string& path,
                                                              Options options = {});
  // On a descriptor the caller opened (tests: a pipe, a file), continuing from `chain`.
  static std::unique_ptr<AuditSink> onDescriptor(std::string path, int fd, bool owns_fd,
                                                 std::string chain, Options options = {});
  ~AuditSink();
  AuditSink(const AuditSink&) = delete;
  AuditSink& operator=(const AuditSink&) = delete;

  // Keeps the record's line, chained, for the next flush.
  void write(const AuditRecord& record);
  void write(const DnsRecord& record);
  // Hands what is kept to the OS. Cheap when nothing is; while the sink is unavailable, every
  // call tries again.
  void flush();
  const std::string& path() const { return path_; }
  std::uint64_t records() const;

  // False while lines are kept that a write failed to hand over: new requests of the sandboxes
  // writing here are refused. One atomic load.
  bool available() const { return !failing_.load(std::memory_order_acquire); }
  // Unavailable, and holding more than the pending limit: take no new connection.
  bool overPendingLimit() const;
  // A connection closed unread because of overPendingLimit(), for /metrics.
  void countRefusedConnection();
  // An HTTP/2 stream refused unrecorded (REFUSED_STREAM) while the file cannot be written: its
  // connection already kept its one refusal (docs/audit.md), for /metrics.
  void countRefusedStream();

  struct Status {
    bool failing = false;
    int error = 0;                      // errno of the last failed write while failing
    std::int64_t failing_since_ms = 0;  // system clock, ms since the epoch; 0 when healthy
    std::uint64_t pending_bytes = 0;    // as of the last flush
    std::uint64_t pending_records = 0;
    std::uint64_t write_failures = 0;  // failed attempts to write, ever
    std::uint64_t refused_connections = 0;
    std::uint64_t refused_streams = 0;
  };
  Status status() const;
  // One line for /healthz while failing: the path, the error, since when, what is kept.
  std::string describeFailure() const;

 private:
  AuditSink(std::string path, int fd, bool owns_fd, std::string chain, Options options);
  // Under mutex_: chains line_ (a record's body), completes it and keeps it for the next flush.
  void chainAndKeep();
  // Under mutex_: runs the file sink's write and brings the state and counters up to date.
  void writeKept();

  std::string path_;
  std::size_t pending_limit_;
  std::shared_ptr<AuditFileSink> file_;  // guarded by mutex_
  std::shared_ptr<spdlog::logger> logger_;
  mutable std::mutex mutex_;
  std::string previous_chain_;  // guarded by mutex_
  // One digest context, reused for every line, with the algorithm fetched once: OpenSSL 3's
  // implicit fetch per call cost as much as the hash.
  certs::EvpMdPtr sha256_;
  certs::EvpMdCtxPtr digest_;  // guarded by mutex_
  std::string line_;              // guarded by mutex_: reused, so a record allocates nothing
  std::uint64_t records_ = 0;     // guarded by mutex_
  std::atomic<bool> unflushed_{false};
  // Written under mutex_, read anywhere.
  std::atomic<bool> failing_{false};
  std::atomic<int> error_{0};
  std::atomic<std::int64_t> failing_since_ms_{0};
  std::atomic<std::uint64_t> pending_bytes_{0};
  std::atomic<std::uint64_t> pending_records_{0};
  std::atomic<std::uint64_t> write_failures_{0};
  std::atomic<std::uint64_t> refused_connections_{0};
  std::atomic<std::uint64_t> refused_streams_{0};
};

// Every audit file of the process, by path: a sandbox of any generation that writes to a path
// gets the one sink of that path, so a file keeps one hash chain across reloads (two sinks on
// one file would interleave two chains).
class AuditLog {
 public:
  // The sink for `path`, opened on first use ("-" is stdout). Thread-safe.
  Result<std::shared_ptr<AuditSink>, std::string> sink(const std::string& path);
  // Closes (flushing) the sinks nothing but this registry uses any more: the files of removed
  // sandboxes, once their last connection is gone. Here, under the registry's lock, so that a
  // path cannot be reopened (and its chain read back) while its old sink still holds lines. A
  // sink that keeps unwritten records stays until retry() has written them.
  void closeUnused();
  // Every sink open now, for /healthz and /metrics.
  std::vector<std::shared_ptr<AuditSink>> sinks();
  // Tries again to write what unavailable sinks keep (from a timer: a gateway that gets no
  // more traffic still recovers, and serves its sandboxes again, once the file can be written).
  void retry();

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<AuditSink>, std::less<>> by_path_;  // guarded by mutex_
};

}  // namespace sluice::proxy::audit
