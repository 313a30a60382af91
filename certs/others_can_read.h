#pragma once
// Whether a user other than sluice's can open a file (the sandbox CA's ca.pem and ca.p12): a
// sandbox's clients may run as another user (apt's https method runs as _apt; an agent's
// non-root user), and a CA certificate they cannot open fails them with a message that points
// the wrong way ("unable to get local issuer certificate"). Reads the modes only (stat); the
// caller says so at start and in `sluice env` (docs/cli.md#sluice-env).

#include <optional>
#include <string>

namespace sluice::certs {

// Null when a user who is neither the owner nor in the group of any directory on the way can
// open `path`: every directory above it searchable by others (o+x), the file readable by them
// (o+r). Else why not, naming the first that stops them: "/root is mode 0700". A path that
// cannot be examined says that.
std::optional<std::string> whyOthersCannotRead(const std::string& path);

}  // namespace sluice::certs
