// Credential brokering on the way out and back (docs/wire.md#credential-brokering): the headers a
// rule injects, and what its answer may bring back: masked (every form of every secret that
// SecretPatterns knows), or refused when it is encoded in a way masking cannot look into.
#include "proxy/runtime/generation.h"
#include "proxy/session/session.h"

namespace sluice::proxy::session {

namespace {

constexpr std::string_view kAcceptEncoding = "Accept-Encoding";

}  // namespace

void Session::injectSecrets() {
  inject_fields_.clear();
  bool rule_sets_accept_encoding = false;
  if (const policy::Rule* rule = exchange_.matched_rule) {
    for (const policy::SecretInjection& injection : rule->inject) {
      inject_fields_.push_back({injection.header, generation_->secrets->value(injection.secret)});
      rule_sets_accept_encoding |= http::ascii::iequals(injection.header, kAcceptEncoding);
    }
  }
  exchange_.injected = !inject_fields_.empty();
  if (exchange_.injected && !rule_sets_accept_encoding) {
    // The answer is masked, and masking cannot see into a compressed body: ask for it
    // uncompressed, in place of what the sandbox asked for (a client that asked for gzip reads
    // identity too, as HTTP allows).
    inject_fields_.push_back({kAcceptEncoding, "identity"});
  }
}

void Session::sendResponseHead(std::string_view head, bool completes_response) {
  if (!response_mask_.active()) {
    if (completes_response) {
      sendClientFinal(head);
    } else {
      sendClient(head);
    }
    return;
  }
  // The head is a text of its own: masked whole, then the mask starts over for the body.
  masked_.clear();
  response_mask_.feed(std::span<const char>(head.data(), head.size()), masked_);
  response_mask_.finish(masked_);
  if (completes_response) {
    sendClientFinal(masked_);
  } else {
    sendClient(masked_);
  }
}

// A content coding (gzip, br, deflate, zstd, an encrypted one...) hides an echoed secret from the
// masking, which reads the bytes as they come. sluice asked for identity, so an answer coded
// anyway is not forwarded: 502 before its head goes out, with upstream_connect, the stable
// reason for an upstream that gave sluice nothing it can forward (as for a malformed answer). A
// bodiless answer (HEAD, 204, 304) hides nothing and passes. Transfer codings other than chunked
// never get here: the response parser refuses them on every response.
bool Session::refuseEncodedResponse(const http::ResponseHead& head) {
  if (!exchange_.injected || head.framing == http::ResponseFraming::None) {
    return false;
  }
  for (std::size_t i = 0; i < head.headers.size(); ++i) {
    if (!http::ascii::iequals(head.headers.name(i), "Content-Encoding")) {
      continue;
    }
    std::string_view list = head.headers.value(i);
    for (;;) {
      const std::size_t comma = list.find(',');
      const std::string_view coding = http::ascii::trimOws(list.substr(0, comma));
      if (!coding.empty() && !http::ascii::iequals(coding, "identity")) {
        // The coding's name is the upstream's text: it stays out of the answer and the log.
        deny(policy::Reason::UpstreamConnect,
             "the upstream answered with a Content-Encoding (compressed or otherwise encoded) "
             "although sluice asked for identity: a secret it echoes could not be masked, so "
             "the answer is not forwarded");
        return true;
      }
      if (comma == std::string_view::npos) {
        break;
      }
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}

}  // namespace sluice::proxy::session
