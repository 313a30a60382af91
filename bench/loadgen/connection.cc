#include "bench/loadgen/connection.h"

#include <cassert>
#include <cstdio>

#include "bench/loadgen/h2_session.h"
#include "bench/loadgen/load_thread.h"

namespace sluice::loadgen {

using proxy::http::EventKind;
using proxy::io::TcpStream;
using proxy::tls::HandshakeStatus;
using proxy::tls::ReadStatus;
using proxy::tls::TlsSession;

Connection::Connection(LoadThread& owner, const Target& target) : owner_(owner), target_(target) {
  if (target_.proto == Proto::H2) {
    h2_ = std::make_unique<H2Session>(owner_, target_);
  }
}

Connection::~Connection() = default;

void Connection::open() {
  assert(state_ == State::Idle && !stream_);
  if (!owner_.running()) {
    return;
  }
  failed_ = false;
  held_ = false;
  status_ = 0;
  state_ = State::Connecting;
  connect_start_ns_ = uv_hrtime();
  last_progress_ms_ = uv_now(owner_.loop());
  stream_.emplace(owner_.loop(), this);
  if (int rc = stream_->connect(target_.dial); rc != 0) {
    fail(ErrorKind::Connect, uv_strerror(rc));
  }
}

void Connection::abandon() {
  switch (state_) {
    case State::Idle:
    case State::Closing:
      return;
    case State::Waiting:
      state_ = State::Idle;
      return;
    default:
      close();
  }
}

void Connection::releaseStream() {
  assert(state_ == State::Closing);
  stream_.reset();
  if (h2_) {
    h2_->end();  // not in close(): that may run inside one of nghttp2's callbacks
  }
  state_ = State::Idle;
}

void Connection::reopenAfter(std::uint64_t delay_ms, std::uint64_t now_ms) {
  if (delay_ms == 0) {
    open();
    return;
  }
  state_ = State::Waiting;
  reopen_at_ms_ = now_ms + delay_ms;
}

void Connection::tick(std::uint64_t now_ms) {
  if (state_ == State::Waiting && now_ms >= reopen_at_ms_) {
    state_ = State::Idle;
    open();
  } else if (active() && now_ms >= last_progress_ms_ + kProgressTimeoutMs) {
    fail(ErrorKind::Timeout, "no progress for 10 s");
  }
}

void Connection::onConnected(TcpStream&, int status) {
  if (status != 0) {
    fail(ErrorKind::Connect, uv_strerror(status));
    return;
  }
  last_progress_ms_ = uv_now(owner_.loop());
  stream_->startReading();
  if (target_.connect_request.empty()) {
    beginTls({});
    return;
  }
  state_ = State::ProxyHead;
  parser_.reset();
  // A 2xx answer to CONNECT has no body whatever its fields say: parse it like a HEAD answer.
  parser_.expect("HEAD");
  stream_->write(std::string_view(target_.connect_request));
}

void Connection::onRead(TcpStream&, std::span<const char> data) {
  last_progress_ms_ = uv_now(owner_.loop());
  switch (state_) {
    case State::ProxyHead:
      readProxyHead(data);
      return;
    case State::TlsHandshake:
      tls_->feed(data);
      driveHandshake();
      return;
    case State::Exchanging:
    case State::Holding:
      tls_->feed(data);
      drainTls();
      return;
    default:
      return;
  }
}

void Connection::readProxyHead(std::span<const char> data) {
  for (;;) {
    const proxy::http::ParseEvent event = parser_.feed(data, *this);
    switch (event.kind) {
      case EventKind::NeedMore:
        return;
      case EventKind::InterimHead:
        data = data.subspan(event.consumed);
        continue;
      case EventKind::HeadComplete: {
        if (int status = parser_.head().status; status / 100 != 2) {
          char text[48];
          std::snprintf(text, sizeof text, "CONNECT answered %d", status);
          fail(ErrorKind::Proxy, text);
          return;
        }
        parser_.reset();
        beginTls(data.subspan(event.consumed));
        return;
      }
      default:
        fail(ErrorKind::Proxy, event.detail);
        return;
    }
  }
}

void Connection::beginTls(std::span<const char> early) {
  auto session = TlsSession::client(target_.tls_context, target_.host);
  if (!session) {
    fail(ErrorKind::Tls, session.error());
    return;
  }
  tls_.emplace(std::move(session).value());
  state_ = State::TlsHandshake;
  tls_->feed(early);
  driveHandshake();
}

void Connection::driveHandshake() {
  const HandshakeStatus status = tls_->handshake();
  flushTls();
  if (status == HandshakeStatus::Done) {
    if (h2_) {
      startH2();
      return;
    }
    parser_.reset();
    sendRequest();
  } else if (status == HandshakeStatus::Failed) {
    const proxy::tls::Failure& failure = tls_->failure();
    if (h2_ && failure.kind == proxy::tls::FailureKind::Alert &&
        failure.alert == SSL_AD_NO_APPLICATION_PROTOCOL) {
      fail(ErrorKind::Tls, "ALPN: the server refused h2 (" + failure.detail + ")");
      return;
    }
    fail(ErrorKind::Tls, failure.detail);
  }
}

void Connection::sendRequest() {
  state_ = State::Exchanging;
  status_ = 0;
  parser_.expect("GET");
  request_start_ns_ = uv_hrtime();
  if (!tls_->write(target_.request)) {
    fail(ErrorKind::Tls, tls_->failure().detail);
    return;
  }
  flushTls();
}

void Connection::drainTls() {
  const std::span<char> buffer = owner_.plaintextBuffer();
  while (state_ == State::Exchanging || state_ == State::Holding) {
    std::size_t n = 0;
    switch (tls_->read(buffer, &n)) {
      case ReadStatus::Data:
        if (h2_) {  // a held h2 connection may get frames (PING, SETTINGS, GOAWAY)
          if (!receiveH2(buffer.first(n))) {
            return;
          }
          break;
        }
        if (state_ == State::Holding) {
          fail(ErrorKind::Http, "bytes on a held connection");
          return;
        }
        if (!parsePlaintext(buffer.first(n))) {
          return;
        }
        break;
      case ReadStatus::WantIo:
        flushTls();  // TLS 1.3 post-handshake messages may want an answer
        if (state_ == State::Holding) {
          // A held connection should cost the generator as little as it costs the proxy:
          // OpenSSL's record buffers (33 KiB) go until the next record arrives.
          tls_->releaseBuffers();
          stream_->releaseBuffers();
          if (h2_) {
            h2_->releaseBuffers();
          }
        }
        return;
      case ReadStatus::Closed:
        flushTls();
        onPeerClosed();
        return;
      case ReadStatus::Failed:
        flushTls();
        fail(ErrorKind::Tls, tls_->failure().detail);
        return;
    }
  }
}

bool Connection::parsePlaintext(std::span<const char> data) {
  for (;;) {
    const proxy::http::ParseEvent event = parser_.feed(data, *this);
    switch (event.kind) {
      case EventKind::NeedMore:
        return true;
      case EventKind::InterimHead:
        data = data.subspan(event.consumed);
        continue;
      case EventKind::HeadComplete:
        status_ = parser_.head().status;
        data = data.subspan(event.consumed);  // fed even when empty: a body-less response
        continue;                             // completes on that call
      case EventKind::MessageComplete:
        if (event.consumed != data.size()) {
          fail(ErrorKind::Http, "bytes after the response");
          return false;
        }
        onResponseComplete();
        return state_ == State::Exchanging || state_ == State::Holding;
      default:
        fail(ErrorKind::Http, event.detail.empty() ? "malformed response" : event.detail);
        return false;
    }
  }
}

void Connection::onResponseComplete() {
  const bool keep_alive = parser_.head().keep_alive;
  const bool ok = status_ / 100 == 2;
  if (ok) {
    consecutive_failures_ = 0;
    const bool from_connect = target_.mode == Mode::NewConn || target_.mode == Mode::Idle;
    owner_.onResponse(uv_hrtime() - (from_connect ? connect_start_ns_ : request_start_ns_));
  } else {
    char text[48];
    std::snprintf(text, sizeof text, "response status %d", status_);
    owner_.onFailure(ErrorKind::Status, text);  // the request failed, not the connection
  }
  if (state_ != State::Exchanging) {
    return;  // the run ended with this response
  }
  switch (target_.mode) {
    case Mode::KeepAlive:
    case Mode::Bulk:
      if (keep_alive && owner_.running()) {
        sendRequest();
      } else {
        finish();  // e.g. nginx's keepalive_requests: a new connection, not an error
      }
      return;
    case Mode::NewConn:
      finish();
      return;
    case Mode::Idle:
      if (!ok) {
        failed_ = true;  // counted above; the owner retries the connection
        ++consecutive_failures_;
        close();
        return;
      }
      state_ = State::Holding;  // drainTls() frees the buffers once nothing is left to read
      held_ = true;
      owner_.onHeld();
      return;
  }
}

void Connection::startH2() {
  if (const std::string_view agreed = tls_->alpn(); agreed != "h2") {
    fail(ErrorKind::Tls, agreed.empty()
                             ? "ALPN: the server agreed to no protocol, not h2"
                             : "ALPN: the server chose " + std::string(agreed) + ", not h2");
    return;
  }
  state_ = State::Exchanging;
  const bool from_connect = target_.mode == Mode::NewConn || target_.mode == Mode::Idle;
  if (!h2_->begin(from_connect ? connect_start_ns_ : uv_hrtime())) {
    fail(h2_->failureKind(), h2_->failure());
    return;
  }
  if (flushH2()) {
    drainTls();  // the server's first frames may have come with the end of the handshake
  }
}

bool Connection::receiveH2(std::span<const char> data) {
  h2_->receive(data);
  if (state_ != State::Exchanging && state_ != State::Holding) {
    return false;  // the run ended inside (a --requests quota reached)
  }
  if (h2_->anySucceeded()) {
    consecutive_failures_ = 0;
  }
  // What the session has to send goes out first: SETTINGS and PING acks, window updates, the
  // next streams' HEADERS, or the GOAWAY that explains a failure.
  if (!flushH2()) {
    return false;  // failed (counted and closed), the session's failure included
  }
  // Done is known only now: requests queued when a GOAWAY came end inside mem_send.
  if (h2_->status() == H2Session::Status::Done && state_ == State::Exchanging) {
    onH2Done();
  }
  return state_ == State::Exchanging || state_ == State::Holding;
}

bool Connection::flushH2() {
  const std::span<const char> frames = h2_->output();
  if (state_ != State::Exchanging && state_ != State::Holding) {
    return false;  // a request nghttp2 could not send was counted, and ended the run
  }
  if (!frames.empty() && !tls_->write(frames)) {
    fail(ErrorKind::Tls, tls_->failure().detail);
    return false;
  }
  flushTls();
  if (h2_->status() == H2Session::Status::Failed) {
    fail(h2_->failureKind(), h2_->failure());
    return false;
  }
  return true;
}

void Connection::onH2Done() {
  switch (target_.mode) {
    case Mode::KeepAlive:
    case Mode::Bulk:
    case Mode::NewConn:
      finish();  // keepalive, bulk: the server's GOAWAY; a new connection follows
      return;
    case Mode::Idle:
      if (!h2_->lastSucceeded()) {
        failed_ = true;  // counted by the session; the owner retries the connection
        ++consecutive_failures_;
        close();
        return;
      }
      state_ = State::Holding;
      held_ = true;
      owner_.onHeld();
      return;
  }
}

void Connection::onPeerClosed() {
  switch (state_) {
    case State::Exchanging:
      if (h2_) {
        fail(ErrorKind::Closed, "closed with h2 streams in flight");
        return;
      }
      if (status_ != 0) {
        // A body delimited by the close completes here; anything else was cut short.
        const proxy::http::ParseEvent event = parser_.finish();
        if (event.kind == EventKind::MessageComplete) {
          onResponseComplete();
          if (state_ == State::Holding) {
            fail(ErrorKind::Dropped, "peer closed after an until-close response");
          }
          return;
        }
        fail(ErrorKind::Closed, event.detail.empty() ? "closed mid-response" : event.detail);
        return;
      }
      fail(ErrorKind::Closed, "closed before the response");
      return;
    case State::Holding:
      fail(ErrorKind::Dropped, "peer closed a held connection");
      return;
    case State::ProxyHead:
      fail(ErrorKind::Proxy, "proxy closed before answering CONNECT");
      return;
    case State::Connecting:
    case State::TlsHandshake:
      fail(ErrorKind::Tls, "closed during the TLS handshake");
      return;
    default:
      return;
  }
}

void Connection::onEof(TcpStream&) { onPeerClosed(); }

void Connection::onError(TcpStream&, int uv_status) {
  fail(state_ == State::Connecting ? ErrorKind::Connect : ErrorKind::Closed,
       uv_strerror(uv_status));
}

void Connection::onDrained(TcpStream&) {}

void Connection::onClosed(TcpStream&) { owner_.onConnectionClosed(*this); }

void Connection::onResponseBody(std::span<const char> data) { owner_.countBody(data.size()); }

void Connection::flushTls() {
  if (!tls_ || tls_->pendingCiphertext() == 0) {
    return;
  }
  // TcpStream tries the socket at once and keeps only what the kernel did not take.
  const std::span<const char> pending = tls_->peekCiphertext();
  stream_->write(pending);
  tls_->consumeCiphertext(pending.size());
}

void Connection::fail(ErrorKind kind, std::string_view detail) {
  if (state_ == State::Idle || state_ == State::Waiting || state_ == State::Closing) {
    return;
  }
  if (state_ == State::Holding) {
    kind = ErrorKind::Dropped;
  }
  failed_ = true;
  ++consecutive_failures_;
  owner_.onFailure(kind, detail);  // may end the run, which closes this connection
  close();
}

void Connection::finish() {
  failed_ = false;
  if (h2_ && h2_->active() && tls_ && tls_->handshakeDone()) {
    h2_->goAway();  // the polite end of an HTTP/2 connection, then TLS's
    const std::span<const char> frames = h2_->output();
    if (state_ == State::Closing) {
      return;  // the run ended inside
    }
    if (!frames.empty()) {
      (void)tls_->write(frames);  // closing either way
    }
  }
  if (tls_ && tls_->handshakeDone()) {
    tls_->shutdown();  // close_notify, as a well-behaved client sends
    flushTls();
  }
  close();
}

void Connection::close() {
  if (state_ == State::Closing || state_ == State::Idle || state_ == State::Waiting) {
    return;
  }
  state_ = State::Closing;
  tls_.reset();
  stream_->close();
}

}  // namespace sluice::loadgen
