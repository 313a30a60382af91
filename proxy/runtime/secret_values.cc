#include "proxy/runtime/secret_values.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace sluice::proxy {

namespace {

// A secret file is a key or a token, not a document.
constexpr std::size_t kMaxSecretBytes = 64 * 1024;

// The whole buffer, not just the current length: a short value lives inside the string object
// itself, and copies and moves leave its bytes behind.
void wipe(std::string& s) {
  OPENSSL_cleanse(s.data(), s.capacity());
  s.clear();
}

// A header value: visible ASCII, spaces and tabs inside, nothing that could end the field.
const char* unsendable(std::string_view value) {
  if (value.empty()) {
    return "is empty";
  }
  for (unsigned char c : value) {
    if (c == '\r' || c == '\n' || c == 0) {
      return "contains a line break or NUL: it cannot be sent as a header value";
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return "contains a control character: it cannot be sent as a header value";
    }
  }
  if (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
      value.back() == '\t') {
    return "begins or ends with white space, which a header value cannot keep";
  }
  return nullptr;
}

Result<std::string, std::string> readSecretFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Err{"file " + path + ": " + std::strerror(errno)};
  }
  std::string value;
  // Room for the largest value at once: growing would leave copies of it in freed memory.
  value.reserve(kMaxSecretBytes);
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      OPENSSL_cleanse(buffer, sizeof(buffer));
      wipe(value);
      return Err{"file " + path + ": " + std::strerror(saved)};
    }
    if (n == 0) {
      break;
    }
    if (value.size() + static_cast<std::size_t>(n) > kMaxSecretBytes) {
      ::close(fd);
      OPENSSL_cleanse(buffer, sizeof(buffer));
      wipe(value);
      return Err{"file " + path + " is larger than 64 KiB: not a secret value"};
    }
    value.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  OPENSSL_cleanse(buffer, sizeof(buffer));
  // One final line break is how files end; it is not part of the value.
  if (!value.empty() && value.back() == '\n') {
    value.pop_back();
    if (!value.empty() && value.back() == '\r') {
      value.pop_back();
    }
  }
  return value;
}

}  // namespace

Result<SecretValues, std::string> SecretValues::load(const policy::Config& config) {
  SecretValues secrets;
  for (const policy::Secret& secret : config.secrets) {
    std::string where;
    std::string value;
    if (secret.source == policy::Secret::Source::Env) {
      where = "environment variable " + secret.source_value;
      const char* env = std::getenv(secret.source_value.c_str());
      if (env == nullptr) {
        return Err{"secret '" + secret.name + "': " + where + " is not set"};
      }
      value = env;
    } else {
      where = "file " + secret.source_value;
      auto read = readSecretFile(secret.source_value);
      if (!read) {
        return Err{"secret '" + secret.name + "': " + read.error()};
      }
      value = std::move(read).value();
    }
    if (const char* problem = unsendable(value)) {
      wipe(value);
      return Err{"secret '" + secret.name + "' (" + where + ") " + problem};
    }
    if (value.find(secret.placeholder) != std::string::npos) {
      wipe(value);
      return Err{"secret '" + secret.name + "' (" + where +
                 ") contains its own placeholder: the sandbox would hold the secret"};
    }
    secrets.values_[secret.name].assign(value);
    wipe(value);
  }
  std::vector<std::string_view> values;
  values.reserve(secrets.values_.size());
  for (const auto& [name, value] : secrets.values_) {
    values.push_back(value);
  }
  secrets.patterns_ = SecretPatterns::build(values);
  return secrets;
}

SecretValues::~SecretValues() {
  for (auto& [name, value] : values_) {
    wipe(value);
  }
}

std::string_view SecretValues::value(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::string_view() : std::string_view(it->second);
}

}  // namespace sluice::proxy
