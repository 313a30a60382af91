#pragma once
// HTTP/1.1 toward the sandbox, behind the connection's one seam (ClientCodec): the client's
// plaintext in, requests out; responses in, bytes out. It owns its one Exchange, reused request
// after request (its buffers keep their capacity: no allocation per request), and is that
// exchange's host and Downstream.
//
// It feeds http::RequestParser (strict: every smuggling shape is refused) for as long as the
// connection and its exchange want request bytes, begins each request once the connection
// admits it, hands the body, de-chunked, to the exchange, holds what a pipelining client sends
// ahead (up to kPipelineBudget before the connection stops reading) and never reads on after a
// denial (the connection closes: docs/wire.md#denials). On the explicit listener its first head
// is the proxy head: a CONNECT goes to the connection (the tunnel's opening), anything else is
// forward mode. As the Downstream it writes the response head sluice builds
// (http::writeResponseHead), the body in the client's framing (a body of unknown length is
// re-chunked so the client keeps its connection), 1xx answers and sluice's own denials.
//
// Owned by the connection (CodecHost), which it outlives never.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "policy/reason.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"
#include "proxy/session/codec/client_codec.h"
#include "proxy/session/exchange/downstream.h"
#include "proxy/session/exchange/exchange.h"
#include "proxy/session/exchange/exchange_host.h"

namespace sluice::proxy::session {

class Http1ServerCodec final : public ClientCodec,
                               public Downstream,
                               private CodecExchangeHost,
                               private http::RequestBodySink {
 public:
  // Plaintext of requests pipelined behind the one in progress that is held before the
  // connection stops reading the client.
  static constexpr std::size_t kPipelineBudget = 16 * 1024;

  Http1ServerCodec(CodecHost& host, std::size_t max_header_bytes);
  Http1ServerCodec(const Http1ServerCodec&) = delete;
  Http1ServerCodec& operator=(const Http1ServerCodec&) = delete;

  // Bytes held and not parsed yet.
  std::size_t pending() const { return plain_.size() - offset_; }

  // --- ClientCodec
  audit::Proto protocol() const override { return audit::Proto::Http1; }
  // Kept until the parser takes it; in a WebSocket (Tunneling) it goes to the exchange as it
  // comes, unless bytes from before the switch are still held.
  bool feed(std::span<const char> plaintext) override;
  // Parses what it holds for as long as the connection and the exchange want request bytes.
  void process() override;
  bool wantsBytes() const override;
  bool holdsInput() const override { return exchange_.state() == ExchangeState::AwaitingUpstream; }
  bool inFlight() const override { return exchange_.inFlight(); }
  bool busy() const override { return exchange_.inFlight(); }
  bool idle() const override { return !exchange_.inFlight() && pending() == 0; }
  bool goingAway() const override { return false; }
  std::uint64_t deadline() const override { return exchange_.deadline(); }
  bool timesRequests() const override { return false; }
  void collect() override {}
  void updateUpstreamReading(bool client_backed_up) override {
    exchange_.updateUpstreamReading(client_backed_up);
  }
  void flushCorkedUpstreams() override { exchange_.flushCorkedUpstream(); }
  void discardCorkedUpstreams() override { exchange_.discardCorkedUpstream(); }
  bool sendPending() override { return false; }
  void onPeerDrained() override;
  void onTimeout(const Expired& expired) override;
  void onClientEnd(ClientEnd how) override;
  bool drain() override { return idle(); }
  void finish() override { exchange_.releaseUpstream(); }
  void abandon() override { exchange_.abandon(); }
  void dropUpstreams() override { exchange_.dropUpstream(); }
  void releaseBuffers() override;

  // --- Downstream
  void sendContinue() override;
  void sendInterimHead(const http::ResponseHead& head, SecretMask& mask) override;
  void sendResponseHead(const http::ResponseHead& head, SecretMask& mask) override;
  void sendResponseBody(std::span<const char> data, bool completes) override;
  void endResponse(const http::HeaderBlock* trailers) override;
  int sendDenial(policy::Reason reason, std::string_view detail) override;
  void requestCutShort() override;
  void switchedProtocols() override;
  void resumeRequest() override { process(); }
  bool backedUp() const override { return host_.clientBackedUp(); }
  bool buffersResponse() const override { return false; }
  bool successMeansSwitched() const override { return false; }  // (a 200 declines the upgrade)

 private:
  // --- ExchangeHost: the connection's, but for the end of the exchange
  void onExchangeOver(ExchangeState outcome) override;

  void onRequestBody(std::span<const char> data) override;
  bool mayParse() const;
  bool tunneling() const;
  // Tunneling: what it holds goes to the exchange as it is (the client's WebSocket bytes).
  void relayHeld();
  // A complete head: the proxy head's kind, the connection's admission, then the request.
  void onHead(const http::RequestHead& head);
  // A CONNECT after the proxy head (inside a tunnel, on a redirected connection): 400.
  void refuseInnerConnect(const http::RequestHead& head);
  // The parser refused what the client sent (400 or 431).
  void onBadRequest(policy::Reason reason, std::string_view detail);
  // The record of a head the parser refused says what had been received.
  void describeRefusedHead();
  // Empties the scratch buffer for a head, with room for a typical one.
  void startHead();
  static constexpr std::size_t kHeadReserve = 512;
  // A head (masked whole when the mask is active: then the mask starts over for the body).
  void sendHead(std::string_view head, bool completes_response, SecretMask& mask);

  CodecHost& host_;
  Exchange exchange_;
  http::RequestParser parser_;
  std::string plain_;  // client plaintext not yet parsed (a paused parser)
  std::size_t offset_ = 0;
  bool message_end_pending_ = false;  // after a head: its end may come without more bytes
  http::ResponseFraming to_client_ = http::ResponseFraming::None;
  std::string scratch_;  // heads and chunk framing being written; reused
  std::string masked_;   // a response head after masking; reused
};

}  // namespace sluice::proxy::session
