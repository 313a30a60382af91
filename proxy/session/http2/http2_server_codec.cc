#include "proxy/session/http2/http2_server_codec.h"

#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <algorithm>

#include "proxy/runtime/generation.h"
#include "proxy/session/context/state_change.h"
#include "proxy/session/http2/http2_stream.h"

namespace sluice::proxy::session {

namespace {

// Finished streams kept for reuse: a busy connection allocates nothing per stream.
constexpr std::size_t kSpareStreams = 8;

// sluice's own reset budget, below nghttp2's (which answers INTERNAL_ERROR): a burst of
// kOwnResetBurst resets, then kOwnResetRate a second, before GOAWAY ENHANCE_YOUR_CALM.
constexpr double kOwnResetBurst = 100;
constexpr double kOwnResetRate = 50;
// PING and SETTINGS frames a client may send (their acknowledgements are sluice's to write): a
// burst of kOwnControlBurst, then kOwnControlRate a second, before GOAWAY ENHANCE_YOUR_CALM.
// nghttp2's own bound (1000 acknowledgements queued unsent) is not enough: sluice drains that
// queue into its write buffer after every read, so a flood read a few frames at a time never
// reaches it. Clients send a few (gRPC's BDP pings: at most ten a second; keep-alives).
constexpr double kOwnControlBurst = 200;
constexpr double kOwnControlRate = 100;
// DATA frames that carry nothing and end nothing: no client needs them (each costs a frame's
// processing and nothing else), so a connection may send this many in all.
constexpr std::uint32_t kMaxEmptyData = 100;

// What a connection error of nghttp2's says in the record (docs/audit.md#errors).
audit::Error errorOf(ssize_t error) {
  switch (error) {
    case NGHTTP2_ERR_FLOODED:
      return audit::Error::H2ControlFlood;
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
      return audit::Error::H2Continuation;
    case NGHTTP2_ERR_TOO_MANY_SETTINGS:
      return audit::Error::H2SettingsFlood;
    case NGHTTP2_ERR_HEADER_COMP:
      return audit::Error::H2CompressionError;
    default:
      return audit::Error::H2ProtocolError;
  }
}

// What a GOAWAY nghttp2 sent on its own means: ENHANCE_YOUR_CALM for a SETTINGS frame of too
// many entries (its text says so), or for frames its own counters call a flood.
audit::Error errorOfGoAway(std::uint32_t code, std::string_view said) {
  switch (code) {
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return said.starts_with("SETTINGS") ? audit::Error::H2SettingsFlood
                                          : audit::Error::H2ControlFlood;
    case NGHTTP2_COMPRESSION_ERROR:
      return audit::Error::H2CompressionError;
    default:
      return audit::Error::H2ProtocolError;
  }
}

// What GOAWAY says for it: a flood ENHANCE_YOUR_CALM (RFC 9113 section 7).
std::uint32_t goAwayCodeOf(audit::Error error) {
  switch (error) {
    case audit::Error::H2CompressionError:
      return NGHTTP2_COMPRESSION_ERROR;
    case audit::Error::H2ProtocolError:
    case audit::Error::None:
      return NGHTTP2_PROTOCOL_ERROR;
    default:
      return NGHTTP2_ENHANCE_YOUR_CALM;
  }
}

// The error codes of the resets sluice sends because of the client's frames: a malformed
// stream, a content-length its DATA broke, a flow-control or frame-size violation, a frame on a
// closed stream (RFC 9113 §5.4.2). Not REFUSED_STREAM (a stream over the limit, or refused
// while the connection goes away, costs nothing and does nothing), INTERNAL_ERROR (an
// upstream's failure) or NO_ERROR (the answer came before the body ended).
bool provokedByClient(std::uint32_t error_code) {
  return error_code == NGHTTP2_PROTOCOL_ERROR || error_code == NGHTTP2_FLOW_CONTROL_ERROR ||
         error_code == NGHTTP2_STREAM_CLOSED || error_code == NGHTTP2_FRAME_SIZE_ERROR;
}

}  // namespace

// nghttp2's callbacks, each forwarding to the codec or the stream it names.
struct Http2ServerCodec::Callbacks {
  static Http2ServerCodec& codec(void* user_data) {
    return *static_cast<Http2ServerCodec*>(user_data);
  }

