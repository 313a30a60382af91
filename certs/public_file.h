#pragma once
// The CA's public files beside ca.pem (ca.p12, wgetrc, apt.conf): read back to see whether they
// are current, and replaced whole, so that a reader (a sandbox's orchestrator copying them, a
// client starting) sees the old file or the new one, never half of one.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace sluice::certs {

// Every file of this kind is 0644: the sandbox's clients, of any user, read it.
inline constexpr unsigned kPublicFileMode = 0644;

// Up to `max` + 1 bytes of `path` (more than `max` means: not one of ours).
Result<std::string, std::string> readSmallFile(const std::string& path, std::size_t max);

// Writes `bytes` to a temporary file in `dir`, mode kPublicFileMode, synced, then renames it
// over DIR/`name`.
Result<Ok, std::string> replaceFile(const std::string& dir, std::string_view name,
                                    std::string_view bytes);

}  // namespace sluice::certs
