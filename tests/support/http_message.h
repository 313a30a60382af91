#pragma once
// HTTP/1.1 messages as a test peer reads them: just enough framing (Content-Length, chunked) to
// cut a byte stream into messages and look at their heads and bodies. Written here, not taken
// from sluice's parser, so a test does not read sluice's output with sluice's own eyes.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::test_support {

struct HttpMessage {
  std::string start_line;
  int status = 0;      // a response's
  std::string method;  // a request's
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // chunked framing removed
  bool chunked = false;

  // The first field of that name (case-insensitive), or nullopt.
  std::optional<std::string> header(std::string_view name) const;
};

inline constexpr std::size_t kMalformed = static_cast<std::size_t>(-1);

// One complete message at the start of `bytes`: the bytes it took, 0 while it is incomplete,
// kMalformed when it cannot be framed. `bodiless`: a response to HEAD. A response with neither
// Content-Length nor chunked framing (until close) counts as incomplete: sluice never sends one.
std::size_t parseHttpMessage(std::string_view bytes, bool is_response, bool bodiless,
                             HttpMessage& out);

}  // namespace sluice::test_support
