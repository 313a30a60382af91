#pragma once
// One HTTP/2 stream of a sandbox's connection: one request, decided, forwarded, answered and
// audited on its own (docs/wire.md#http2). It owns the stream's Exchange (the same one an
// HTTP/1.1 request has: decide, connector, upstream channel, record) and is that exchange's
// Downstream: response heads become HEADERS, the body is held here until nghttp2 pulls it
// into DATA frames as the client's flow-control window allows, sluice's own answers are
// responses on this stream only. To the exchange it is also the ExchangeHost: everything is
// the connection's (cork, timer, configuration, upstream retirement) except the end of the
// exchange and a close, which end this stream only (RST_STREAM), never the connection.
//
// Memory per stream is bounded both ways: request DATA is consumed (its flow-control window
// given back) only when the upstream took it, so at most one stream window is held; response
// bytes over kHighWater stop the upstream's reads (Downstream::backedUp).
//
// Owned by the connection's Http2ServerCodec, which frees it once both the exchange is over
// (its record written) and nghttp2 has closed the stream; reused for a later stream.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nghttp2/nghttp2.h>

#include "proxy/http/http2_request.h"
#include "proxy/session/exchange/downstream.h"
#include "proxy/session/exchange/exchange.h"
#include "proxy/session/exchange/exchange_host.h"
#include "proxy/http/http2_fields.h"
#include "proxy/session/exchange/secret_mask.h"
#include "proxy/session/http2/http2_state.h"

namespace sluice::proxy::session {

class Http2ServerCodec;

class Http2Stream final : public Downstream, private CodecExchangeHost {
 public:
  // Response bytes held for a stream before its upstream is read no more.
  static constexpr std::size_t kHighWater = 64 * 1024;

  Http2Stream(Http2ServerCodec& codec, ClientSide& connection, std::size_t max_header_bytes);
  ~Http2Stream();
  Http2Stream(const Http2Stream&) = delete;
  Http2Stream& operator=(const Http2Stream&) = delete;

  // A new stream (a fresh or reused object).
  void open(std::int32_t id);
  // A finished stream kept for reuse gives its buffers back: a spare costs its object only.
  void releaseBuffers();
  std::int32_t id() const { return id_; }
  Exchange& exchange() { return exchange_; }
  http::Http2RequestBuilder& request() { return request_; }

  // --- from the codec (nghttp2's callbacks)
  // The request head is complete: refuse it, or begin the exchange.
  void onHead(bool end_stream);
  // Request DATA (or its end). Passed on when the exchange takes it, else held.
  void onData(std::span<const char> data);
  void onEndOfRequest();
  // nghttp2 closed the stream (sent or received END_STREAM both ways, or a reset).
  void onClosed(std::uint32_t error_code);
  // The client's connection ended (EOF, close_notify): a stream whose request is not complete
  // can never be, and ends now (cut short, on record); one whose request is complete goes on
  // answering for as long as the connection lasts.
  void onClientGone();
  // What was held goes to the exchange as far as it takes it now.
  void deliverHeld();
  // The client's queue drained: what the stream held back for it goes on.
  void resumeResponse();
  // Its earliest deadline while its exchange is in flight (0: none): a dial's, or idle_timeout
  // (`idle_ms`) from its own last progress.
  std::uint64_t deadline(std::uint64_t idle_ms) const;
  // The codec's timer fired at `now`: the exchange acts on the deadlines that came (the next
  // address, 504 upstream_timeout, or the stream cut). True if it acted.
  bool onTimeout(std::uint64_t now, std::uint64_t idle_ms);
  // Whether the codec may free it: its exchange is over and nghttp2 has closed it.
  bool finished() const { return life_ == Life::Closed && !exchange_.inFlight(); }
  // nghttp2 pulls response DATA: copies up to `length` bytes into `buf`, sets `eof` when the
  // response is over; NGHTTP2_ERR_DEFERRED (via a negative value) when nothing is ready.
  long readResponse(std::uint8_t* buf, std::size_t length, bool& eof);
  // At the body's end: the origin's trailers, if it sent any, are submitted (true).
  bool submitTrailers();
  // The stream's upstream is read only while neither it nor the client is backed up.
  void updateUpstreamReading(bool client_backed_up);

