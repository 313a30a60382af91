#pragma once
// The bytes sluice sends: request heads upstream, response heads to the client, its own error
// answers, and chunk framing. Re-serialise, never forward client bytes: every head is written
// from parsed fields, with hop-by-hop fields dropped and framing written by sluice, so what the
// next hop parses is exactly what sluice checked (docs/wire.md#framing).
//
// Every function appends to `out` (a buffer the caller reuses; nothing else is allocated).

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "proxy/http/header_block.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"

namespace sluice::proxy::http {

// Connection, Keep-Alive, Proxy-Connection, Proxy-Authorization, Proxy-Authenticate, TE,
// Trailer, Transfer-Encoding, Upgrade, HTTP2-Settings (ASCII case-insensitive, '_' read as '-').
// Fields named in a message's Connection field are hop-by-hop too; the writers drop both.
bool isHopByHop(std::string_view name);

// Told each field a forwarded request carries besides Host, framing and upgrade.
class ForwardedFieldVisitor {
 public:
  // `configured`: one of the rule's injected fields (its value from configuration).
  virtual void field(std::string_view name, std::string_view value, bool configured) = 0;

 protected:
  ~ForwardedFieldVisitor() = default;
};

// The fields a forwarded request carries, in both HTTP versions: the client's fields in order
// except those policy::isEndToEndRequestHeader refuses (Host, Content-Length, hop-by-hop,
// Proxy-*, routing and client claims), those its Connection fields name, and any field named in
// `extra` (those are replaced: credential injection, the fields a package's metadata is asked
// for with); then `extra`, less any name isEndToEndRequestHeader refuses (the config loader
// never lets a rule inject one) and any with an empty value (which only removes the client's:
// docs/packages.md#metadata drops its conditionals so).
void visitForwardedFields(const RequestHead& head, std::span<const HeaderField> extra,
                          ForwardedFieldVisitor& visitor);

// The fields of the sandbox's request trailers an origin gets, in order: those
// policy::isForwardableRequestTrailer allows, less any named in `extra` (the rule's injected
// fields: nothing of the sandbox's may sit beside an injected secret). Never `extra` itself: a
// secret goes in the head only (docs/wire.md#request-trailers).
void visitForwardedTrailers(const HeaderBlock& trailers, std::span<const HeaderField> extra,
                            ForwardedFieldVisitor& visitor);

// "METHOD origin_target HTTP/1.1", then "Host: host_value", then the client's fields in order
// except those policy::isEndToEndRequestHeader refuses (Host, Content-Length, hop-by-hop,
// Proxy-*, routing and client claims), those its Connection fields name, and any field named in
// `extra` (those are replaced: credential injection), then `extra` (less any name
// isEndToEndRequestHeader refuses, which the config loader never lets a rule inject, and any
// with an empty value: visitForwardedFields), then the
// framing of head.framing
// ("Content-Length: n", also for 0 when the client sent it; "Transfer-Encoding: chunked"; or
// nothing), then the empty line. `origin_target` is normally head.origin_target; it must not
// contain SP or control characters. In host_value and `extra` (which come from configuration),
// bytes a field value cannot hold are left out, and a field whose name is not a token is
// skipped: nothing can inject a header. With `upgrade` WebSocket (a rule allowed the upgrade
// the request asked for) sluice writes "Connection: Upgrade" and "Upgrade: websocket" itself
// before the empty line: the only upgrade it ever forwards (docs/wire.md#websocket).
void writeRequestHead(std::string& out, const RequestHead& head, std::string_view origin_target,
                      std::string_view host_value, std::span<const HeaderField> extra,
                      Upgrade upgrade = Upgrade::None);

// "HTTP/1.1 status reason", the upstream's end-to-end fields (hop-by-hop ones, Content-Length
// dropped), framing as the caller chose: ContentLength writes head.content_length; Chunked and
// UntilClose write "Transfer-Encoding: chunked" (an until-close body is re-chunked); None
// writes nothing; Switched (a 101 to websocket) writes "Connection: Upgrade" and "Upgrade:
// websocket". Then "Connection: close" when `close` (never after Switched), and the empty line.
void writeResponseHead(std::string& out, const ResponseHead& head, ResponseFraming to_client,
                       bool close);

// sluice's own answers (403, 400, 431, 502, 504): the status line, `headers` (Sluice-Reason,
// Proxy-Status...), Content-Type: text/plain, Cache-Control: no-store, Content-Length,
// "Connection: close" when `close`, the empty line, and `body_line` plus "\n" as the body (no
// body when it is empty). Bytes a field value or a line cannot hold are left out.
void writeErrorResponse(std::string& out, int status, std::string_view reason_phrase,
                        std::span<const HeaderField> headers, std::string_view body_line,
                        bool close);

// Chunked framing, so the caller can send body bytes without copying them:
//   appendChunkHeader(out, n); send(out); send(data); send(kChunkEnd); ... send(kLastChunk)
// `size` must not be 0 (a zero-size chunk ends the body: that is kLastChunk).
void appendChunkHeader(std::string& out, std::size_t size);
inline constexpr std::string_view kChunkEnd = "\r\n";
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
// The last chunk with a trailer section: `trailers` less the fields no trailer may carry
// (hop-by-hop and framing fields, names that are not tokens; bytes a value cannot hold left out).
void writeLastChunk(std::string& out, const HeaderBlock& trailers);
// The last chunk of a request body: the trailer fields visitForwardedTrailers() passes (bytes a
// value cannot hold left out).
void writeRequestLastChunk(std::string& out, const HeaderBlock& trailers,
                           std::span<const HeaderField> extra);
// Header, data and CRLF in one go; nothing for empty data.
void writeChunk(std::string& out, std::span<const char> data);

}  // namespace sluice::proxy::http
