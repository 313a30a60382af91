#include "proxy/audit/audit_log.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

Result<std::unique_ptr<AuditSink>, std::string> AuditSink::open(const std::string& path) {
  std::shared_ptr<spdlog::logger> logger;
  std::string chain(kGenesisChain);
  if (path == "-") {
    logger = std::make_shared<spdlog::logger>(
        "audit", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  } else {
    // Create it private before spdlog opens it: audit lines name every host a sandbox asked
    // for. An existing file keeps its mode.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
      return Err{"audit log " + path + ": " + std::strerror(errno)};
    }
    ::close(fd);
    chain = lastChain(path);
    try {
      logger = std::make_shared<spdlog::logger>(
          "audit", std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false));
    } catch (const std::exception& e) {
      return Err{"audit log " + path + ": " + e.what()};
    }
  }
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::off);  // AuditSink::flush() decides
  return std::unique_ptr<AuditSink>(new AuditSink(path, std::move(logger), std::move(chain)));
}

AuditSink::AuditSink(std::string path, std::shared_ptr<spdlog::logger> logger, std::string chain)
    : path_(std::move(path)),
      logger_(std::move(logger)),
      previous_chain_(std::move(chain)),
      sha256_(EVP_MD_fetch(nullptr, "SHA256", nullptr)),
      digest_(EVP_MD_CTX_new()) {}

AuditSink::~AuditSink() {
  logger_->flush();
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
  logger_->info(std::string_view(line_));
  ++records_;
  unflushed_.store(true, std::memory_order_release);
}

void AuditSink::flush() {
  if (!unflushed_.load(std::memory_order_acquire)) {
    return;
  }
  std::lock_guard lock(mutex_);
  if (unflushed_.exchange(false, std::memory_order_acq_rel)) {
    logger_->flush();
  }
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
  std::erase_if(by_path_, [](const auto& entry) { return entry.second.use_count() == 1; });
}

}  // namespace sluice::proxy::audit
