#pragma once
// The response of one HTTP/2 stream to an origin, as sluice passes it on: the fields of each
// HEADERS block in (as nghttp2's client session hands them over, HPACK decoded and checked
// against RFC 9113 §8.1-8.3), the ResponseHead an HTTP/1.1 origin's parser would have given
// out, so the exchange and both client codecs treat the two origins alike
// (docs/wire.md#http2-toward-origins).
//
// A response is 1xx heads (Interim), then the final head (Final), then, after its DATA, at most
// one block of trailers (Trailers). The final head's framing is what a client codec needs:
// None for a HEAD's answer, 204 and 304; ContentLength when the origin sent a content-length
// or when the head itself ended the stream (no body: gRPC's trailers-only answer among them,
// Content-Length 0 to an HTTP/1.1 client, one HEADERS frame that ends the stream to an HTTP/2
// one); otherwise Chunked (the body ends with the stream). Each block is bounded by
// `max_header_bytes` (names, values and 32 bytes a field: RFC 9113 §6.5.2).
//
// Storage is the builder's and reused: nothing is allocated per response once it has grown.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "proxy/http/header_block.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"

namespace sluice::proxy::http {

class Http2ResponseBuilder {
 public:
  // What a HEADERS block was.
  enum class Block : std::uint8_t {
    Interim,   // a 1xx: head() until the next block begins
    Final,     // the response head: head()
    Trailers,  // trailers(), after the body
    Invalid,   // a block after the trailers, or a head without a status: the stream fails
  };

  void setMaxListBytes(std::size_t bytes) { max_list_bytes_ = bytes; }
  // A new response, to a request whose method was HEAD or not. Keeps the storage.
  void reset(bool head_request);
  // One field of the block being received. False: the block is over max_header_bytes (the
  // stream is reset; the origin sent more than sluice asked for in SETTINGS).
  bool add(std::string_view name, std::string_view value);
  // The block ended (`end_stream`: its frame ended the stream).
  Block finish(bool end_stream);

  const ResponseHead& head() const { return head_; }
  // The trailer fields, once a Trailers block ended (null before, and when none came).
  const HeaderBlock* trailers() const { return phase_ == Phase::Done ? &trailers_ : nullptr; }

 private:
  enum class Phase : std::uint8_t {
    AwaitingHead,  // nothing yet, or 1xx heads only
    Body,          // the final head came: DATA, then perhaps trailers
    Trailers,      // a block after the final head is being received
    Done,          // the trailers ended
  };

  ResponseHead head_;
  HeaderBlock trailers_;
  Phase phase_ = Phase::AwaitingHead;
  bool head_request_ = false;
  bool status_seen_ = false;
  bool block_open_ = false;  // a block's first field came, its end not yet
  std::size_t list_bytes_ = 0;  // of the block being received
  std::size_t max_list_bytes_ = kDefaultMaxHeadBytes;
};

}  // namespace sluice::proxy::http
