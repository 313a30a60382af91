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

// The chain value of the last line in `text` (its complete lines), or the genesis value.
std::string chainOfLastLine(std::string_view text) {
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

// Moves a torn last line (a flush cut by a crash: SIGKILL can stop a write(2) between pages)
// out of the way, into PATH.torn, so the records appended next continue the chain on a line of
// their own. The fragment's request never got its whole answer (a record is written before the
// answer it describes completes), so nothing on record is lost; the fragment is kept as found.
// False when the fragment could not be saved: the file is then left as it is.
bool setAsideTornLine(int fd, const std::string& path, off_t keep, std::string_view fragment) {
  const std::string torn_path = path + ".torn";
  int torn = ::open(torn_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (torn < 0) {
    spdlog::error("audit log {}: its last line is incomplete and {} cannot be written: {}", path,
                  torn_path, std::strerror(errno));
    return false;
  }
  std::string saved(fragment);
  saved += '\n';
  bool written = ::write(torn, saved.data(), saved.size()) == static_cast<ssize_t>(saved.size());
  ::close(torn);
  if (!written || ::ftruncate(fd, keep) != 0) {
    spdlog::error("audit log {}: its incomplete last line could not be set aside: {}", path,
                  std::strerror(errno));
    return false;
  }
  spdlog::warn("audit log {}: its last line was incomplete ({} bytes, cut by a crash); moved to {}",
               path, fragment.size(), torn_path);
  return true;
}

// Where an existing file's chain goes on: the chain value of its last complete line (the
// genesis value for an empty file), after setting a torn last line aside. Records are at most a
// few KiB, so the last 64 KiB hold the last complete line.
std::string continueChain(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    return std::string(kGenesisChain);
  }
  const off_t from = st.st_size - std::min<off_t>(st.st_size, 64 * 1024);
  std::string tail(static_cast<std::size_t>(st.st_size - from), '\0');
  ssize_t n = ::pread(fd, tail.data(), tail.size(), from);
  tail.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  std::string_view text = tail;
  if (text.empty() || text.back() == '\n') {
    return text.empty() ? std::string(kGenesisChain)
                        : chainOfLastLine(text.substr(0, text.size() - 1));
  }
  std::size_t end = text.rfind('\n');
  if (end == std::string_view::npos && from > 0) {
    // Not a log sluice wrote (no line end in 64 KiB): its records start on a line of their own,
    // and `audit verify` will name the line before them.
    spdlog::error("audit log {}: not a sluice audit log (no line end in its last 64 KiB)", path);
    (void)!::write(fd, "\n", 1);
    return std::string(kGenesisChain);
  }
  const std::size_t kept = end == std::string_view::npos ? 0 : end + 1;
  if (!setAsideTornLine(fd, path, from + static_cast<off_t>(kept), text.substr(kept))) {
    (void)!::write(fd, "\n", 1);
  }
  return kept == 0 ? std::string(kGenesisChain) : chainOfLastLine(text.substr(0, kept - 1));
}

// `length` is what EVP_DigestFinal_ex said: at most EVP_MAX_MD_SIZE.
void appendHex(std::string& out, const unsigned char* digest, unsigned length) {
  constexpr char kHex[] = "0123456789abcdef";
  char text[2 * EVP_MAX_MD_SIZE];
  for (unsigned i = 0; i < length; ++i) {
    text[2 * i] = kHex[digest[i] >> 4];
    text[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  out.append(text, 2 * length);  // one append, not a push_back per digit
}

}  // namespace

std::string chainOf(std::string_view previous, std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  certs::EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), previous.data(), previous.size());
  EVP_DigestUpdate(ctx.get(), body.data(), body.size());
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
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
  // its mode. Read and append: the chain is read back from the end (a torn last line set
  // aside), and what is written goes there.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Err{"audit log " + path + ": " + std::strerror(errno)};
  }
  std::string chain = continueChain(fd, path);
  return onDescriptor(path, fd, true, std::move(chain), std::move(options));
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
}

void AuditSink::write(const AuditRecord& record) {
  std::lock_guard lock(mutex_);
  line_.clear();
  appendRecordBody(line_, record);
  chainAndKeep();
}

void AuditSink::write(const DnsRecord& record) {
  std::lock_guard lock(mutex_);
  line_.clear();
  appendDnsRecordBody(line_, record);
  chainAndKeep();
}

void AuditSink::chainAndKeep() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestInit_ex(digest_.get(), sha256_.get(), nullptr);
  EVP_DigestUpdate(digest_.get(), previous_chain_.data(), previous_chain_.size());
  EVP_DigestUpdate(digest_.get(), line_.data(), line_.size());
  EVP_DigestFinal_ex(digest_.get(), digest, &length);
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

void AuditSink::countRefusedStream() { refused_streams_.fetch_add(1, std::memory_order_relaxed); }

AuditSink::Status AuditSink::status() const {
  Status s;
  s.failing = failing_.load(std::memory_order_acquire);
  s.error = s.failing ? error_.load(std::memory_order_relaxed) : 0;
  s.failing_since_ms = failing_since_ms_.load(std::memory_order_relaxed);
  s.pending_bytes = pending_bytes_.load(std::memory_order_relaxed);
  s.pending_records = pending_records_.load(std::memory_order_relaxed);
  s.write_failures = write_failures_.load(std::memory_order_relaxed);
  s.refused_connections = refused_connections_.load(std::memory_order_relaxed);
  s.refused_streams = refused_streams_.load(std::memory_order_relaxed);
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
