#include "proxy/audit/audit_file_sink.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sluice::proxy::audit {

namespace {

// One write(2) takes at most this much: a kernel may cap a single write anyway, and a smaller
// piece lets a partial write on a nearly full disk make progress piece by piece.
constexpr std::size_t kMaxWrite = 1 << 20;
// After an episode of failures the buffer may have grown to megabytes; once empty again it goes
// back to this (a healthy sink holds one callback's worth of lines at a time).
constexpr std::size_t kKeptCapacity = 64 * 1024;
// A partial write leaves the written bytes at the front; they are dropped once they are this
// many and more than half the buffer, so a long failure does not copy megabytes per retry.
constexpr std::size_t kCompactAfter = 64 * 1024;

ssize_t systemWrite(int fd, const char* data, std::size_t size) { return ::write(fd, data, size); }

// The '\n's in data[0, size): lines a partial write finished.
std::size_t linesEnded(const char* data, std::size_t size) {
  std::size_t lines = 0;
  const char* end = data + size;
  while (const void* found = std::memchr(data, '\n', static_cast<std::size_t>(end - data))) {
    ++lines;
    data = static_cast<const char*>(found) + 1;
  }
  return lines;
}

}  // namespace

AuditFileSink::AuditFileSink(int fd, bool owns_fd, WriteFunction write)
    : fd_(fd), owns_fd_(owns_fd), write_(write ? std::move(write) : WriteFunction(systemWrite)) {}

AuditFileSink::~AuditFileSink() {
  if (owns_fd_ && fd_ >= 0) {
    ::close(fd_);
  }
}

void AuditFileSink::sink_it_(const spdlog::details::log_msg& message) {
  if (written_ == pending_.size()) {
    pending_.clear();
    written_ = 0;
  }
  pending_.append(message.payload.data(), message.payload.size());
  pending_ += '\n';
  ++pending_lines_;
}

void AuditFileSink::flush_() { writePending(); }

int AuditFileSink::writePending() {
  last_error_ = 0;
  while (written_ < pending_.size()) {
    const char* from = pending_.data() + written_;
    std::size_t size = std::min(pending_.size() - written_, kMaxWrite);
    ssize_t n = write_(fd_, from, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      // A write of a non-empty buffer that takes nothing and reports no error is a device
      // that will not take it: a failure like any other, retried later.
      last_error_ = n < 0 ? errno : EIO;
      break;
    }
    auto taken = static_cast<std::size_t>(n);
    written_ += taken;
    if (written_ < pending_.size()) {
      pending_lines_ -= linesEnded(from, taken);  // (all written: none left, counted below)
    }
  }
  if (written_ == pending_.size()) {
    pending_lines_ = 0;
    written_ = 0;
    if (pending_.capacity() > kKeptCapacity) {
      std::string().swap(pending_);
    } else {
      pending_.clear();
    }
  } else if (written_ >= kCompactAfter && written_ > pending_.size() / 2) {
    pending_.erase(0, written_);
    written_ = 0;
  }
  return last_error_;
}

}  // namespace sluice::proxy::audit
