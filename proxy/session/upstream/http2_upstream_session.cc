#include "proxy/session/upstream/http2_upstream_session.h"

#include <spdlog/spdlog.h>
#include <uv.h>

#include <algorithm>
#include <string>
#include <vector>

#include "proxy/session/context/state_change.h"
#include "proxy/session/upstream/http2_upstream_stream.h"

namespace sluice::proxy::session {

namespace {

}  // namespace

// nghttp2's callbacks, each forwarding to the stream it names, corked on that stream's client.
struct Http2UpstreamSession::Callbacks {
  static Http2UpstreamSession& self(void* user_data) {
    return *static_cast<Http2UpstreamSession*>(user_data);
  }

  // nghttp2 pulls a request's DATA. The stream is looked up by its id, never kept as the data
  // source's pointer: a stream let go (its exchange over, its object reused for the next request
  // or freed) while nghttp2 still held its DATA is no longer in the map, and nghttp2 resets it
  // instead of reading another request's bytes, or freed memory.
  static ssize_t readRequestBody(nghttp2_session*, std::int32_t stream_id, std::uint8_t* buf,
                                 std::size_t length, std::uint32_t* flags, nghttp2_data_source*,
                                 void* user_data) {
    Http2UpstreamStream* stream = self(user_data).streamOf(stream_id);
    if (stream == nullptr) {
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    bool eof = false;
    const long n = stream->readRequest(buf, length, eof);
    if (eof) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (stream->submitTrailers()) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;  // the trailers' HEADERS ends the stream
      }
    }
    return n;
  }

  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t name_length, const std::uint8_t* value, std::size_t value_length,
                      std::uint8_t /*flags*/, void* user_data) {
    Http2UpstreamStream* stream = self(user_data).streamOf(frame->hd.stream_id);
    if (stream == nullptr || frame->hd.type != NGHTTP2_HEADERS) {
      return 0;
    }
    const std::string_view n(reinterpret_cast<const char*>(name), name_length);
    const std::string_view v(reinterpret_cast<const char*>(value), value_length);
    if (stream->onField(n, v)) {
      return 0;
    }
    // Over max_header_bytes: the exchange fails (502, or a cut), then nghttp2 resets the stream.
    self(user_data).holdCorked(stream->host());
    Cork cork(stream->host());
    stream->onHeadTooLarge();
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }

  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Http2UpstreamSession& session = self(user_data);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      // No new stream; those above last_stream_id nghttp2 closes as refused (REFUSED_STREAM).
      if (session.phase_ == Phase::Open) {
        session.move(Phase::GoingAway);
      }
      return 0;
    }
    Http2UpstreamStream* stream = session.streamOf(frame->hd.stream_id);
    if (stream == nullptr) {
      return 0;
    }
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    session.holdCorked(stream->host());
    Cork cork(stream->host());
    if (frame->hd.type == NGHTTP2_HEADERS) {
      stream->onHeadersEnd(end_stream);
    } else if (frame->hd.type == NGHTTP2_DATA && end_stream) {
      stream->onEndStream();
    }
    return 0;
  }

  static int onDataChunk(nghttp2_session* s, std::uint8_t /*flags*/, std::int32_t stream_id,
                         const std::uint8_t* data, std::size_t length, void* user_data) {
    // The connection's window goes back at once; the stream's as its client takes the bytes.
    nghttp2_session_consume_connection(s, length);
    Http2UpstreamStream* stream = self(user_data).streamOf(stream_id);
    if (stream == nullptr) {
      nghttp2_session_consume_stream(s, stream_id, length);
      return 0;
    }
    self(user_data).holdCorked(stream->host());
    Cork cork(stream->host());
    stream->onData(std::span<const char>(reinterpret_cast<const char*>(data), length));
    return 0;
  }

  // A request's HEADERS went: its stream exists in nghttp2 now, and its window can be set.
  static int onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      if (Http2UpstreamStream* stream = self(user_data).streamOf(frame->hd.stream_id)) {
        stream->onHeadersSent();
      }
    }
    return 0;
  }

  static int onStreamClose(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code,
                           void* user_data) {
    Http2UpstreamSession& session = self(user_data);
    Http2UpstreamStream* stream = session.streamOf(stream_id);
    if (stream == nullptr) {
      return 0;
    }
    session.streams_.erase(stream_id);
    if (session.streams_.empty()) {
      session.noteIdle();  // (held as idle once nghttp2 has returned: flush())
    }
    session.holdCorked(stream->host());
    Cork cork(stream->host());
    stream->onClosed(error_code);
    return 0;
  }
};

