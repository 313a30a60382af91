#pragma once
// HTTP/2 toward the sandbox (ALPN h2 inside a tunnel): nghttp2's server session, fed the
// client's plaintext and drained into the connection's corked writes, and the connection's
// streams (Http2Stream: one request and its exchange each). nghttp2 does the framing, HPACK,
// flow control and the stream rules of RFC 9113; sluice decides each stream on its own
// (docs/wire.md#http2).
//
// What the connection promises the sandbox (SETTINGS): at most kMaxConcurrentStreams streams at
// once (or the sandbox's limits.max_streams), a header list of at most max_header_bytes, no server push, a stream window of
// kStreamWindow whose bytes are given back only as the upstream takes them (so memory per
// stream is bounded), and extended CONNECT (RFC 8441, WebSocket). Floods end the connection with
// GOAWAY ENHANCE_YOUR_CALM: those nghttp2 counts (acknowledgements queued for a client that does
// not read, CONTINUATION, SETTINGS entries) and those sluice counts itself (resets at its own
// rate, empty DATA frames); each such end, and every other connection error, is on record as
// the tunnel's `error` (docs/wire.md#http2, docs/audit.md#errors).
//
// Owned by the connection (made when ALPN agreed h2); it owns the streams, frees a finished one
// at the next safe point (never under the callback of its own exchange) and keeps a few for
// reuse.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <nghttp2/nghttp2.h>

#include "proxy/audit/audit_record.h"
#include "proxy/http/http2_session.h"
#include "proxy/session/codec/client_codec.h"
#include "proxy/session/http2/http2_state.h"

namespace sluice::proxy::session {

class Http2Stream;

class Http2ServerCodec final : public ClientCodec {
 public:
  // At most; a sandbox's limits.max_streams may say fewer (docs/configuration.md).
  static constexpr std::uint32_t kMaxConcurrentStreams = 100;
  static constexpr std::int32_t kStreamWindow = 64 * 1024;
  // The connection's window: what all streams together may hold unconsumed.
  static constexpr std::int32_t kConnectionWindow = 1024 * 1024;

  // `max_streams`: SETTINGS_MAX_CONCURRENT_STREAMS, at most kMaxConcurrentStreams.
  Http2ServerCodec(CodecHost& host, std::size_t max_header_bytes,
                   std::uint32_t max_streams = kMaxConcurrentStreams);
  ~Http2ServerCodec() override;
  Http2ServerCodec(const Http2ServerCodec&) = delete;
  Http2ServerCodec& operator=(const Http2ServerCodec&) = delete;

  // The server's connection preface (SETTINGS). False if nghttp2 could not be set up.
  bool start();
  // An nghttp2 server session as sluice runs it (the SETTINGS above), for the codec and for the
  // fuzz target that feeds it hostile frames. Empty on failure.
  static http::Http2Session newServerSession(const http::Http2Callbacks& callbacks,
                                             void* user_data, std::size_t max_header_bytes,
                                             std::uint32_t max_streams = kMaxConcurrentStreams);
  // GOAWAY: `error_code` NO_ERROR lets the streams in flight finish (draining, a reload);
  // otherwise ENHANCE_YOUR_CALM or PROTOCOL_ERROR ends them.
  void goAway(std::uint32_t error_code);
  std::size_t streams() const { return live_.size(); }

  // --- ClientCodec
  audit::Proto protocol() const override { return audit::Proto::H2; }
  // Frames are processed as they complete: nothing is copied.
  bool feed(std::span<const char> plaintext) override;
  void process() override {}
  // Whether nghttp2 still reads (false once both sides said GOAWAY or a connection error).
  bool wantsBytes() const override;
  bool holdsInput() const override { return false; }
  // A stream whose exchange is in flight (its decision holds the generation's rules).
  bool inFlight() const override;
  // A stream that is not finished: its exchange is in flight, or nghttp2 still sends its
  // response (the client's window may hold it) or reads its request.
  bool busy() const override;
  bool idle() const override { return false; }
  bool goingAway() const override { return phase_ != Phase::Open; }
  std::uint64_t deadline() const override;
  bool timesRequests() const override;
  // Frees the streams that are finished (a safe point: no exchange of theirs is on the stack).
  void collect() override;
  void updateUpstreamReading(bool client_backed_up) override;
  void flushCorkedUpstreams() override;
  void discardCorkedUpstreams() override;
  // Serialises what nghttp2 has to send into the connection's (corked) writes.
  bool sendPending() override;
  void onPeerDrained() override;
  void onTimeout(const Expired& expired) override;
  void onClientEnd(ClientEnd how) override;
  bool drain() override;
  // The connection finishes: GOAWAY (unless said), the streams still in flight cut short (on
  // record), their upstreams released; what is queued is sent by the next sendPending(), and
  // the codec reports nothing more (no finishConnection() back into the finishing connection).
  void finish() override;
  void abandon() override;
  void dropUpstreams() override;
  void releaseBuffers() override {}

  // --- for the streams
  nghttp2_session* session() const { return session_.get(); }
  CodecHost& host() { return host_; }
  void onStreamOver(Http2Stream& stream);
  // A reset sluice sends because of what the client sent (MadeYouReset, CVE-2025-8671): it
  // draws from the same budget as the client's own resets; past it the next sendPending() ends
  // the connection (ENHANCE_YOUR_CALM). Resets with the client's error codes are counted as
  // they are sent; a stream cut for the client's fault with another code is counted here.
  void countProvokedReset();

 private:
  struct Callbacks;
  Http2Stream* streamOf(std::int32_t id) const;
  Http2Stream& openStream(std::int32_t id);
  void done(std::string_view why);
  void releaseUpstreams();
  std::uint64_t idleTimeoutMs() const;
  // The sandbox made the connection fail: the streams cut short and the tunnel on record, then
  // done(). GOAWAY is already queued or sent.
  void fail(audit::Error error);
  // A frame that is one too many of a flood sluice counts itself (resets and PING/SETTINGS
  // frames at its own rates, empty DATA frames): flood_ says which, and the connection ends.
  bool flooded(const nghttp2_frame& frame);

  // A stream ended since nghttp2 was last called: the connection hears it once nghttp2 has
  // returned (CodecHost::onRequestsOver), if no stream is left.
  void reportIdle();

  CodecHost& host_;
  std::size_t max_header_bytes_;
  std::uint32_t max_streams_;
  http::Http2Session session_;
  std::vector<std::unique_ptr<Http2Stream>> live_;
  std::vector<std::unique_ptr<Http2Stream>> spare_;  // finished, kept for reuse
  using Phase = Http2CodecPhase;  // its table: http2_state.h
  void move(Phase next);
  Phase phase_ = Phase::Open;
  bool idle_news_ = false;  // a stream ended; reportIdle() has not looked yet
  audit::Error flood_ = audit::Error::None;  // the flood that ends the connection, once one did
  // A connection error nghttp2 ended the session for on its own (its GOAWAY went out).
  audit::Error library_error_ = audit::Error::None;
  // A budget of frames: `burst`, refilled at `rate` a second.
  struct TokenBucket {
    double tokens;
    std::uint64_t refilled_ms = 0;
    bool take(std::uint64_t now_ms, double burst, double rate);
  };
  TokenBucket resets_{100};    // kOwnResetBurst
  TokenBucket controls_{200};  // kOwnControlBurst
  std::uint32_t empty_data_ = 0;
};

}  // namespace sluice::proxy::session
