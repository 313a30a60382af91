#pragma once
// An exchange's response on its way to the client, through its Downstream: masked when the
// exchange injected a secret (an upstream that echoes the request must not hand the sandbox the
// secret, in any form the masking knows: docs/wire.md#what-masking-catches-and-what-it-does-not),
// and with its last bytes marked as such (the last bytes of a Content-Length body complete the
// response, and wait for its record). The head is masked as a text of its own; the body as one
// stream, so an occurrence cut across two reads is caught.

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "proxy/http/response_parser.h"
#include "proxy/session/exchange/downstream.h"
#include "proxy/session/exchange/secret_mask.h"

namespace sluice::proxy::session {

class ResponseRelay {
 public:
  explicit ResponseRelay(Downstream& downstream) : downstream_(downstream) {}
  ResponseRelay(const ResponseRelay&) = delete;
  ResponseRelay& operator=(const ResponseRelay&) = delete;

  // A 1xx, or the final head; `patterns`: the secrets to mask (null: nothing to mask).
  void interimHead(const http::ResponseHead& head, const SecretPatterns* patterns);
  void head(const http::ResponseHead& head, const SecretPatterns* patterns);
  // Body bytes; `received`: how many the body has had, these included.
  void body(std::span<const char> data, std::uint64_t received);
  // The response is over: what masking held back, then its end in the client's framing, with
  // the origin's trailers (null: none). A masked response's trailers are dropped: they are the
  // origin's text, and a secret echoed there would be out of the masking's reach.
  void end(const http::HeaderBlock* trailers = nullptr);

 private:
  void send(std::span<const char> data, bool completes_response);

  Downstream& downstream_;
  SecretMask mask_;
  std::string masked_;  // a body piece after masking; reused
  // The Content-Length of the body, when it has one: its last bytes complete the response.
  std::optional<std::uint64_t> length_;
};

}  // namespace sluice::proxy::session
