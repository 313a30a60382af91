#include "proxy/http/head_writer.h"

#include <charconv>
#include <cstdint>

#include "policy/request_header.h"
#include "proxy/http/nominated_fields.h"
#include "proxy/http/status_phrase.h"

namespace sluice::proxy::http {
namespace {

static_assert(detail::NominatedFields::kInlineFields >= kDefaultMaxFields,
              "a head the parsers accept is handled without allocating");

void appendDecimal(std::string& out, std::uint64_t value) {
  char digits[20];  // every uint64
  const auto written = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, written.ptr);
}

// Appends what a field value (or a text line) may hold: everything but CR, LF, NUL and the
// other control characters (HTAB stays).
void appendClean(std::string& out, std::string_view text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7f) || c == '\t') {
      out.push_back(c);
    }
  }
}

std::size_t cleanLength(std::string_view text) {
  std::size_t n = 0;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7f) || c == '\t') {
      ++n;
    }
  }
  return n;
}

void appendField(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append(": ");
  out.append(value);
  out.append("\r\n");
}

void appendCleanField(std::string& out, std::string_view name, std::string_view value) {
  if (!ascii::isToken(name)) {
    return;
  }
  out.append(name);
  out.append(": ");
  appendClean(out, value);
  out.append("\r\n");
}

// A field the sandbox sent that the rule's `extra` fields replace. Compared as the drop table
// compares (case-insensitive, '_' for '-'): an origin behind CGI would read "X_Api_Key" and
// "x-api-key" as one field.
constexpr std::string_view kWebSocketUpgradeFields =
    "Connection: Upgrade\r\nUpgrade: websocket\r\n";