  static int onBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      codec(user_data).openStream(frame->hd.stream_id);
    }
    return 0;
  }

  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t name_length, const std::uint8_t* value, std::size_t value_length,
                      std::uint8_t /*flags*/, void* user_data) {
    Http2Stream* stream = codec(user_data).streamOf(frame->hd.stream_id);
    if (stream == nullptr || frame->hd.type != NGHTTP2_HEADERS) {
      return 0;
    }
    const std::string_view n(reinterpret_cast<const char*>(name), name_length);
    const std::string_view v(reinterpret_cast<const char*>(value), value_length);
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      // The request's trailers: checked and bounded like a head, acted on when they end the
      // stream (nghttp2 resets a later HEADERS that does not end it).
      stream->request().addTrailer(n, v);
      return 0;
    }
    // A malformed field makes add() false and the head Malformed when it ends: nghttp2 is not
    // told to reset here, so the stream's record is written first.
    stream->request().add(n, v);
    return 0;
  }

  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Http2ServerCodec& self = codec(user_data);
    if (self.flooded(*frame)) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;  // feed() ends the connection: ENHANCE_YOUR_CALM
    }
    Http2Stream* stream = self.streamOf(frame->hd.stream_id);
    if (stream == nullptr) {
      return 0;
    }
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->hd.type == NGHTTP2_HEADERS) {
      if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        stream->onHead(end_stream);
      } else if (end_stream) {
        stream->onEndOfRequest();  // trailers end the request
      }
    } else if (frame->hd.type == NGHTTP2_DATA && end_stream) {
      stream->onEndOfRequest();
    }
    return 0;
  }

  static int onDataChunk(nghttp2_session*, std::uint8_t /*flags*/, std::int32_t stream_id,
                         const std::uint8_t* data, std::size_t length, void* user_data) {
    Http2ServerCodec& self = codec(user_data);
    Http2Stream* stream = self.streamOf(stream_id);
    if (stream == nullptr) {
      nghttp2_session_consume(self.session_.get(), stream_id, length);
      return 0;
    }
    stream->onData(std::span<const char>(reinterpret_cast<const char*>(data), length));
    return 0;
  }

  // A GOAWAY with an error that sluice did not submit (its own go out after phase_ left Open):
  // nghttp2 ended the session itself, for a connection error it handles alone (a SETTINGS
  // frame of too many entries, a frame RFC 9113 forbids). sendPending() ends the connection.
  static int onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Http2ServerCodec& self = codec(user_data);
    if (frame->hd.type == NGHTTP2_RST_STREAM && provokedByClient(frame->rst_stream.error_code)) {
      self.countProvokedReset();  // sluice's own or nghttp2's: either way the client's doing
    }
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR &&
        self.phase_ == Phase::Open && self.library_error_ == audit::Error::None) {
      const std::string_view said(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                  frame->goaway.opaque_data_len);
      self.library_error_ = errorOfGoAway(frame->goaway.error_code, said);
    }
    return 0;
  }

  static int onStreamClose(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code,
                           void* user_data) {
    if (Http2Stream* stream = codec(user_data).streamOf(stream_id)) {
      stream->onClosed(error_code);
    }
    return 0;
  }
};

Http2ServerCodec::Http2ServerCodec(CodecHost& host, std::size_t max_header_bytes,
                                   std::uint32_t max_streams)
    : host_(host),
      max_header_bytes_(max_header_bytes),
      max_streams_(std::min(max_streams, kMaxConcurrentStreams)) {}

Http2ServerCodec::~Http2ServerCodec() = default;

