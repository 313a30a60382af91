#pragma once
// The states of an HTTP/2 session toward an origin (Http2UpstreamSession) and of each stream on
// it (Http2UpstreamStream: its request going out, its response coming in), and the moves between
// them: the tables their moves obey and ARCHITECTURE.md draws
// (tests/unit/proxy/session/state_diagram_test.cc). A stream attached to a new exchange starts
// both of its machines over (Http2UpstreamStream::attachTo), as a new object would.

#include <array>
#include <cstdint>
#include <string_view>

#include "proxy/session/context/state_table.h"

namespace sluice::proxy::session {

enum class OriginSessionPhase : std::uint8_t {
  Open,       // takes new streams (up to the origin's and sluice's limits)
  GoingAway,  // no new stream; those in flight finish
  Ended,      // its streams were told; the connection goes to the pool to close
};

inline constexpr TransitionTable kOriginSessionMachine{
    "h2 origin session",
    std::to_array<std::string_view>({"Open", "GoingAway", "Ended"}),
    std::to_array<Transition<OriginSessionPhase>>({
        {OriginSessionPhase::Open, OriginSessionPhase::GoingAway,
         "the origin's GOAWAY, or a reload made its key unusable while streams are on it"},
        {OriginSessionPhase::Open, OriginSessionPhase::Ended,
         "the origin closed or failed; evicted or expired idle; sluice stops"},
        {OriginSessionPhase::GoingAway, OriginSessionPhase::Ended,
         "no stream left, or the origin closed or failed"},
    })};

enum class OriginRequest : std::uint8_t {
  Head,    // nothing submitted yet
  Body,    // HEADERS submitted; DATA follows from the exchange
  Ending,  // the exchange sent the end: nghttp2 has not taken the last bytes yet
  Sent,    // END_STREAM went, or is queued
};

inline constexpr TransitionTable kOriginRequestMachine{
    "h2 origin request",
    std::to_array<std::string_view>({"Head", "Body", "Ending", "Sent"}),
    std::to_array<Transition<OriginRequest>>({
        {OriginRequest::Head, OriginRequest::Body, "a head with a body"},
        {OriginRequest::Head, OriginRequest::Sent, "a head without a body: its HEADERS end it"},
        {OriginRequest::Body, OriginRequest::Ending, "the exchange sent the request's end"},
        {OriginRequest::Ending, OriginRequest::Sent, "nghttp2 took the last bytes: END_STREAM"},
    })};

enum class OriginResponse : std::uint8_t {
  AwaitingHead,  // nothing, or 1xx heads only
  Body,          // the final head came: DATA (and perhaps trailers) may follow
  Complete,      // END_STREAM
  Failed,        // reset, malformed, or its session ended
};

inline constexpr TransitionTable kOriginResponseMachine{
    "h2 origin response",
    std::to_array<std::string_view>({"AwaitingHead", "Body", "Complete", "Failed"}),
    std::to_array<Transition<OriginResponse>>({
        {OriginResponse::AwaitingHead, OriginResponse::Body, "the final head"},
        {OriginResponse::AwaitingHead, OriginResponse::Failed,
         "reset or refused, a head out of place or over max_header_bytes, the session ended"},
        {OriginResponse::Body, OriginResponse::Complete, "END_STREAM, on DATA or trailers"},
        {OriginResponse::Body, OriginResponse::Failed,
         "reset, a block out of place or too large, the session ended"},
    })};

}  // namespace sluice::proxy::session