  // --- Downstream
  void sendContinue() override;
  void sendInterimHead(const http::ResponseHead& head, SecretMask& mask) override;
  void sendResponseHead(const http::ResponseHead& head, SecretMask& mask) override;
  void sendResponseBody(std::span<const char> data, bool completes) override;
  void endResponse(const http::HeaderBlock* trailers) override;
  int sendDenial(policy::Reason reason, std::string_view detail) override;
  void requestCutShort() override;
  void switchedProtocols() override;
  void resumeRequest() override { deliverHeld(); }
  bool backedUp() const override;
  bool buffersResponse() const override { return true; }
  bool successMeansSwitched() const override { return request_.extendedConnect(); }
  audit::Proto protocol() const override { return audit::Proto::H2; }

 private:
  // --- ExchangeHost: the connection's, but for the exchange's end, a close, upstreams and
  // progress: the stream's own (a request byte taken, the upstream's answer relayed)
  void noteProgress() override;
  // The generation the stream was admitted under (the connection's before that): a reload
  // moves the connection on, not the streams in flight (docs/cli.md#reloads).
  const Generation& generation() const override {
    return generation_ != nullptr ? *generation_ : connection_.generation();
  }
  const SandboxView& sandboxView() const override {
    return view_ != nullptr ? *view_ : connection_.sandboxView();
  }
  // The stream's record went to its generation's audit sink, which a reload may have replaced
  // for the connection (another file): that one is flushed here, the connection's by it.
  void noteAudited() override;
  bool closing() const override { return life_ != Life::Open || connection_.closing(); }
  void close(std::string_view why) override;
  // A stream parks nothing for its client: a finished upstream goes to the worker's pool, where
  // the next stream (or another connection of the sandbox) finds it.
  std::unique_ptr<UpstreamConnection> takeParked(const UpstreamKey&) override { return nullptr; }
  void park(std::unique_ptr<UpstreamConnection> connection) override;
  void unpark() override {}
  void onExchangeOver(ExchangeState outcome) override;

  // Whether the exchange takes request body bytes now, and the request's end.
  bool takesBody() const;
  bool takesEnd() const;
  // What is held goes to the exchange when it takes body bytes now; false: the stream closed.
  bool handOverHeld();
  // An extended CONNECT's request side: its end at once, then the WebSocket's bytes.
  void relayWebSocket();
  // The request's trailer section is malformed, or over the bound: the request ends there.
  void refuseTrailers(bool malformed);
  // Drops what is held, giving its window back.
  void dropHeld();
  // The answer's bytes kept for the client, counted in the connection's budget; and dropped.
  void bufferBody(std::string_view bytes);
  void dropBody();
  std::size_t pendingBody() const { return body_.size() - body_offset_; }
  // The record of a stream refused before its exchange began: what its head showed.
  void beginRefusedRecord();
  // Submits a response head: `status`, then `fields` (names lower-cased), with a body to
  // follow (DATA pulled from body_) or not.
  void submitHead(int status, bool with_body);
  void resetStream(std::uint32_t error_code);
  // The stream ends in flight: reset with `error_code`, the exchange on record as it stands,
  // its upstream dropped.
  void cut(std::uint32_t error_code);
  // The sandbox's sluice_h2_streams_active{leg="client"}: counted from open() to its close.
  void countActive(bool active);
  nghttp2_session* session() const;

  Http2ServerCodec& codec_;
  std::int32_t id_ = 0;
  // Held from its admission to its end (null before: the connection's is the stream's).
  std::shared_ptr<const Generation> generation_;
  const SandboxView* view_ = nullptr;  // the sandbox in generation_
  http::Http2RequestBuilder request_;
  Exchange exchange_;
  // The three sides of a stream, each one small machine (http2_state.h: moves only forward, as
  // its table lists).
  using RequestSide = Http2RequestSide;
  using ResponseSide = Http2ResponseSide;
  using Life = Http2StreamLife;
  void move(RequestSide next);
  void move(ResponseSide next);
  void move(Life next);

  // Request DATA the exchange did not take yet (bounded by the stream's window).
  std::string held_;
  std::uint64_t received_ = 0;  // request DATA bytes, to tell a body that broke its length
  std::uint64_t last_progress_ms_ = 0;  // the loop's clock, at onHead() and each noteProgress()
  RequestSide request_side_ = RequestSide::HeadPending;
  ResponseSide response_side_ = ResponseSide::NotBegun;
  Life life_ = Life::Open;
  bool counted_ = false;
  // Response body bytes not yet pulled into DATA frames.
  std::string body_;
  std::size_t body_offset_ = 0;
  http::Http2Fields fields_;    // of the head being submitted
  http::Http2Fields trailers_;  // the origin's, sent once the body has gone
  std::string masked_;
};

}  // namespace sluice::proxy::session
