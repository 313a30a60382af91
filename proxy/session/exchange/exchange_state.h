#pragma once
// The states of one exchange (one request, from its head to its audit record) and the moves
// between them: the one table that Exchange::transition() obeys and ARCHITECTURE.md draws.
// An exchange knows nothing of how its request was framed; the request side and the response
// side each progress on their own, and the states name the combinations that can happen.
// Complete, Denied and Failed are where its record has been written; the object is then at rest
// until it is reused for the next request (an HTTP/1.1 connection keeps one).

#include <array>
#include <cstdint>
#include <string_view>

#include "proxy/session/context/state_table.h"

namespace sluice::proxy::session {

enum class ExchangeState : std::uint8_t {
  Idle,                    // no request yet
  Deciding,                // the head is being decided on
  HoldingBody,             // secrets configured: the body's first 64 KiB read before dialling
  AwaitingUpstream,        // the connector resolves, dials and handshakes, or reuses one
  SendingRequest,          // head written upstream; the body still flows; no answer yet
  AwaitingResponse,        // the request is complete upstream; no response head yet
  RespondingWhileSending,  // the response head went out before the request's end
  HoldingResponse,         // a package's metadata: the 200's body is held whole, to be
                           // filtered; nothing of it went to the client yet
  Responding,              // the request is complete; the response flows to the client
  FinishingRequest,        // the upstream's close ended the response; the request body is
                           // read to its end and dropped
  Tunneling,               // the origin switched to the WebSocket a rule allowed (101): bytes
                           // are relayed both ways until the origin closes
  Complete,                // both complete: record written
  Denied,                  // sluice's own answer (or the reason it ended early): record written
  Failed,                  // cut short after its answer began, or the connection closed under
                           // it: record written with what was sent
};

inline constexpr TransitionTable kExchangeMachine{
    "exchange",
    std::to_array<std::string_view>({"Idle", "Deciding", "HoldingBody", "AwaitingUpstream",
                                     "SendingRequest", "AwaitingResponse", "RespondingWhileSending",
                                     "HoldingResponse", "Responding", "FinishingRequest",
                                     "Tunneling", "Complete", "Denied", "Failed"}),
    std::to_array<Transition<ExchangeState>>({
        {ExchangeState::Idle, ExchangeState::Deciding, "a request head, or a refused one"},
        {ExchangeState::Deciding, ExchangeState::HoldingBody,
         "allowed, secrets configured and a body: its start is scanned first"},
        {ExchangeState::Deciding, ExchangeState::AwaitingUpstream,
         "allowed (rate token taken, no misused placeholder)"},
        {ExchangeState::Deciding, ExchangeState::Denied,
         "refused: decide(), the rate, a placeholder, the audit log, a bad head"},
        {ExchangeState::Deciding, ExchangeState::Failed,
         "the connection closed while sluice answered"},
        {ExchangeState::HoldingBody, ExchangeState::AwaitingUpstream,
         "64 KiB held, or the whole body, and no misused placeholder in it"},
        {ExchangeState::HoldingBody, ExchangeState::Denied,
         "a misused placeholder in the body, a bad body, the client closed"},
        {ExchangeState::HoldingBody, ExchangeState::Failed, "the connection closed"},
        {ExchangeState::AwaitingUpstream, ExchangeState::SendingRequest,
         "an upstream is ready: the head sluice writes goes out"},
        {ExchangeState::AwaitingUpstream, ExchangeState::Denied,
         "dns_failed, ip_denied, upstream_connect/_timeout/_cert"},
        {ExchangeState::AwaitingUpstream, ExchangeState::Failed, "the connection closed"},
        {ExchangeState::SendingRequest, ExchangeState::AwaitingResponse,
         "the request's end went upstream"},
        {ExchangeState::SendingRequest, ExchangeState::RespondingWhileSending,
         "the response head arrived before the request's end"},
        {ExchangeState::SendingRequest, ExchangeState::Denied,
         "the upstream failed before answering, a bad body, a coded answer"},
        {ExchangeState::SendingRequest, ExchangeState::Failed, "the connection closed"},
        {ExchangeState::AwaitingResponse, ExchangeState::Responding,
         "the response head went to the client"},
        {ExchangeState::AwaitingResponse, ExchangeState::AwaitingUpstream,
         "a reused upstream closed unanswered: a safe method, once, redialled"},
        {ExchangeState::AwaitingResponse, ExchangeState::Denied,
         "the upstream failed before answering, or answered with a coding"},
        {ExchangeState::AwaitingResponse, ExchangeState::Tunneling,
         "101 to the WebSocket the rule allowed: its head went to the client"},
        {ExchangeState::AwaitingResponse, ExchangeState::HoldingResponse,
         "a 200 of package metadata sluice filters: its body is held"},
        {ExchangeState::AwaitingResponse, ExchangeState::Failed, "the connection closed"},
        {ExchangeState::HoldingResponse, ExchangeState::Responding,
         "filtered whole: the served document's head went to the client"},
        {ExchangeState::HoldingResponse, ExchangeState::Denied,
         "package_metadata_*, a version refused, the upstream failed, idle_timeout"},
        {ExchangeState::HoldingResponse, ExchangeState::AwaitingUpstream,
         "a file's packument, fetched for its publish time, says it is old enough"},
        {ExchangeState::HoldingResponse, ExchangeState::Failed, "the connection closed"},
        {ExchangeState::RespondingWhileSending, ExchangeState::Responding,
         "the request's end went upstream"},
        {ExchangeState::RespondingWhileSending, ExchangeState::FinishingRequest,
         "the upstream's close ended the response first"},
        {ExchangeState::RespondingWhileSending, ExchangeState::Complete,
         "the response ended first: neither connection is kept"},
        {ExchangeState::RespondingWhileSending, ExchangeState::Denied, "a bad request body"},
        {ExchangeState::RespondingWhileSending, ExchangeState::Failed,
         "the upstream failed, the client closed mid-body, the connection closed"},
        {ExchangeState::Responding, ExchangeState::Complete, "the response's end"},
        {ExchangeState::Responding, ExchangeState::Failed,
         "the upstream failed mid-response, idle_timeout, the connection closed"},
        {ExchangeState::FinishingRequest, ExchangeState::Complete, "the request's end"},
        {ExchangeState::Tunneling, ExchangeState::Complete,
         "the origin closed (the client's close is passed on to it): the record"},
        {ExchangeState::Tunneling, ExchangeState::Failed,
         "idle_timeout, an upstream error, the connection closed"},
        {ExchangeState::FinishingRequest, ExchangeState::Denied, "a bad request body"},
        {ExchangeState::FinishingRequest, ExchangeState::Failed,
         "the client closed mid-request, or the connection closed"},
        {ExchangeState::Complete, ExchangeState::Deciding,
         "the next request on the connection (the object is reused)"},
        {ExchangeState::Denied, ExchangeState::Deciding,
         "HTTP/2: a later stream's request (a finished stream's object is reused)"},
        {ExchangeState::Failed, ExchangeState::Deciding,
         "HTTP/2: a later stream's request (a finished stream's object is reused)"},
    })};

// The exchange is between its head and its record.
constexpr bool inFlight(ExchangeState s) {
  return s != ExchangeState::Idle && s != ExchangeState::Complete && s != ExchangeState::Denied &&
         s != ExchangeState::Failed;
}
// Its request head went upstream and the response is not over: the upstream is being read.
constexpr bool forwarding(ExchangeState s) {
  return s == ExchangeState::SendingRequest || s == ExchangeState::AwaitingResponse ||
         s == ExchangeState::RespondingWhileSending || s == ExchangeState::HoldingResponse ||
         s == ExchangeState::Responding || s == ExchangeState::Tunneling;
}
// The request's body (or, Tunneling, the client's side of the WebSocket) is still being read
// from the client and forwarded (or dropped).
constexpr bool readingRequestBody(ExchangeState s) {
  return s == ExchangeState::SendingRequest || s == ExchangeState::RespondingWhileSending ||
         s == ExchangeState::FinishingRequest || s == ExchangeState::Tunneling;
}
// What the connection reads while the exchange is in `s` (ClientConnection::updateReading()):
// a move within one class changes nothing there, and costs no look at it.
constexpr int readingClass(ExchangeState s) {
  switch (s) {
    case ExchangeState::HoldingBody:
      return 1;  // the body, up to what is held
    case ExchangeState::AwaitingUpstream:
      return 2;  // nothing, while the connector works
    case ExchangeState::SendingRequest:
    case ExchangeState::RespondingWhileSending:
      return 3;  // the body, and the upstream
    case ExchangeState::FinishingRequest:
      return 4;  // the body, to drop it
    case ExchangeState::AwaitingResponse:
    case ExchangeState::HoldingResponse:
    case ExchangeState::Responding:
      return 5;  // the upstream, and pipelined requests within a budget
    case ExchangeState::Tunneling:
      return 6;  // both sides, as fast as the other takes them
    default:
      return 0;  // the next head
  }
}
// Its response head went to the client.
constexpr bool responseBegun(ExchangeState s) {
  return s == ExchangeState::RespondingWhileSending || s == ExchangeState::Responding ||
         s == ExchangeState::FinishingRequest || s == ExchangeState::Tunneling;
}

}  // namespace sluice::proxy::session