http::Http2Session Http2ServerCodec::newServerSession(const http::Http2Callbacks& callbacks,
                                                      void* user_data,
                                                      std::size_t max_header_bytes,
                                                      std::uint32_t max_streams) {
  return http::Http2Session::make(
      http::Http2Session::Role::Server, callbacks, user_data,
      {std::min(max_streams, kMaxConcurrentStreams), kStreamWindow, kConnectionWindow,
       max_header_bytes});
}

bool Http2ServerCodec::start() {
  http::Http2Callbacks callbacks;
  callbacks.on_begin_headers = Callbacks::onBeginHeaders;
  callbacks.on_header = Callbacks::onHeader;
  callbacks.on_frame_recv = Callbacks::onFrameRecv;
  callbacks.on_data_chunk_recv = Callbacks::onDataChunk;
  callbacks.on_stream_close = Callbacks::onStreamClose;
  callbacks.on_frame_send = Callbacks::onFrameSend;
  session_ = newServerSession(callbacks, this, max_header_bytes_, max_streams_);
  return static_cast<bool>(session_);
}

bool Http2ServerCodec::feed(std::span<const char> plaintext) {
  if (phase_ == Phase::Done) {
    return false;  // the session is over: nothing more is read
  }
  // (No progress by itself: a stream's is its own, and the connection's is a stream beginning
  // or the last one ending. A PING a second keeps nothing alive: docs/wire.md#http2.)
  const long n = session_.receive(plaintext);
  if (n < 0) {
    // A connection error nghttp2 returns (a bad preface, a flood, a callback's refusal): GOAWAY
    // where one can be sent; the connection ends once it is written.
    const audit::Error error = flood_ != audit::Error::None ? flood_ : errorOf(n);
    SPDLOG_DEBUG("[C{}] h2 connection error: {} ({})", host_.facts().id, toString(error),
                 nghttp2_strerror(static_cast<int>(n)));
    if (n != NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
      goAway(goAwayCodeOf(error));
    }
    fail(error);
    return false;
  }
  reportIdle();
  return phase_ != Phase::Done;
}

bool Http2ServerCodec::TokenBucket::take(std::uint64_t now_ms, double burst, double rate) {
  tokens = std::min(burst, tokens + rate * static_cast<double>(now_ms - refilled_ms) / 1000.0);
  refilled_ms = now_ms;
  if (tokens < 1) {
    return false;
  }
  tokens -= 1;
  return true;
}

void Http2ServerCodec::countProvokedReset() {
  if (flood_ == audit::Error::None &&
      !resets_.take(uv_now(host_.context().loop), kOwnResetBurst, kOwnResetRate)) {
    flood_ = audit::Error::H2RapidReset;
  }
}

bool Http2ServerCodec::flooded(const nghttp2_frame& frame) {
  const bool ack = (frame.hd.flags & NGHTTP2_FLAG_ACK) != 0;
  if (frame.hd.type == NGHTTP2_RST_STREAM) {
    if (!resets_.take(uv_now(host_.context().loop), kOwnResetBurst, kOwnResetRate)) {
      flood_ = audit::Error::H2RapidReset;
      return true;
    }
  } else if ((frame.hd.type == NGHTTP2_PING || frame.hd.type == NGHTTP2_SETTINGS) && !ack) {
    if (!controls_.take(uv_now(host_.context().loop), kOwnControlBurst, kOwnControlRate)) {
      flood_ = audit::Error::H2ControlFlood;
      return true;
    }
  } else if (frame.hd.type == NGHTTP2_DATA && frame.hd.length == 0 &&
             (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) == 0 && ++empty_data_ > kMaxEmptyData) {
    flood_ = audit::Error::H2EmptyData;
    return true;
  }
  return false;
}

