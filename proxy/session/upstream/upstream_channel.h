#pragma once
// The upstream side of one exchange: where its request goes and its response comes from
// (Http1Upstream: one HTTP/1.1 connection at a time; Http2UpstreamStream: a stream of a shared
// HTTP/2 session). The channel frames
// and parses; the exchange (UpstreamEvents) decides what to do with what comes back.

#include <memory>
#include <span>
#include <string_view>

#include "policy/reason.h"
#include "proxy/http/head_writer.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"
#include "proxy/session/pool/upstream_pool.h"

namespace sluice::proxy::session {

// What the channel reports, each from inside a corked callback.
class UpstreamEvents {
 public:
  // A 1xx other than 101: the final response follows.
  virtual void onInterimHead(const http::ResponseHead& head) = 0;
  virtual void onResponseHead(const http::ResponseHead& head) = 0;
  virtual void onResponseBody(std::span<const char> data) = 0;
  // The response is complete; `more`: the upstream sent bytes after it (it is not reused).
  virtual void onResponseComplete(bool more) = 0;
  // The upstream's close (FIN or close_notify) ended a body that runs until it.
  virtual void onResponseEndedByClose() = 0;
  virtual void onUpstreamFailed(policy::Reason reason, std::string_view detail) = 0;

 protected:
  ~UpstreamEvents() = default;
};

class UpstreamChannel {
 public:
  // Whether it holds an upstream (between attaching, each channel its own way, and release()).
  virtual bool attached() const = 0;
  // The head sluice writes: `head`'s fields less what is dropped, `target` in origin form,
  // Host `host`, and `inject` in place of the sandbox's fields of the same names.
  virtual void sendHead(const http::RequestHead& head, std::string_view target,
                        std::string_view host, std::span<const http::HeaderField> inject) = 0;
  // Body bytes (decoded), in the framing the request is forwarded with; then its end, with the
  // sandbox's trailer fields (null: none) less those no origin gets from it and those named in
  // `inject` (http::visitForwardedTrailers), where the framing has room for them
  // (docs/wire.md#request-trailers).
  virtual void sendBody(std::span<const char> data) = 0;
  virtual void sendEnd(const http::HeaderBlock* trailers,
                       std::span<const http::HeaderField> inject) = 0;
  // The client ended its side of a WebSocket: what is queued for the origin goes, then the
  // origin gets the end of the stream (close_notify, FIN); its side is read on until it closes.
  virtual void endWriting() = 0;
  // Writes what corked sends gathered; or drops it (the connection is closing).
  virtual void flushCorked() = 0;
  virtual void discardCorked() = 0;
  // The upstream's write queue is over its high watermark.
  virtual bool backedUp() const = 0;
  // The HTTP spoken to the origin: the record's `upstream_proto`.
  virtual audit::Proto protocol() const = 0;
  // Whether the response is read (false while the client is backed up).
  virtual void setReading(bool reading) = 0;
  // The client took `bytes` of the answer (a downstream that buffers it: Downstream::
  // buffersResponse): an HTTP/2 origin's stream window reopens by as much.
  virtual void bodyTaken(std::size_t bytes) = 0;
  // The upstream may carry another request after this response (its head said so).
  virtual bool responseKeepsAlive() const = 0;
  // The trailer fields that ended the response (null: none, or none kept).
  virtual const http::HeaderBlock* trailers() const = 0;
  // The exchange is over: the connection is kept for this client (parked) when `reusable`,
  // else closed. `clean`: it did nothing out of turn, so its TLS session may be kept for the
  // next connection to the same key.
  virtual void release(bool reusable, bool clean) = 0;
  // Closed at once, nothing flushed.
  virtual void drop() = 0;
  // Gives back the memory of idle buffers.
  virtual void releaseBuffers() = 0;

 protected:
  ~UpstreamChannel() = default;
};

}  // namespace sluice::proxy::session