Http2UpstreamSession::Http2UpstreamSession(Http2UpstreamSessions& owner,
                                           std::unique_ptr<UpstreamConnection> connection,
                                           std::size_t max_header_bytes)
    : owner_(owner), connection_(std::move(connection)), max_header_bytes_(max_header_bytes) {
  connection_->stream.setHandler(this);
}

Http2UpstreamSession::~Http2UpstreamSession() {
  for (const auto& [id, stream] : streams_) {
    stream->onSessionEnded({});
  }
  if (connection_) {
    owner_.pool().retire(std::move(connection_));
  }
}

http::Http2Session Http2UpstreamSession::newClientSession(const http::Http2Callbacks& callbacks,
                                                          void* user_data,
                                                          std::size_t max_header_bytes) {
  return http::Http2Session::make(http::Http2Session::Role::Client, callbacks, user_data,
                                  {kMaxStreams, kStreamWindow, kConnectionWindow, max_header_bytes});
}

bool Http2UpstreamSession::start() {
  http::Http2Callbacks callbacks;
  callbacks.on_header = Callbacks::onHeader;
  callbacks.on_frame_recv = Callbacks::onFrameRecv;
  callbacks.on_data_chunk_recv = Callbacks::onDataChunk;
  callbacks.on_stream_close = Callbacks::onStreamClose;
  callbacks.on_frame_send = Callbacks::onFrameSend;
  session_ = newClientSession(callbacks, this, max_header_bytes_);
  if (!session_) {
    return false;
  }
  connection_->stream.startReading();
  flush();
  return true;
}

bool Http2UpstreamSession::acceptsStreams() const {
  if (phase_ != Phase::Open || !session_ ||
      nghttp2_session_check_request_allowed(session_.get()) == 0) {
    return false;
  }
  const std::uint32_t allowed = std::min(
      kMaxStreams,
      nghttp2_session_get_remote_settings(session_.get(), NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS));
  return streams_.size() < allowed;
}

