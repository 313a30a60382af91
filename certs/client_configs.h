#pragma once
// The CA for two clients that read no CA variable (docs/cli.md#clients-the-variables-do-not-reach):
// GnuTLS wget reads a wgetrc (WGETRC), apt's https method its configuration (APT_CONFIG). sluice
// writes both beside ca.pem, naming it, so that `sluice env` can point the variables at them and
// those clients trust sluice with no flag.

#include <string>
#include <string_view>

#include "base/result.h"

namespace sluice::certs {

inline constexpr std::string_view kWgetrcFile = "wgetrc";
inline constexpr std::string_view kAptConfFile = "apt.conf";

// The two files' contents for `ca_pem` (an absolute path); an error for a path they cannot
// carry (a double quote, a backslash or a control character).
Result<std::string, std::string> wgetrcFor(std::string_view ca_pem);
Result<std::string, std::string> aptConfFor(std::string_view ca_pem);

// Writes DIR/wgetrc and DIR/apt.conf for `ca_pem`, each only when missing or different, whole
// (public_file.h), mode 0644. True if either was written.
Result<bool, std::string> writeClientConfigs(const std::string& dir, const std::string& ca_pem);

}  // namespace sluice::certs