bool Http2ServerCodec::sendPending() {
  if (!session_) {
    return false;
  }
  session_.drain([this](std::string_view bytes) { host_.sendClient(bytes); });
  if (flood_ != audit::Error::None && phase_ == Phase::Open) {
    // The resets sluice sent for the client's frames used up the budget: ENHANCE_YOUR_CALM.
    SPDLOG_DEBUG("[C{}] h2 connection error: {}", host_.facts().id, toString(flood_));
    goAway(goAwayCodeOf(flood_));
    session_.drain([this](std::string_view bytes) { host_.sendClient(bytes); });
    fail(flood_);
    return true;
  }
  if (library_error_ != audit::Error::None && phase_ == Phase::Open) {
    // nghttp2 ended the session itself and its GOAWAY just went out (onFrameSend).
    SPDLOG_DEBUG("[C{}] h2 connection error: {}", host_.facts().id, toString(library_error_));
    move(Phase::GoingAway);
    fail(library_error_);
    return true;
  }
  if (!session_.wantsRead() && !session_.wantsWrite()) {
    done("HTTP/2 session over");
    return true;
  }
  reportIdle();
  return true;
}

void Http2ServerCodec::fail(audit::Error error) {
  abandon();
  dropUpstreams();
  host_.onConnectionError(error);
  done(toString(error));
}

void Http2ServerCodec::done(std::string_view why) {
  if (phase_ == Phase::Done) {
    return;
  }
  move(Phase::Done);
  SPDLOG_DEBUG("[C{}] h2 over: {}", host_.facts().id, why);
  host_.finishConnection();
}

bool Http2ServerCodec::wantsBytes() const {
  return phase_ != Phase::Done && session_ && session_.wantsRead();
}

bool Http2ServerCodec::inFlight() const {
  return std::any_of(live_.begin(), live_.end(),
                     [](const auto& s) { return s->exchange().inFlight(); });
}

bool Http2ServerCodec::busy() const {
  return std::any_of(live_.begin(), live_.end(), [](const auto& s) { return !s->finished(); });
}

Http2Stream* Http2ServerCodec::streamOf(std::int32_t id) const {
  for (const auto& stream : live_) {
    if (stream->id() == id) {
      return stream.get();
    }
  }
  return nullptr;
}

Http2Stream& Http2ServerCodec::openStream(std::int32_t id) {
  std::unique_ptr<Http2Stream> stream;
  if (!spare_.empty()) {
    stream = std::move(spare_.back());
    spare_.pop_back();
  } else {
    stream = std::make_unique<Http2Stream>(*this, host_, max_header_bytes_);
  }
  stream->open(id);
  live_.push_back(std::move(stream));
  return *live_.back();
}

void Http2ServerCodec::onStreamOver(Http2Stream&) {
  // Freed at the next safe point (collect()); the connection may now have nothing in flight.
  host_.armTimer();
  // Told once nghttp2 has returned (the connection may finish, and must not from inside
  // nghttp2's callbacks: feed() and sendPending() are not re-entrant).
  idle_news_ = true;
}

void Http2ServerCodec::reportIdle() {
  if (idle_news_ && phase_ != Phase::Done && !busy()) {
    idle_news_ = false;
    host_.onRequestsOver();
  }
  idle_news_ = false;
}

void Http2ServerCodec::collect() {
  for (std::size_t i = 0; i < live_.size();) {
    if (!live_[i]->finished()) {
      ++i;
      continue;
    }
    std::unique_ptr<Http2Stream> done = std::move(live_[i]);
    live_[i] = std::move(live_.back());
    live_.pop_back();
    if (spare_.size() < kSpareStreams) {
      done->releaseBuffers();
      spare_.push_back(std::move(done));
    }
  }
}

// --- what the connection does to every stream

void Http2ServerCodec::updateUpstreamReading(bool client_backed_up) {
  for (const auto& stream : live_) {
    stream->updateUpstreamReading(client_backed_up);
  }
}

void Http2ServerCodec::flushCorkedUpstreams() {
  for (const auto& stream : live_) {
    stream->exchange().flushCorkedUpstream();
  }
}

