#pragma once
// The request of one HTTP/2 stream, as sluice decides and forwards it: its header fields in (as
// nghttp2 hands them over, one at a time, HPACK already decoded), a RequestHead out, the same
// model an HTTP/1.1 request is decided and written upstream with (docs/wire.md#http2).
//
// nghttp2 already refuses what RFC 9113 §8.1–8.3 calls malformed (it resets the stream). The
// same rules are checked again here on every field, so that nothing malformed is ever
// translated whatever nghttp2's version or options: an upper-case or non-token name; CR, LF or
// NUL in a value, or whitespace around it; a connection-specific field (Connection,
// Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade); `te` other than "trailers"; a
// pseudo-header after a regular field, repeated, unknown, or missing; a content-length that is
// not digits or repeats with another value; two `host` fields that name different authorities.
// Those are Malformed: the stream is reset.
//
// A well-formed request that cannot be forwarded on this connection is a Refusal, answered
// on the stream (403/400 with the reason): `:scheme` other than https, CONNECT without a
// protocol or with one other than websocket, no `:authority` and no `host`, a `host` that
// names another authority than `:authority` (policy::sameAuthority: the host canonicalised,
// an absent port 443; one that does not parse names another).
//
// An extended CONNECT for websocket (RFC 8441) is the WebSocket upgrade HTTP/1.1 spells as a GET
// with `Upgrade: websocket`, and is one to everything after the builder: method GET, the path as
// its target, websocket_upgrade, no body (its DATA are the WebSocket's bytes once the origin
// accepted: docs/wire.md#websocket). The policy then decides the two forms alike.
//
// `:authority` is the Host (docs/wire.md#the-invariant, 3): the head's `host` is it, and a `host`
// field beside it is checked and dropped. Cookie fields are joined with "; " (RFC 9113 §8.2.3), as
// an HTTP/1.1 origin expects them.
//
// Storage is the builder's and reused: nothing is allocated per request once it has grown.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/reason.h"
#include "proxy/http/header_block.h"
#include "proxy/http/request_parser.h"

namespace sluice::proxy::http {

struct Http2Refusal {
  policy::Reason reason = policy::Reason::BadRequest;
  std::string_view detail;  // static text
};

class Http2RequestBuilder {
 public:
  // How a stream's head ended.
  enum class Outcome : std::uint8_t {
    Ready,      // head() is the request
    Refused,    // refusal() says why; answered on the stream
    Malformed,  // a stream error (RST_STREAM PROTOCOL_ERROR); never translated
  };

  // The header list's bound (RFC 9113 §6.5.2: names, values and 32 bytes a field), from
  // `max_header_bytes`; a list over it is refused 431 header_too_large.
  void setMaxListBytes(std::size_t bytes) { max_list_bytes_ = bytes; }
  // Forgets the previous request; keeps the storage.
  void reset();
  // One field as decoded. False: the head is malformed (stop feeding; finish() says so).
  bool add(std::string_view name, std::string_view value);
  // The head is complete; `end_stream`: the HEADERS frame ended the stream (no body).
  Outcome finish(bool end_stream);

  const RequestHead& head() const { return head_; }

  // How the stream's trailer section (a HEADERS block after the head, which ends the stream)
  // stands: none came, it is whole, over the list bound (the same bound as the head's), or
  // malformed (a pseudo-header, or a field RFC 9113 §8.2 refuses).
  enum class Trailers : std::uint8_t { None, Ready, TooLarge, Malformed };
  // One trailer field as decoded. False: the section is malformed (stop feeding).
  bool addTrailer(std::string_view name, std::string_view value);
  Trailers trailersState() const { return trailers_state_; }
  // The fields of a Ready section (docs/wire.md#request-trailers says which go on).
  const HeaderBlock& trailers() const { return trailers_; }
  // The head is an extended CONNECT (RFC 8441): the stream is a WebSocket once accepted.
  bool extendedConnect() const { return head_.websocket_upgrade; }
  const Http2Refusal& refusal() const { return refusal_; }
  // What the head showed, for the record of a refusal: the method, :path and :authority (empty
  // when absent).
  std::string_view method() const { return text(method_); }
  std::string_view path() const { return text(path_); }
  std::string_view authority() const { return text(authority_); }
  std::string_view protocol() const { return text(protocol_); }
  // Whether the request is gRPC (a content-type of "application/grpc", alone or followed by "+"
  // or parameters, in any case): its refusals are gRPC statuses (docs/wire.md#grpc).
  bool grpc() const { return grpc_; }
  // Why the head, or else the trailer section, is malformed.
  std::string_view malformation() const { return malformed_; }

 private:
  // A view of bytes_ kept by offset (bytes_ may move as it grows).
  struct Slice {
    std::size_t offset = 0;
    std::size_t length = 0;
    bool present = false;
  };
  std::string_view text(const Slice& s) const {
    return std::string_view(bytes_).substr(s.offset, s.length);
  }
  Slice keep(std::string_view value);
  bool addPseudo(std::string_view name, std::string_view value);
  bool malformed(std::string_view why);

  std::string bytes_;  // pseudo-header values, the host field, the joined cookie
  Slice method_, scheme_, authority_, path_, protocol_, host_field_;
  std::string cookie_;
  bool regular_seen_ = false;
  std::size_t list_bytes_ = 0;
  std::size_t max_list_bytes_ = kDefaultMaxHeadBytes;
  bool grpc_ = false;
  std::optional<std::uint64_t> content_length_;
  std::string_view malformed_;
  RequestHead head_;
  Http2Refusal refusal_;
  HeaderBlock trailers_;
  std::size_t trailer_bytes_ = 0;
  Trailers trailers_state_ = Trailers::None;
};

// RFC 9113 §8.2.1-8.2.2 for one field: a lower-case token name (or a known pseudo-header name)
// and a value without CR, LF, NUL or surrounding whitespace, not connection-specific, `te` only
// "trailers". Null, or why it is malformed. Also used for the fields sluice writes (responses,
// trailers): an origin's field that fails it is not passed on.
const char* http2FieldProblem(std::string_view name, std::string_view value);

}  // namespace sluice::proxy::http
