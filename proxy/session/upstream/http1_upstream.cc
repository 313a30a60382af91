#include "proxy/session/upstream/http1_upstream.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proxy/http/head_writer.h"

namespace sluice::proxy::session {

namespace {

// Room for a typical request head in a fresh scratch buffer.
constexpr std::size_t kHeadReserve = 512;

// Corked bytes for the upstream are written once they reach this.
constexpr std::size_t kCorkedUpstreamLimit = 16 * 1024;

// RFC 6455 §4.2.2: the Sec-WebSocket-Accept an origin that read `key` answers: the base64 of
// the SHA-1 of the key and this GUID (28 characters).
std::string websocketAccept(std::string_view key) {
  static constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr);
  EVP_DigestUpdate(ctx, key.data(), key.size());
  EVP_DigestUpdate(ctx, kGuid.data(), kGuid.size());
  EVP_DigestFinal_ex(ctx, digest, &digest_size);
  EVP_MD_CTX_free(ctx);
  char encoded[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded), digest,
                                static_cast<int>(digest_size));
  return std::string(encoded, static_cast<std::size_t>(n));
}

}  // namespace

Http1Upstream::Http1Upstream(ClientSide& host, UpstreamEvents& events,
                             std::size_t max_header_bytes)
    : host_(host), events_(events), parser_(max_header_bytes) {}

void Http1Upstream::attach(std::unique_ptr<UpstreamConnection> connection, std::string_view method,
                           http::Upgrade upgrade) {
  connection_ = std::move(connection);
  connection_->stream.setHandler(this);
  secret_ = false;
  last_byte_ = LastByte::Sent;
  body_left_ = 0;
  upgrade_ = upgrade;
  switched_ = false;
  parser_.reset();
  parser_.expect(method, upgrade);
}

void Http1Upstream::sendHead(const http::RequestHead& head, std::string_view target,
                             std::string_view host, std::span<const http::HeaderField> inject) {
  ++connection_->exchanges;
  framing_ = head.framing;
  body_left_ = framing_ == http::BodyFraming::ContentLength ? head.content_length : 0;
  secret_ = !inject.empty();
  scratch_.clear();
  if (scratch_.capacity() < kHeadReserve) {
    scratch_.reserve(kHeadReserve);  // one allocation, not one per doubling, for a fresh buffer
  }
  const std::optional<std::string_view> client_key = head.headers.find("sec-websocket-key");
  if (upgrade_ == http::Upgrade::WebSocket && !client_key) {
    // The HTTP/2 form (RFC 8441) carries no key: its HTTP/1.1 handshake gets one of sluice's
    // (RFC 6455 §4.1: 16 random bytes, base64), beside the rule's injected fields.
    unsigned char nonce[16];
    char key[25];
    RAND_bytes(nonce, sizeof nonce);
    EVP_EncodeBlock(reinterpret_cast<unsigned char*>(key), nonce, sizeof nonce);
    std::vector<http::HeaderField> fields(inject.begin(), inject.end());
    fields.push_back({"Sec-WebSocket-Key", std::string_view(key, 24)});
    http::writeRequestHead(scratch_, head, target, host, fields, upgrade_);
    expected_accept_ = websocketAccept(std::string_view(key, 24));
  } else {
    http::writeRequestHead(scratch_, head, target, host, inject, upgrade_);
    if (upgrade_ == http::Upgrade::WebSocket) {
      expected_accept_ = websocketAccept(*client_key);
    }
  }
  if (framing_ == http::BodyFraming::Chunked || body_left_ > 0) {
    send(scratch_);  // (a chunked body ends with its last chunk, at sendEnd)
  } else {
    sendHoldingLast(scratch_);  // no body, or Content-Length: 0
  }
  wipeIfSecret(scratch_);
}

void Http1Upstream::sendHoldingLast(std::string_view bytes) {
  if (bytes.empty()) {
    return;
  }
  send(bytes.substr(0, bytes.size() - 1));
  held_ = bytes.back();
  last_byte_ = LastByte::Held;
}

void Http1Upstream::sendBody(std::span<const char> data) {
  if (data.empty()) {
    return;
  }
  if (framing_ == http::BodyFraming::Chunked) {
    scratch_.clear();
    http::writeChunk(scratch_, data);
    send(scratch_);
    return;
  }
  if (framing_ != http::BodyFraming::ContentLength) {
    send(std::string_view(data.data(), data.size()));  // a WebSocket's bytes, after its 101
    return;
  }
  // Never more than the length the head declared (a stream that sends more is reset), and its
  // last byte only with the request's end.
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), body_left_));
  body_left_ -= n;
  const std::string_view bytes(data.data(), n);
  if (body_left_ == 0) {
    sendHoldingLast(bytes);
  } else {
    send(bytes);
  }
}

