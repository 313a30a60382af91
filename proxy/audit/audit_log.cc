#include "proxy/audit/audit_log.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spdlog/logger.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace sluice::proxy::audit {

namespace {

constexpr std::string_view kChainMember = ",\"chain\":\"";

bool isHex64(std::string_view s) {
  if (s.size() != 64) {
    return false;
  }
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

// The chain value of the last complete line of an existing file, or the genesis value.
std::string lastChain(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return std::string(kGenesisChain);
  }
  struct stat st {};
  std::string tail;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    off_t want = std::min<off_t>(st.st_size, 64 * 1024);
    tail.resize(static_cast<std::size_t>(want));
    ssize_t n = ::pread(fd, tail.data(), tail.size(), st.st_size - want);
    tail.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  // The last complete line ends at the last '\n'; a partial line after it (a crash mid-write)
  // is not part of the chain.
  std::string_view text = tail;
  std::size_t end = text.rfind('\n');
  if (end == std::string_view::npos) {
    return std::string(kGenesisChain);
  }
  text = text.substr(0, end);
  std::size_t start = text.rfind('\n');
  std::string_view line = start == std::string_view::npos ? text : text.substr(start + 1);
  std::size_t at = line.rfind(kChainMember);
  if (at == std::string_view::npos) {
    return std::string(kGenesisChain);
  }
  std::string_view value = line.substr(at + kChainMember.size());
  value = value.substr(0, value.find('"'));
  return isHex64(value) ? std::string(value) : std::string(kGenesisChain);
}

void appendHex(std::string& out, const unsigned char* digest, unsigned length) {
  constexpr char kHex[] = "0123456789abcdef";
  for (unsigned i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
}

}  // namespace

std::string chainOf(std::string_view previous, std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, previous.data(), previous.size());
  EVP_DigestUpdate(ctx, body.data(), body.size());
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  hex.reserve(64);
  appendHex(hex, digest, length);
  return hex;
}

Result<std::unique_ptr<AuditSink>, std::string> AuditSink::open(const std::string& path,
                                                                Options options) {
  if (path == "-") {
    return onDescriptor(path, STDOUT_FILENO, false, std::string(kGenesisChain), std::move(options));
  }
  // Created private: audit lines name every host a sandbox asked for. An existing file keeps
  // its mode. O_APPEND: the chain is read back from the end, and what is written goes there.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Err{"audit log " + path + ": " + std::strerror(errno)};
  }
  return onDescriptor(path, fd, true, lastChain(path), std::move(options));
}

std::unique_ptr<AuditSink> AuditSink::onDescriptor(std::string path, int fd, bool owns_fd,
                                                   std::string chain, Options options) {
  return std::unique_ptr<AuditSink>(
      new AuditSink(std::move(path), fd, owns_fd, std::move(chain), std::move(options)));
}

AuditSink::AuditSink(std::string path, int fd, bool owns_fd, std::string chain, Options options)
    : path_(std::move(path)),
      pending_limit_(options.pending_limit),
      file_(std::make_shared<AuditFileSink>(fd, owns_fd, std::move(options.write))),
      logger_(std::make_shared<spdlog::logger>("audit", file_)),
      previous_chain_(std::move(chain)),
      sha256_(EVP_MD_fetch(nullptr, "SHA256", nullptr)),
      digest_(EVP_MD_CTX_new()) {
  logger_->set_level(spdlog::level::info);
  logger_->flush_on(spdlog::level::off);  // flush() decides
}

AuditSink::~AuditSink() {
  {
    std::lock_guard lock(mutex_);
    writeKept();
    if (failing_.load(std::memory_order_relaxed)) {
      spdlog::error("audit log {}: {} records ({} bytes) could not be written and are lost: {}",
                    path_, file_->pendingLines(), file_->pendingBytes(),
                    std::strerror(error_.load(std::memory_order_relaxed)));
    }
  }
  EVP_MD_CTX_free(digest_);
  EVP_MD_free(sha256_);
}

void AuditSink::write(const AuditRecord& record) {
  std::lock_guard lock(mutex_);
  line_.clear();
  appendRecordBody(line_, record);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestInit_ex(digest_, sha256_, nullptr);
  EVP_DigestUpdate(digest_, previous_chain_.data(), previous_chain_.size());
  EVP_DigestUpdate(digest_, line_.data(), line_.size());
  EVP_DigestFinal_ex(digest_, digest, &length);
  previous_chain_.clear();
  appendHex(previous_chain_, digest, length);
  line_ += kChainMember;
  line_ += previous_chain_;
  line_ += "\"}";
  logger_->info(std::string_view(line_));  // kept by the file sink until a write takes it
  ++records_;
  unflushed_.store(true, std::memory_order_release);
}

