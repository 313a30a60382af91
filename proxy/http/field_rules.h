#pragma once
// Field and target rules shared by RequestParser and ResponseParser (internal to proxy/http/).
// llhttp 8.1 checks some of these itself; they are checked again here so that what sluice
// forwards never depends on a parser it does not control (and so each has its own test row).

#include <cstdint>
#include <string_view>

#include "proxy/http/header_block.h"

namespace sluice::proxy::http::detail {

struct BodyFields {
  bool has_content_length = false;
  std::uint64_t content_length = 0;
  bool chunked = false;  // exactly one "Transfer-Encoding: chunked"
};

// Every field name a token, every value a field-value; Content-Length 1*DIGIT, at most
// 2^63-1, not repeated; Transfer-Encoding exactly one field "chunked", never on HTTP/1.0,
// never with Content-Length. Returns nullptr, or why the head is refused.
const char* checkFields(const HeaderBlock& headers, bool http10, BodyFields& out);

// 1*DIGIT with a value of at most 2^63-1.
bool parseContentLength(std::string_view text, std::uint64_t& out);

// The tokens of every Connection field that matter to framing.
struct ConnectionOptions {
  bool close = false;
  bool keep_alive = false;
};
ConnectionOptions connectionOptions(const HeaderBlock& headers);

// "host[:port]" as a request target carries it: host a reg-name, an IPv4 address or a
// bracketed IP literal; no userinfo; port 1-5 digits, no leading zero, 1-65535 (the same rule
// as policy::parsePort, so the port checked is the port dialled).
bool isAuthority(std::string_view text, bool port_required);

}  // namespace sluice::proxy::http::detail