// A body with a Content-Length has no place for trailers in HTTP/1.1: they are dropped there
// (RFC 9110 section 6.5.1 lets a recipient discard them).
void Http1Upstream::sendEnd(const http::HeaderBlock* trailers,
                            std::span<const http::HeaderField> inject) {
  if (last_byte_ == LastByte::Held) {
    last_byte_ = LastByte::Sent;
    send(std::string_view(&held_, 1));  // the request is complete at the origin now
  }
  if (framing_ != http::BodyFraming::Chunked) {
    return;
  }
  if (trailers == nullptr || trailers->empty()) {
    send(http::kLastChunk);
    return;
  }
  scratch_.clear();
  http::writeRequestLastChunk(scratch_, *trailers, inject);
  send(scratch_);
}

void Http1Upstream::endWriting() {
  flushCorked();
  if (!connection_) {
    return;  // the write failed and the upstream is gone
  }
  if (connection_->tls) {
    connection_->tls->shutdown();
    flushTls();
  }
  connection_->stream.shutdownWrite();  // once what is queued has been written
}

void Http1Upstream::send(std::string_view bytes) {
  if (!connection_) {
    return;
  }
  if (host_.corked() && !bytes.empty()) {
    out_.append(bytes);
    if (out_.size() >= kCorkedUpstreamLimit) {
      host_.flushCorked();
    }
    return;
  }
  if (!out_.empty()) {
    host_.flushCorked();
  }
  writeNow(bytes);
}

// Writes what corked sends gathered. The buffer is swapped out while it is written (a failed
// write may come back here) and keeps its capacity.
void Http1Upstream::flushCorked() {
  if (out_.empty()) {
    return;
  }
  std::string pending;
  pending.swap(out_);
  writeNow(pending);
  wipeIfSecret(pending);
  pending.clear();
  out_.swap(pending);
}

void Http1Upstream::writeNow(std::string_view bytes) {
  if (!connection_ || bytes.empty()) {
    return;
  }
  if (!connection_->tls) {
    connection_->stream.write(bytes);
    return;
  }
  if (!connection_->tls->write(std::span<const char>(bytes.data(), bytes.size()))) {
    events_.onUpstreamFailed(policy::Reason::UpstreamConnect, "TLS write to upstream failed");
    return;
  }
  flushTls();
}

void Http1Upstream::flushTls() {
  if (!connection_ || !connection_->tls) {
    return;
  }
  std::span<const char> out = connection_->tls->peekCiphertext();
  connection_->stream.write(out);
  connection_->tls->consumeCiphertext(out.size());
}

void Http1Upstream::wipeIfSecret(std::string& buffer) const {
  if (secret_) {
    OPENSSL_cleanse(buffer.data(), buffer.capacity());
  }
}

void Http1Upstream::setReading(bool reading) {
  if (!connection_) {
    return;
  }
  if (reading && !connection_->stream.backedUp()) {
    connection_->stream.startReading();
  } else {
    connection_->stream.stopReading();
  }
}

void Http1Upstream::release(bool reusable, bool clean) {
  if (!connection_) {
    return;
  }
  // Corked bytes for this upstream (a last chunk) go before it is parked or closed.
  flushCorked();
  if (!connection_) {
    return;  // the write failed and the upstream is gone
  }
  if (connection_->tls && connection_->exchanges == 1 && clean) {
    // After its first response a connection has read the TLS 1.3 tickets: keep one for the
    // next connection to this key (once per connection, not per request).
    host_.context().pool->remember(connection_->key, connection_->tls->session());
  }
  if (reusable && host_.keepsUpstreams()) {
    host_.park(std::move(connection_));
    return;
  }
  host_.retire(std::move(connection_));
}

void Http1Upstream::drop() {
  if (connection_) {
    host_.retire(std::move(connection_));
  }
}

void Http1Upstream::releaseBuffers() {
  out_ = std::string();
  scratch_ = std::string();
}

