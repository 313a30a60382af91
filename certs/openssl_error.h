#pragma once
// The thread's OpenSSL error queue, drained: the one way certs/ and proxy/tls/ turn an OpenSSL
// failure into text. Draining matters beyond the message: the queue is per thread, and a stale
// entry would later be misread by SSL_get_error() on some unrelated connection.

#include <string>
#include <string_view>

#include "base/result.h"

namespace sluice::certs {

// Drains the queue into one line ("...; ..."), or a fixed text when it was empty.
std::string drainOpensslErrors();

// `what` and the drained queue: "what (OpenSSL: ...)".
Err<std::string> opensslFailure(std::string_view what);

}  // namespace sluice::certs
