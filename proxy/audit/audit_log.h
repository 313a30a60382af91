#pragma once
// The audit log: one JSON line per record (audit_record.h), through spdlog. write() leaves a
// line in the sink's buffer and flush() hands everything buffered to the OS in one write(2).
// A session flushes at the end of each of its callbacks, before the bytes it produced go to the
// client, and before it closes: a record is on record before its answer is complete and before
// its connection closes. Lines of several sessions (and workers) that meet in the buffer go
// out together; each worker also flushes after every round of I/O callbacks.
//
// Every line ends with "chain": the hex SHA-256 of the previous line's chain (64 hex digits;
// 64 "0"s for a file's first record) followed by this line's bytes up to `,"chain"`
// (docs/audit.md#the-chain).
// A file that already holds records continues its chain from its last complete line.
//
// One AuditSink per distinct path ("-" is stdout); sandboxes with the same path share it.
// Thread-safe: workers on every thread write; a mutex per sink keeps chain order = file order.

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <openssl/evp.h>

#include "base/result.h"
#include "policy/config.h"
#include "proxy/audit/audit_record.h"

namespace spdlog {
class logger;
}

namespace sluice::proxy::audit {

inline constexpr std::string_view kGenesisChain =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The chain value of a line: hex SHA-256 of `previous` (64 hex chars) then `body` (the line up
// to, not including, `,"chain"`).
std::string chainOf(std::string_view previous, std::string_view body);

class AuditSink {
 public:
  static Result<std::unique_ptr<AuditSink>, std::string> open(const std::string& path);
  ~AuditSink();

  // Buffers the record's line (the buffer fills to the OS by itself past a few KiB).
  void write(const AuditRecord& record);
  // Hands what is buffered to the OS. Cheap when nothing is.
  void flush();
  const std::string& path() const { return path_; }
  std::uint64_t records() const;

 private:
  AuditSink(std::string path, std::shared_ptr<spdlog::logger> logger, std::string chain);

  std::string path_;
  std::shared_ptr<spdlog::logger> logger_;
  mutable std::mutex mutex_;
  std::string previous_chain_;  // guarded by mutex_
  // One digest context, reused for every line, with the algorithm fetched once: OpenSSL 3's
  // implicit fetch per call cost as much as the hash.
  EVP_MD* sha256_ = nullptr;
  EVP_MD_CTX* digest_ = nullptr;  // guarded by mutex_
  std::string line_;            // guarded by mutex_: reused, so a record allocates nothing
  std::uint64_t records_ = 0;   // guarded by mutex_
  std::atomic<bool> unflushed_{false};
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
  // path cannot be reopened (and its chain read back) while its old sink still holds lines.
  void closeUnused();

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<AuditSink>, std::less<>> by_path_;  // guarded by mutex_
};

}  // namespace sluice::proxy::audit