void Http1Upstream::onRead(io::TcpStream& stream, std::span<const char> data) {
  Cork cork(host_);
  if (!connection_ || &stream != &connection_->stream) {
    return;
  }
  host_.noteProgress();  // the response (or the origin's TLS, bounded on its own: read())
  if (!connection_->tls) {
    processPlaintext(data);
  } else {
    connection_->tls->feed(data);
    // Read on only while this connection is still the one in use: an exchange that ended with
    // this plaintext may have let it go (parked, pooled, closed) and taken another.
    UpstreamConnection* reading = connection_.get();
    const tls::ReadStatus status =
        reading->tls->readEach([this, reading](std::span<const char> plain) {
          processPlaintext(plain);
          return connection_.get() == reading;
        });
    if (status == tls::ReadStatus::Data) {
      return;
    }
    flushTls();
    if (status == tls::ReadStatus::Closed) {
      onEof(connection_->stream);  // close_notify ends an until-close body like a FIN
      return;
    }
    if (status == tls::ReadStatus::Failed) {
      events_.onUpstreamFailed(policy::Reason::UpstreamConnect, connection_->tls->failure().detail);
      return;
    }
  }
  // What was just forwarded may have filled the client's queue: stop reading this side until
  // it drains, so a fast origin never makes sluice buffer a whole body.
  host_.updateReading();
}

void Http1Upstream::processPlaintext(std::span<const char> data) {
  if (switched_) {
    if (!data.empty()) {
      events_.onResponseBody(data);  // the origin's WebSocket bytes, as they come
    }
    return;
  }
  // After a head the parser may report the message's end without another byte (HEAD, 204,
  // 304, Content-Length: 0), so it is fed once more even when `data` is used up.
  bool end_pending = false;
  while ((!data.empty() || end_pending) && connection_) {
    end_pending = false;
    http::ParseEvent event = parser_.feed(data, *this);
    bool more = data.size() > event.consumed;
    data = data.subspan(event.consumed);
    if (host_.closing() || !connection_) {
      return;
    }
    switch (event.kind) {
      case http::EventKind::NeedMore:
        return;
      case http::EventKind::InterimHead:
        events_.onInterimHead(parser_.head());
        break;
      case http::EventKind::HeadComplete:
        if (parser_.head().framing == http::ResponseFraming::Switched) {
          // A 101 is a WebSocket only with the accept its key asks for (RFC 6455 §4.1: the
          // client fails the connection otherwise). sluice is that client toward the origin
          // for an HTTP/2 sandbox, whose stream carries no accept (docs/wire.md#websocket), and
          // checks it for an HTTP/1.1 one too: no byte is relayed as a WebSocket that the
          // origin did not agree to as one.
          if (parser_.head().headers.find("sec-websocket-accept") !=
              std::optional<std::string_view>(expected_accept_)) {
            events_.onUpstreamFailed(policy::Reason::UpstreamConnect,
                                     "the origin's 101 has no Sec-WebSocket-Accept for the key");
            return;
          }
          switched_ = true;
          events_.onResponseHead(parser_.head());
          if (more && connection_ && !host_.closing()) {
            events_.onResponseBody(data);  // WebSocket bytes in the read that ended the head
          }
          return;
        }
        events_.onResponseHead(parser_.head());
        end_pending = true;
        break;
      case http::EventKind::MessageComplete:
        events_.onResponseComplete(more);
        return;
      default:
        events_.onUpstreamFailed(policy::Reason::UpstreamConnect, event.detail);
        return;
    }
  }
}

void Http1Upstream::onResponseBody(std::span<const char> data) { events_.onResponseBody(data); }

void Http1Upstream::onEof(io::TcpStream& stream) {
  Cork cork(host_);
  if (!connection_ || &stream != &connection_->stream) {
    return;
  }
  if (switched_) {
    events_.onResponseEndedByClose();  // the origin ended the WebSocket
    return;
  }
  if (parser_.finish().kind == http::EventKind::MessageComplete) {
    events_.onResponseEndedByClose();
    return;
  }
  events_.onUpstreamFailed(policy::Reason::UpstreamConnect, "upstream closed the connection");
}

void Http1Upstream::onError(io::TcpStream& stream, int status) {
  Cork cork(host_);
  if (connection_ && &stream == &connection_->stream) {
    events_.onUpstreamFailed(policy::Reason::UpstreamConnect, uv_strerror(status));
  }
}

void Http1Upstream::onDrained(io::TcpStream&) { host_.onPeerDrained(); }

}  // namespace sluice::proxy::session