bool isReplaced(std::span<const HeaderField> extra, std::string_view name) {
  for (const HeaderField& field : extra) {
    if (policy::sameRequestHeaderName(field.name, name)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool isHopByHop(std::string_view name) {
  return policy::classifyRequestHeader(name) == policy::RequestHeaderClass::HopByHop;
}

void visitForwardedFields(const RequestHead& head, std::span<const HeaderField> extra,
                          ForwardedFieldVisitor& visitor) {
  const HeaderBlock& headers = head.headers;
  const detail::NominatedFields nominated(headers);
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const std::string_view name = headers.name(i);
    if (!policy::isEndToEndRequestHeader(name) || nominated.contains(i) ||
        isReplaced(extra, name)) {
      continue;
    }
    visitor.field(name, headers.value(i), false);
  }
  for (const HeaderField& field : extra) {
    // An empty value only removes the client's field: no secret is empty (the loader and
    // SecretValues refuse one), so only sluice's own removals have one.
    if (!field.value.empty() && policy::isEndToEndRequestHeader(field.name)) {
      visitor.field(field.name, field.value, true);
    }
  }
}

void visitForwardedTrailers(const HeaderBlock& trailers, std::span<const HeaderField> extra,
                            ForwardedFieldVisitor& visitor) {
  for (std::size_t i = 0; i < trailers.size(); ++i) {
    const std::string_view name = trailers.name(i);
    if (policy::isForwardableRequestTrailer(name) && !isReplaced(extra, name)) {
      visitor.field(name, trailers.value(i), false);
    }
  }
}

void writeRequestHead(std::string& out, const RequestHead& head, std::string_view origin_target,
                      std::string_view host_value, std::span<const HeaderField> extra,
                      Upgrade upgrade) {
  out.append(head.method);
  out.push_back(' ');
  out.append(origin_target);
  out.append(" HTTP/1.1\r\n");
  out.append("Host: ");
  appendClean(out, host_value);
  out.append("\r\n");

  struct Writer final : ForwardedFieldVisitor {
    explicit Writer(std::string& o) : out(o) {}
    void field(std::string_view name, std::string_view value, bool configured) override {
      if (configured) {
        appendCleanField(out, name, value);
      } else {
        appendField(out, name, value);
      }
    }
    std::string& out;
  } writer(out);
  visitForwardedFields(head, extra, writer);
  switch (head.framing) {
    case BodyFraming::ContentLength:
      out.append("Content-Length: ");
      appendDecimal(out, head.content_length);
      out.append("\r\n");
      break;
    case BodyFraming::Chunked:
      out.append("Transfer-Encoding: chunked\r\n");
      break;
    case BodyFraming::None:
      break;
  }
  if (upgrade == Upgrade::WebSocket) {
    out.append(kWebSocketUpgradeFields);
  }
  out.append("\r\n");
}

void writeResponseHead(std::string& out, const ResponseHead& head, ResponseFraming to_client,
                       bool close) {
  out.append("HTTP/1.1 ");
  appendDecimal(out, static_cast<std::uint64_t>(head.status < 0 ? 0 : head.status));
  out.push_back(' ');
  // An HTTP/2 origin sends no phrase (nor may an HTTP/1.1 one): the status's own name then.
  appendClean(out, head.reason.empty() ? statusPhrase(head.status) : head.reason);
  out.append("\r\n");

  const HeaderBlock& headers = head.headers;
  const detail::NominatedFields nominated(headers);
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const std::string_view name = headers.name(i);
    if (ascii::iequals(name, "Content-Length") || isHopByHop(name) || nominated.contains(i)) {
      continue;
    }
    appendField(out, name, headers.value(i));
  }
  switch (to_client) {
    case ResponseFraming::ContentLength:
      out.append("Content-Length: ");
      appendDecimal(out, head.content_length);
      out.append("\r\n");
      break;
    case ResponseFraming::Chunked:
    case ResponseFraming::UntilClose:
      out.append("Transfer-Encoding: chunked\r\n");
      break;
    case ResponseFraming::Switched:
      out.append(kWebSocketUpgradeFields);
      close = false;  // the connection is the WebSocket's now
      break;
    case ResponseFraming::None:
      break;
  }
  if (close) {
    out.append("Connection: close\r\n");
  }
  out.append("\r\n");
}

void writeErrorResponse(std::string& out, int status, std::string_view reason_phrase,
                        std::span<const HeaderField> headers, std::string_view body_line,
                        bool close) {
  out.append("HTTP/1.1 ");
  appendDecimal(out, static_cast<std::uint64_t>(status < 0 ? 0 : status));
  out.push_back(' ');
  appendClean(out, reason_phrase);
  out.append("\r\n");
  for (const HeaderField& field : headers) {
    appendCleanField(out, field.name, field.value);
  }
  const std::size_t body_length = body_line.empty() ? 0 : cleanLength(body_line) + 1;
  out.append("Content-Type: text/plain\r\nCache-Control: no-store\r\nContent-Length: ");
  appendDecimal(out, body_length);
  out.append("\r\n");
  if (close) {
    out.append("Connection: close\r\n");
  }
  out.append("\r\n");
  if (!body_line.empty()) {
    appendClean(out, body_line);
    out.push_back('\n');
  }
}

void writeLastChunk(std::string& out, const HeaderBlock& trailers) {
  out.append("0\r\n");
  for (std::size_t i = 0; i < trailers.size(); ++i) {
    const std::string_view name = trailers.name(i);
    if (isHopByHop(name) || ascii::iequals(name, "Content-Length") ||
        ascii::iequals(name, "Host")) {
      continue;
    }
    appendCleanField(out, name, trailers.value(i));
  }
  out.append("\r\n");
}

void writeRequestLastChunk(std::string& out, const HeaderBlock& trailers,
                           std::span<const HeaderField> extra) {
  struct Writer final : ForwardedFieldVisitor {
    explicit Writer(std::string& o) : out(o) {}
    void field(std::string_view name, std::string_view value, bool) override {
      appendCleanField(out, name, value);
    }
    std::string& out;
  } writer(out);
  out.append("0\r\n");
  visitForwardedTrailers(trailers, extra, writer);
  out.append("\r\n");
}

void appendChunkHeader(std::string& out, std::size_t size) {
  constexpr std::string_view kHex = "0123456789abcdef";
  char digits[16];
  std::size_t n = 0;
  do {
    digits[n++] = kHex[size & 0xf];
    size >>= 4;
  } while (size != 0);
  while (n > 0) {
    out.push_back(digits[--n]);
  }
  out.append("\r\n");
}

void writeChunk(std::string& out, std::span<const char> data) {
  if (data.empty()) {
    return;
  }
  appendChunkHeader(out, data.size());
  out.append(data.data(), data.size());
  out.append(kChunkEnd);
}

}  // namespace sluice::proxy::http