Http2UpstreamStream* Http2UpstreamSession::streamOf(std::int32_t id) const {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

std::int32_t Http2UpstreamSession::submitRequest(Http2UpstreamStream& stream,
                                                 std::span<const nghttp2_nv> nva, bool with_body) {
  nghttp2_data_provider provider{};
  provider.read_callback = Callbacks::readRequestBody;
  const std::int32_t id = nghttp2_submit_request(session_.get(), nullptr, nva.data(), nva.size(),
                                                 with_body ? &provider : nullptr, nullptr);
  if (id > 0) {
    streams_[id] = &stream;
    if (idle_since_ms_ != 0) {
      idle_since_ms_ = 0;
      owner_.pool().releaseIdle(*this);  // a stream again: no longer an idle connection
    }
  }
  return id;
}

bool Http2UpstreamSession::submitTrailer(std::int32_t id, std::span<const nghttp2_nv> nva) {
  return session_ && nghttp2_submit_trailer(session_.get(), id, nva.data(), nva.size()) == 0;
}

void Http2UpstreamSession::resumeData(std::int32_t id) {
  if (session_) {
    nghttp2_session_resume_data(session_.get(), id);
  }
}

void Http2UpstreamSession::forget(std::int32_t id, bool reset) {
  // (An id it does not know: a stream let go before it was opened, or after it closed. The
  // session may be left with none all the same.)
  const bool known = streams_.erase(id) != 0;
  if (known && reset && session_ &&
      nghttp2_session_find_stream(session_.get(), id) != nullptr) {
    // The origin hears that nobody waits for this answer (a cancelled gRPC call, a client gone).
    nghttp2_submit_rst_stream(session_.get(), NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }
  if (streams_.empty()) {
    noteIdle();
  }
  flush();
}

void Http2UpstreamSession::noteIdle() {
  if (idle_since_ms_ == 0) {
    idle_since_ms_ = uv_now(owner_.loop());
  }
}

void Http2UpstreamSession::holdIfIdle() {
  if (phase_ == Phase::Open && streams_.empty() && idle_since_ms_ != 0 && depth_ == 0) {
    owner_.pool().holdIdle(*this);  // (it may end this session at once: over a bound)
  }
}

void Http2UpstreamSession::setStreamWindow(std::int32_t id, std::size_t bytes) {
  if (session_) {
    nghttp2_session_set_local_window_size(session_.get(), NGHTTP2_FLAG_NONE, id,
                                          static_cast<std::int32_t>(bytes));
  }
}

void Http2UpstreamSession::consume(std::int32_t id, std::size_t bytes) {
  if (session_ && bytes > 0) {
    nghttp2_session_consume_stream(session_.get(), id, bytes);
  }
}

void Http2UpstreamSession::rememberTlsSession() {
  if (!ticket_kept_ && connection_ && connection_->tls) {
    ticket_kept_ = true;
    owner_.pool().remember(connection_->key, connection_->tls->session());
  }
}

// ---------------------------------------------------------------------------------------------
// Bytes in and out.

void Http2UpstreamSession::onRead(io::TcpStream&, std::span<const char> data) {
  if (phase_ == Phase::Ended) {
    return;
  }
  struct ReadBatch {
    explicit ReadBatch(Http2UpstreamSession& s) : session(s) { session.reading_ = true; }
    ~ReadBatch() { session.releaseCorks(); }
    Http2UpstreamSession& session;
  } batch(*this);
  tls::TlsSession& tls = *connection_->tls;
  tls.feed(data);
  const tls::ReadStatus status = tls.readEach([this](std::span<const char> plain) {
    receive(plain);
    return phase_ != Phase::Ended;
  });
  if (phase_ == Phase::Ended) {
    return;
  }
  flushTls();
  if (status == tls::ReadStatus::Closed) {
    end("the origin closed the connection");
    return;
  }
  if (status == tls::ReadStatus::Failed) {
    end(tls.failure().detail);
    return;
  }
  flush();
}

void Http2UpstreamSession::holdCorked(ClientSide& host) {
  if (reading_ && std::find(corked_.begin(), corked_.end(), &host) == corked_.end()) {
    host.cork();
    corked_.push_back(&host);
  }
}

void Http2UpstreamSession::releaseCorks() {
  reading_ = false;  // (so nothing an uncork sets off adds to corked_ while it is walked)
  for (ClientSide* host : corked_) {
    host->uncork();  // (its connection is freed on a later turn at the earliest)
  }
  corked_.clear();  // the capacity stays, for the next read
}

void Http2UpstreamSession::receive(std::span<const char> plaintext) {
  ++depth_;
  const long n = session_.receive(plaintext);
  --depth_;
  if (n < 0) {
    // A connection error: nghttp2 has queued GOAWAY; it goes before the session ends.
    SPDLOG_DEBUG("h2 upstream {}: {}", connection_->key.host,
                 nghttp2_strerror(static_cast<int>(n)));
    writeNow();
    end(std::string("the origin broke HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
  }
}

void Http2UpstreamSession::flush() {
  if (depth_ > 0) {
    flush_wanted_ = true;  // after nghttp2 returns
    return;
  }
  do {
    flush_wanted_ = false;
    writeNow();
    reportDrained();
  } while (flush_wanted_ && phase_ != Phase::Ended);
  maybeRetire();
  holdIfIdle();
}

void Http2UpstreamSession::writeNow() {
  if (!session_ || phase_ == Phase::Ended) {
    return;
  }
  ++depth_;
  bool failed = false;
  session_.drain([&](std::string_view bytes) {
    failed = failed || !connection_->tls->write(std::span<const char>(bytes.data(), bytes.size()));
  });
  --depth_;
  if (failed) {
    end("TLS write to the origin failed");
    return;
  }
  flushTls();
}

void Http2UpstreamSession::flushTls() {
  std::span<const char> out = connection_->tls->peekCiphertext();
  if (!out.empty()) {
    connection_->stream.write(out);
    connection_->tls->consumeCiphertext(out.size());
  }
}

void Http2UpstreamSession::waitForDrain(std::int32_t id) { drain_waiters_.push_back(id); }

void Http2UpstreamSession::reportDrained() {
  if (backedUp() || drain_waiters_.empty()) {
    return;
  }
  std::vector<std::int32_t> ids;
  ids.swap(drain_waiters_);
  for (std::int32_t id : ids) {
    if (Http2UpstreamStream* stream = streamOf(id)) {
      stream->reportDrainedIfSo();
    }
  }
  if (drain_waiters_.empty()) {
    ids.clear();
    drain_waiters_.swap(ids);  // the capacity stays
  }
}

// A session serves the streams of many client connections: its moves are logged as no one's
// (connection 0).
void Http2UpstreamSession::move(Phase next) {
  changeState(owner_.context(), 0, kOriginSessionMachine, phase_, next);
}

void Http2UpstreamSession::retireWhenIdle() {
  if (phase_ == Phase::Open) {
    move(Phase::GoingAway);  // no new stream; those in flight finish (as after a GOAWAY)
  }
  maybeRetire();
}

void Http2UpstreamSession::maybeRetire() {
  if (phase_ == Phase::GoingAway && streams_.empty()) {
    end({});
  }
}

void Http2UpstreamSession::onEof(io::TcpStream&) { end("the origin closed the connection"); }

void Http2UpstreamSession::onError(io::TcpStream&, int status) { end(uv_strerror(status)); }

void Http2UpstreamSession::onDrained(io::TcpStream&) { flush(); }

void Http2UpstreamSession::end(std::string_view why) {
  if (phase_ == Phase::Ended) {
    return;
  }
  owner_.pool().releaseIdle(*this);
  if (why.empty() && session_ && depth_ == 0) {
    // Ended by sluice (idle, retired, shutting down), not by a failure: GOAWAY with NO_ERROR
    // first, so the origin can tell a goodbye from a lost connection (RFC 9113 §6.8: an
    // endpoint SHOULD send it before closing). It goes out with the write it is queued by, ahead
    // of the close. (A failure already queued GOAWAY with its code, or has no connection left.)
    nghttp2_session_terminate_session(session_.get(), NGHTTP2_NO_ERROR);
    writeNow();
    if (phase_ == Phase::Ended) {
      return;  // the write failed, and ended it
    }
  }
  move(Phase::Ended);
  std::string reason(why);  // (may point into the connection)
  // Every stream hears it once, corked on its own client; each lets the session go.
  std::vector<Http2UpstreamStream*> streams;
  streams.reserve(streams_.size());
  for (const auto& [id, stream] : streams_) {
    streams.push_back(stream);
  }
  streams_.clear();
  for (Http2UpstreamStream* stream : streams) {
    if (reason.empty()) {
      stream->onSessionEnded({});
      continue;
    }
    Cork cork(stream->host());
    stream->onSessionEnded(reason);
  }
  owner_.retire(this);
}

// ---------------------------------------------------------------------------------------------
// The registry.

Http2UpstreamSessions::Http2UpstreamSessions(WorkerContext& context, UpstreamPool& pool)
    : context_(context), pool_(pool), ended_(context.loop) {}

Http2UpstreamSessions::~Http2UpstreamSessions() = default;

Http2UpstreamSession* Http2UpstreamSessions::find(const UpstreamKey& key) const {
  Http2UpstreamSession* best = nullptr;
  const auto [first, last] = sessions_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    Http2UpstreamSession* s = it->second.get();
    if (s->acceptsStreams() && (best == nullptr || s->streams() > best->streams())) {
      best = s;
    }
  }
  return best;
}

Http2UpstreamSession* Http2UpstreamSessions::adopt(std::unique_ptr<UpstreamConnection> connection,
                                                   std::size_t max_header_bytes) {
  const UpstreamKey key = connection->key;
  auto session =
      std::make_unique<Http2UpstreamSession>(*this, std::move(connection), max_header_bytes);
  Http2UpstreamSession* raw = session.get();
  sessions_.emplace(key, std::move(session));
  if (!raw->start()) {
    raw->end({});
    return nullptr;
  }
  return raw;
}

void Http2UpstreamSessions::dialStarted(const UpstreamKey& key) { ++dials_[key].under_way; }

void Http2UpstreamSessions::dialOver(const UpstreamKey& key) {
  auto it = dials_.find(key);
  if (it == dials_.end()) {
    return;
  }
  if (it->second.under_way > 0) {
    --it->second.under_way;
  }
  // The waiters look again: a session now takes them, or (when no dial is left) they dial
  // themselves. Each may start a dial, join another, or end its request: a copy is walked.
  std::vector<DialWaiter*> waiters;
  waiters.swap(it->second.waiters);
  if (it->second.under_way == 0) {
    dials_.erase(it);
  }
  for (DialWaiter* waiter : waiters) {
    waiter->onDialOver();
  }
}

bool Http2UpstreamSessions::join(const UpstreamKey& key, DialWaiter& waiter) {
  auto it = dials_.find(key);
  if (it == dials_.end() || it->second.under_way == 0) {
    return false;
  }
  it->second.waiters.push_back(&waiter);
  return true;
}

void Http2UpstreamSessions::leave(const UpstreamKey& key, DialWaiter& waiter) {
  auto it = dials_.find(key);
  if (it != dials_.end()) {
    std::erase(it->second.waiters, &waiter);
  }
}

void Http2UpstreamSessions::retire(Http2UpstreamSession* session) {
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second.get() == session) {
      ended_.add(std::move(it->second));
      sessions_.erase(it);
      return;
    }
  }
}

void Http2UpstreamSessions::endWhere(const std::function<bool(const UpstreamKey&)>& unusable) {
  std::vector<Http2UpstreamSession*> going;
  for (const auto& [key, session] : sessions_) {
    if (unusable(key)) {
      going.push_back(session.get());
    }
  }
  for (Http2UpstreamSession* session : going) {
    session->retireWhenIdle();
  }
}

void Http2UpstreamSessions::close(std::function<void()> done) {
  while (!sessions_.empty()) {
    sessions_.begin()->second->end({});
  }
  ended_.close(std::move(done));
}

}  // namespace sluice::proxy::session
