#pragma once
// The values of the config's secrets (docs/configuration.md#secrets), read by sluice at start from
// an environment variable or a file; the sandbox only ever holds the placeholders. A secret
// that is missing, empty, or not sendable as a header value is an error naming the secret and
// where it was looked for, never an empty header.
//
// The values live only here (with their encoded forms, for masking, and, for the moment of a
// request, in the buffers that carry that request's head, which the session wipes): they are
// wiped when this object goes away, never logged, never formatted into an error.

#include <map>
#include <string>
#include <string_view>

#include "base/result.h"
#include "policy/config.h"
#include "proxy/secrets/secret_patterns.h"

namespace sluice::proxy {

class SecretValues {
 public:
  static Result<SecretValues, std::string> load(const policy::Config& config);

  SecretValues() = default;
  SecretValues(SecretValues&&) = default;
  SecretValues& operator=(SecretValues&&) = default;
  SecretValues(const SecretValues&) = delete;
  SecretValues& operator=(const SecretValues&) = delete;
  ~SecretValues();

  // The value of the secret `name`; empty for a name the config does not define.
  std::string_view value(std::string_view name) const;
  std::size_t size() const { return values_.size(); }
  // Every form in which the values could come back in a response, compiled once here (at start
  // and at each reload) for every session's response masking.
  const SecretPatterns& patterns() const { return patterns_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
  SecretPatterns patterns_;
};

}  // namespace sluice::proxy
