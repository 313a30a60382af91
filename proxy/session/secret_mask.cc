#include "proxy/session/secret_mask.h"

#include <algorithm>
#include <cstring>

namespace sluice::proxy::session {

void maskSecrets(std::span<char> text, std::span<const std::string_view> secrets) {
  std::string_view view(text.data(), text.size());
  for (std::string_view secret : secrets) {
    if (secret.empty()) {
      continue;
    }
    for (std::size_t at = view.find(secret); at != std::string_view::npos;
         at = view.find(secret, at + secret.size())) {
      std::memset(text.data() + at, '*', secret.size());
    }
  }
}

void SecretMask::reset(std::span<const std::string_view> secrets) {
  secrets_.assign(secrets.begin(), secrets.end());
  keep_ = 0;
  for (std::string_view s : secrets_) {
    keep_ = std::max(keep_, s.empty() ? 0 : s.size() - 1);
  }
  pending_.clear();
}

void SecretMask::feed(std::span<const char> in, std::string& out) {
  pending_.append(in.data(), in.size());
  maskSecrets(std::span<char>(pending_.data(), pending_.size()), secrets_);
  // An occurrence cut by the end of this piece has at most keep_ of its bytes here, all in
  // the tail: hold the tail back until the next piece completes (or clears) it.
  std::size_t send = pending_.size() > keep_ ? pending_.size() - keep_ : 0;
  out.append(pending_.data(), send);
  pending_.erase(0, send);
}

void SecretMask::finish(std::string& out) {
  out += pending_;
  pending_.clear();
}

}  // namespace sluice::proxy::session
