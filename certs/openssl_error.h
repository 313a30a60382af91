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

// Empties the queue before an SSL call whose outcome SSL_get_error() will judge, so that an
// error on it afterwards is that call's own, never a stale one left by other work on this thread
// (a leaf minted, an upstream's certificate refused, another connection's failure). The
// invariant: when the call starts, ERR_peek_error() is 0. SSL_get_error() reads the queue only
// through ERR_peek_error(), the code of the oldest entry once the lazily cleared ones are
// dropped, and no code OpenSSL's libraries queue is 0 (ERR_PACK of a library number, or
// ERR_SYSTEM_FLAG), so 0 there means the queue is empty: nothing to clear. ERR_clear_error(),
// which walks all 16 slots whatever they hold, runs only when something is queued; a read or
// write per request on each leg nearly always finds the queue empty.
void clearOpensslErrors();

}  // namespace sluice::certs
