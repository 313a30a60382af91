#pragma once
// The spdlog sink under the audit log (audit_log.h): it keeps the lines it is given, in order,
// and hands them to the OS only when flushed, with write(2) itself, so that it knows whether
// they got there. spdlog's own file sinks write through stdio and report a failure by throwing
// inside the logger, whose error handler prints a line and forgets the bytes: an audit log on a
// full disk lost its records. Here a line leaves memory only once write(2) has taken all of it.
//
// writePending() goes on where a partial write stopped (a line cut by a full disk is finished,
// byte for byte, by a later write), retries EINTR, and reports any other failure (ENOSPC, EIO,
// EDQUOT, EBADF, EPIPE, EAGAIN ...) as its errno instead of throwing. Nothing is dropped: what
// the caller keeps in memory, and for how long, is the caller's decision.
//
// Not thread-safe (null mutex): its one owner, AuditSink, calls it under its own lock.

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>

namespace sluice::proxy::audit {

// write(2), or a stand-in for tests: bytes taken, or -1 with errno set.
using WriteFunction = std::function<ssize_t(int fd, const char* data, std::size_t size)>;

class AuditFileSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  // Writes to `fd`, closed at destruction when `owns_fd`. `write` defaults to write(2).
  AuditFileSink(int fd, bool owns_fd, WriteFunction write = {});
  ~AuditFileSink() override;

  // Hands every pending byte to the OS, in order. 0 when nothing is left; else the errno of the
  // write that failed, and what it did not take stays pending.
  int writePending();
  // The result of the last writePending() (also run by spdlog's flush()).
  int lastError() const { return last_error_; }

  std::size_t pendingBytes() const { return pending_.size() - written_; }
  // Lines not yet written whole (a line cut by a partial write counts until its end is out).
  std::size_t pendingLines() const { return pending_lines_; }

 protected:
  // The message is one record's line, written as it is, with '\n' after it.
  void sink_it_(const spdlog::details::log_msg& message) override;
  void flush_() override;

 private:
  int fd_;
  bool owns_fd_;
  WriteFunction write_;
  std::string pending_;      // lines not yet written, from offset written_ on
  std::size_t written_ = 0;  // bytes at the front of pending_ already taken by the OS
  std::size_t pending_lines_ = 0;
  int last_error_ = 0;
};

}  // namespace sluice::proxy::audit
