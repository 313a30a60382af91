#pragma once
// The states of an HTTP/2 client connection (Http2ServerCodec) and of each of its streams
// (Http2Stream), and the moves between them: the tables their moves obey and ARCHITECTURE.md
// draws (tests/unit/proxy/session/state_diagram_test.cc). A stream is three small machines that
// move on their own events: its request side (the client's HEADERS and DATA), its response side
// (what sluice submits), and its life in nghttp2. A spare stream reused for a new one starts
// each of them over (Http2Stream::open), as a new object would.

#include <array>
#include <cstdint>
#include <string_view>

#include "proxy/session/context/state_table.h"

namespace sluice::proxy::session {

enum class Http2CodecPhase : std::uint8_t {
  Open,
  GoingAway,  // GOAWAY queued: no new stream; those in flight finish (NO_ERROR) or are cut
  Done,       // nghttp2 is over; the connection was told to finish
};

inline constexpr TransitionTable kHttp2ConnectionMachine{
    "h2 connection",
    std::to_array<std::string_view>({"Open", "GoingAway", "Done"}),
    std::to_array<Transition<Http2CodecPhase>>({
        {Http2CodecPhase::Open, Http2CodecPhase::GoingAway,
         "GOAWAY: a drain, a reload that refused a stream, a flood, nghttp2's own error"},
        {Http2CodecPhase::Open, Http2CodecPhase::Done,
         "the client went, or finished: nothing more to read or write"},
        {Http2CodecPhase::GoingAway, Http2CodecPhase::Done,
         "the streams in flight are over, or cut"},
    })};

enum class Http2RequestSide : std::uint8_t {
  HeadPending,  // HEADERS (and CONTINUATION) still coming
  Receiving,    // DATA may come
  Ended,        // END_STREAM received; what is held goes first
  Delivered,    // the exchange has the request's end
  Discarding,   // the response ended first: the rest of the body is dropped
};

inline constexpr TransitionTable kHttp2RequestMachine{
    "h2 request",
    std::to_array<std::string_view>(
        {"HeadPending", "Receiving", "Ended", "Delivered", "Discarding"}),
    std::to_array<Transition<Http2RequestSide>>({
        {Http2RequestSide::HeadPending, Http2RequestSide::Receiving,
         "HEADERS without END_STREAM: DATA may follow"},
        {Http2RequestSide::HeadPending, Http2RequestSide::Ended, "HEADERS with END_STREAM"},
        {Http2RequestSide::Receiving, Http2RequestSide::Ended,
         "END_STREAM, on DATA or trailers"},
        {Http2RequestSide::Receiving, Http2RequestSide::Discarding,
         "answered or cut before the body ended (RFC 9113 §8.1)"},
        {Http2RequestSide::Ended, Http2RequestSide::Delivered,
         "nothing held: the exchange has the end (a WebSocket: its client's close)"},
    })};

enum class Http2ResponseSide : std::uint8_t {
  NotBegun,
  Streaming,  // a head with a body was submitted: DATA follows from the stream's body buffer
  Complete,   // the last byte is in that buffer (or the head had no body)
};

inline constexpr TransitionTable kHttp2ResponseMachine{
    "h2 response",
    std::to_array<std::string_view>({"NotBegun", "Streaming", "Complete"}),
    std::to_array<Transition<Http2ResponseSide>>({
        {Http2ResponseSide::NotBegun, Http2ResponseSide::Streaming,
         "a final head with a body (a WebSocket's 200 too)"},
        {Http2ResponseSide::NotBegun, Http2ResponseSide::Complete,
         "a final head without a body, or the response's end before one"},
        {Http2ResponseSide::Streaming, Http2ResponseSide::Complete,
         "the origin's end, or sluice's own answer whole"},
    })};

enum class Http2StreamLife : std::uint8_t {
  Open,
  Reset,   // sluice reset it (a malformed head, a failure mid-response); nghttp2 closes it next
  Closed,  // nghttp2 closed it, or its client went
};

inline constexpr TransitionTable kHttp2StreamMachine{
    "h2 stream",
    std::to_array<std::string_view>({"Open", "Reset", "Closed"}),
    std::to_array<Transition<Http2StreamLife>>({
        {Http2StreamLife::Open, Http2StreamLife::Reset,
         "RST_STREAM from sluice: malformed, refused, cut mid-response"},
        {Http2StreamLife::Open, Http2StreamLife::Closed,
         "both sides ended, the client's RST_STREAM, or the connection went"},
        {Http2StreamLife::Reset, Http2StreamLife::Closed, "nghttp2 closed it after the reset"},
    })};

}  // namespace sluice::proxy::session