void AuditSink::flush() {
  if (!unflushed_.load(std::memory_order_acquire)) {
    return;
  }
  std::lock_guard lock(mutex_);
  if (unflushed_.exchange(false, std::memory_order_acq_rel)) {
    writeKept();
  }
}

void AuditSink::writeKept() {
  logger_->flush();  // the file sink's writePending(); spdlog's flush never throws from it
  int error = file_->lastError();
  pending_bytes_.store(file_->pendingBytes(), std::memory_order_relaxed);
  pending_records_.store(file_->pendingLines(), std::memory_order_relaxed);
  bool was_failing = failing_.load(std::memory_order_relaxed);
  if (error != 0) {
    write_failures_.fetch_add(1, std::memory_order_relaxed);
    error_.store(error, std::memory_order_relaxed);
    unflushed_.store(true, std::memory_order_release);  // every later flush tries again
    if (!was_failing) {
      failing_since_ms_.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count(),
                              std::memory_order_relaxed);
      failing_.store(true, std::memory_order_release);
      spdlog::error(
          "audit log {}: cannot write: {}; its records are kept and retried, and the "
          "sandboxes writing to it are refused (503 audit_unavailable) until it can be "
          "written",
          path_, std::strerror(error));
    }
    return;
  }
  if (was_failing) {
    failing_.store(false, std::memory_order_release);
    failing_since_ms_.store(0, std::memory_order_relaxed);
    spdlog::warn(
        "audit log {}: written again, every kept record with it; its sandboxes are "
        "served again",
        path_);
  }
}

bool AuditSink::overPendingLimit() const {
  return !available() && pending_bytes_.load(std::memory_order_relaxed) > pending_limit_;
}

void AuditSink::countRefusedConnection() {
  refused_connections_.fetch_add(1, std::memory_order_relaxed);
}

AuditSink::Status AuditSink::status() const {
  Status s;
  s.failing = failing_.load(std::memory_order_acquire);
  s.error = s.failing ? error_.load(std::memory_order_relaxed) : 0;
  s.failing_since_ms = failing_since_ms_.load(std::memory_order_relaxed);
  s.pending_bytes = pending_bytes_.load(std::memory_order_relaxed);
  s.pending_records = pending_records_.load(std::memory_order_relaxed);
  s.write_failures = write_failures_.load(std::memory_order_relaxed);
  s.refused_connections = refused_connections_.load(std::memory_order_relaxed);
  return s;
}

std::string AuditSink::describeFailure() const {
  Status s = status();
  if (!s.failing) {
    return {};
  }
  std::string since;
  appendTimestamp(
      since, std::chrono::system_clock::time_point(std::chrono::milliseconds(s.failing_since_ms)));
  return "audit log " + path_ + ": cannot write: " + std::strerror(s.error) + " since " + since +
         "; " + std::to_string(s.pending_records) + " records (" + std::to_string(s.pending_bytes) +
         " bytes) kept; new requests refused " + "(503 audit_unavailable)";
}

std::uint64_t AuditSink::records() const {
  std::lock_guard lock(mutex_);
  return records_;
}

Result<std::shared_ptr<AuditSink>, std::string> AuditLog::sink(const std::string& path) {
  std::lock_guard lock(mutex_);
  if (auto it = by_path_.find(path); it != by_path_.end()) {
    return it->second;
  }
  auto opened = AuditSink::open(path);
  if (!opened) {
    return Err{opened.error()};
  }
  std::shared_ptr<AuditSink> sink = std::move(opened).value();
  by_path_.emplace(path, sink);
  return sink;
}

void AuditLog::closeUnused() {
  std::lock_guard lock(mutex_);
  // A file that still keeps records stays open, and retry() goes on with it, even when no
  // sandbox writes there any more (a reload that moved them off a full disk): closing it would
  // lose them.
  std::erase_if(by_path_, [](const auto& entry) {
    return entry.second.use_count() == 1 && entry.second->available();
  });
}

std::vector<std::shared_ptr<AuditSink>> AuditLog::sinks() {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<AuditSink>> out;
  out.reserve(by_path_.size());
  for (const auto& [path, sink] : by_path_) {
    out.push_back(sink);
  }
  return out;
}

void AuditLog::retry() {
  // Outside the registry's lock: a write may take time, and sink() must not wait for it.
  for (const std::shared_ptr<AuditSink>& sink : sinks()) {
    if (!sink->available()) {
      sink->flush();
    }
  }
}

}  // namespace sluice::proxy::audit
