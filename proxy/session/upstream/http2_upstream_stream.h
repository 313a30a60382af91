#pragma once
// An exchange's request as one stream of a shared HTTP/2 session to its origin
// (Http2UpstreamSession): the UpstreamChannel of HTTP/2 (docs/wire.md#http2-toward-origins).
// It writes the head sluice builds as HTTP/2 fields (the same fields as an HTTP/1.1 head:
// http::visitForwardedFields, names lower-cased, what HTTP/2 cannot carry left out), holds the
// request body until nghttp2 pulls it into DATA frames as the origin's window allows, and turns
// the origin's HEADERS, DATA and trailers into the events an HTTP/1.1 response gives
// (UpstreamEvents), with the framing the client's codec needs: Content-Length when the origin
// sent one, else a body that ends with the stream.
//
// Owned by its exchange. Attached to a session from the request's head to release() or drop();
// destroying it lets the stream go (RST_STREAM CANCEL when it is still open).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "proxy/http/header_block.h"
#include "proxy/http/http2_response.h"
#include "proxy/session/context/client_side.h"
#include "proxy/http/http2_fields.h"
#include "proxy/session/upstream/http2_upstream_state.h"
#include "proxy/session/upstream/upstream_channel.h"

namespace sluice::proxy::session {

class Http2UpstreamSession;

class Http2UpstreamStream final : public UpstreamChannel {
 public:
  // Request bytes held for the origin before the client's side is read no more.
  static constexpr std::size_t kHighWater = 64 * 1024;

  Http2UpstreamStream(ClientSide& host, UpstreamEvents& events, std::size_t max_header_bytes);
  ~Http2UpstreamStream();
  Http2UpstreamStream(const Http2UpstreamStream&) = delete;
  Http2UpstreamStream& operator=(const Http2UpstreamStream&) = delete;

  // Takes a stream on `session` for a request with `method` (its answer's framing depends on
  // it). The stream opens with sendHead(). `end_to_end`: the client's side keeps the answer
  // until its own flow control lets it go (an HTTP/2 client), so the origin's window reopens
  // only as the client takes the bytes (bodyTaken); otherwise as they are delivered, while the
  // client is not backed up (setReading).
  void attachTo(Http2UpstreamSession& session, std::string_view method, bool end_to_end);

  // --- UpstreamChannel
  bool attached() const override { return session_ != nullptr; }
  void sendHead(const http::RequestHead& head, std::string_view target, std::string_view host,
                std::span<const http::HeaderField> inject) override;
  void sendBody(std::span<const char> data) override;
  void sendEnd(const http::HeaderBlock* trailers,
               std::span<const http::HeaderField> inject) override;
  void endWriting() override { sendEnd(nullptr, {}); }
  void flushCorked() override;
  void discardCorked() override {}
  bool backedUp() const override;
  audit::Proto protocol() const override { return audit::Proto::H2; }
  void setReading(bool reading) override;
  void bodyTaken(std::size_t bytes) override;
  bool responseKeepsAlive() const override { return true; }
  const http::HeaderBlock* trailers() const override;
  void release(bool reusable, bool clean) override;
  void drop() override;
  void releaseBuffers() override;

  // --- from the session (nghttp2's callbacks, corked on the client's connection)
  ClientSide& host() { return host_; }
  // A field of a HEADERS block; false: the block is over max_header_bytes (then
  // onHeadTooLarge(), and nghttp2 resets the stream).
  bool onField(std::string_view name, std::string_view value);
  void onHeadTooLarge();
  // A HEADERS block ended: a 1xx, the final head, or the trailers.
  void onHeadersEnd(bool end_stream);
  void onData(std::span<const char> data);
  void onEndStream();
  // nghttp2 closed the stream (`error_code` 0: both sides ended).
  void onClosed(std::uint32_t error_code);
  // The session ended under the stream (`why` empty: let go without an event).
  void onSessionEnded(std::string_view why);
  // nghttp2 pulls request DATA: up to `length` bytes into `buf`; `eof` at the body's end.
  long readRequest(std::uint8_t* buf, std::size_t length, bool& eof);
  // At the body's end: the request's trailers, if any go on, are submitted (true); their
  // HEADERS ends the stream.
  bool submitTrailers();
  // The session's writes drained: if the request side was over kHighWater and is no longer,
  // the client is read again; if it still is, the stream waits for the next drain.
  void reportDrainedIfSo();
  // Its HEADERS went: the window its client's connection granted it (ConnectionBudget) is
  // opened for the origin.
  void onHeadersSent();

 private:
  // Its two machines (http2_upstream_state.h), each moving only as its table lists.
  using Request = OriginRequest;
  using Response = OriginResponse;
  void move(Request next);
  void move(Response next);
  void fail(std::string_view why);
  // What was submitted is written now, or with the callback's other writes when corked.
  void wantFlush();
  // Lets the session go: reset when the stream is open, then no more events.
  void detach();
  // The sandbox's sluice_h2_streams_active{leg="origin"}: from the HEADERS sent to the close.
  void countActive(bool active);
  // The session lets it go (or it lets the session go): its window goes back to the budget.
  void letGo();

  ClientSide& host_;
  UpstreamEvents& events_;
  Http2UpstreamSession* session_ = nullptr;
  std::int32_t id_ = -1;
  bool head_request_ = false;  // the request is a HEAD: its answer has no body
  bool secret_ = false;        // the head carries an injected secret: its bytes are wiped
  bool body_ = false;          // the request has a body (DATA follows its HEADERS)
  Request request_ = Request::Head;
  // backedUp() said yes: the session tells it when the writes drained.
  mutable bool request_backed_up_ = false;
  bool reading_ = true;
  bool wants_flush_ = false;  // submitted while corked
  bool counted_ = false;
  Response response_ = Response::AwaitingHead;
  std::size_t unconsumed_ = 0;    // response bytes delivered while the client was backed up
  // When the origin's window reopens: as bytes are delivered, or as the client takes them.
  enum class Consumption : std::uint8_t { OnDelivery, WhenTaken };
  Consumption consumption_ = Consumption::OnDelivery;
  std::size_t window_ = 0;  // granted by the client's connection (ConnectionBudget), 0: none
  http::Http2ResponseBuilder response_head_;  // the response as it comes
  http::Http2Fields fields_;  // the request head being submitted
  http::Http2Fields trailers_;  // the request's trailers, submitted after its last DATA
  std::string out_;     // request body bytes not yet pulled into DATA
  std::size_t out_offset_ = 0;
};

}  // namespace sluice::proxy::session