void Http2ServerCodec::discardCorkedUpstreams() {
  for (const auto& stream : live_) {
    stream->exchange().discardCorkedUpstream();
  }
}

void Http2ServerCodec::onPeerDrained() {
  // (By index: delivering may end a stream, never free one.)
  for (std::size_t i = 0; i < live_.size(); ++i) {
    live_[i]->deliverHeld();
    live_[i]->resumeResponse();  // answers held back while the client's queue was backed up
  }
}

std::uint64_t Http2ServerCodec::deadline() const {
  std::uint64_t earliest = 0;
  const std::uint64_t idle = idleTimeoutMs();
  for (const auto& stream : live_) {
    const std::uint64_t d = stream->deadline(idle);
    if (d != 0 && (earliest == 0 || d < earliest)) {
      earliest = d;
    }
  }
  return earliest;
}

bool Http2ServerCodec::timesRequests() const { return inFlight(); }

std::uint64_t Http2ServerCodec::idleTimeoutMs() const {
  return static_cast<std::uint64_t>(host_.generation().config->limits.idle_timeout.count());
}

void Http2ServerCodec::onTimeout(const Expired& expired) {
  // Each stream by its own deadlines: a dial's, and idle_timeout from its own progress (a
  // stream whose upstream is silent gets its 504 whatever else the connection carries).
  const std::uint64_t now = uv_now(host_.context().loop);
  const std::uint64_t idle = idleTimeoutMs();
  bool acted = false;
  for (std::size_t i = 0; i < live_.size(); ++i) {
    acted = live_[i]->onTimeout(now, idle) || acted;
  }
  reportIdle();  // (the last stream in flight may have ended: the connection's idle rule resumes)
  if (host_.closing() || phase_ == Phase::Done) {
    return;
  }
  if (acted || inFlight() || (!expired.idle && !expired.phase)) {
    host_.armTimer();
    return;  // the streams that waited were answered (504) or moved on; the others go on
  }
  // Idle with no stream waiting: GOAWAY, politely (docs/wire.md#http2).
  host_.noteTunnelEnd(audit::Error::TimedOut);
  host_.finishConnection();
}

void Http2ServerCodec::onClientEnd(ClientEnd) {
  // The streams in flight finish what they can (their responses cannot be read any more than
  // an HTTP/1.1 one's: the client may only have shut its side), then the connection.
  for (std::size_t i = 0; i < live_.size(); ++i) {
    live_[i]->onClientGone();
  }
  if (!host_.closing() && !busy()) {
    host_.finishConnection();
  }
}

bool Http2ServerCodec::drain() {
  goAway(NGHTTP2_NO_ERROR);  // no new stream; the streams in flight finish, then the connection
  return !busy();
}

void Http2ServerCodec::abandon() {
  for (const auto& stream : live_) {
    stream->exchange().abandon();
  }
}

void Http2ServerCodec::releaseUpstreams() {
  for (const auto& stream : live_) {
    stream->exchange().releaseUpstream();
  }
}

void Http2ServerCodec::dropUpstreams() {
  for (const auto& stream : live_) {
    stream->exchange().dropUpstream();
  }
}

void Http2ServerCodec::move(Phase next) {
  changeState(host_.context(), host_.facts().id, kHttp2ConnectionMachine, phase_, next);
}

void Http2ServerCodec::finish() {
  goAway(NGHTTP2_NO_ERROR);
  abandon();
  releaseUpstreams();
  if (phase_ != Phase::Done) {
    move(Phase::Done);
  }
}

void Http2ServerCodec::goAway(std::uint32_t error_code) {
  if (phase_ != Phase::Open || !session_) {
    return;
  }
  move(Phase::GoingAway);
  nghttp2_submit_goaway(session_.get(), NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_.get()), error_code,
                        nullptr, 0);
  if (error_code == NGHTTP2_NO_ERROR) {
    return;  // the streams in flight finish; nghttp2 reads no new one
  }
  abandon();
  dropUpstreams();
}

}  // namespace sluice::proxy::session
