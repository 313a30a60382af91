#pragma once
// An exchange's request on an HTTP/1.1 upstream connection (plain or TLS), and its response
// parsed as it comes (http::ResponseParser): the UpstreamChannel of HTTP/1.1. It writes the head
// sluice builds (http::writeRequestHead), the body in the framing it is forwarded with (chunked
// when its length is unknown), gathers writes while the connection is corked, and reports what
// the upstream answers to the exchange (UpstreamEvents). Between exchanges the connection is
// the client's (parked) or the pool's; the channel holds it only while an exchange uses it.
//
// Owned by its exchange. While attached it is the connection's stream handler; release() and
// drop() hand the connection on (parked, pooled or closing), so no callback reaches a channel
// that let it go.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"
#include "proxy/io/tcp_stream.h"
#include "proxy/session/context/client_side.h"
#include "proxy/session/upstream/upstream_channel.h"

namespace sluice::proxy::session {

class Http1Upstream final : public UpstreamChannel,
                            private io::TcpStream::Handler,
                            private http::ResponseBodySink {
 public:
  Http1Upstream(ClientSide& host, UpstreamEvents& events, std::size_t max_header_bytes);
  ~Http1Upstream() override = default;
  Http1Upstream(const Http1Upstream&) = delete;
  Http1Upstream& operator=(const Http1Upstream&) = delete;

  // The connection this exchange's request goes on, from the connector; the response to
  // `method` is expected on it. `upgrade` WebSocket: a rule allowed the upgrade the request
  // asked for; the head asks the origin for it, and a 101 to it turns the channel into a
  // relay (the response's "body" is then the origin's WebSocket bytes, ended by its close).
  void attach(std::unique_ptr<UpstreamConnection> connection, std::string_view method,
              http::Upgrade upgrade);

  // --- UpstreamChannel
  bool attached() const override { return connection_ != nullptr; }
  audit::Proto protocol() const override { return audit::Proto::Http1; }
  void sendHead(const http::RequestHead& head, std::string_view target, std::string_view host,
                std::span<const http::HeaderField> inject) override;
  void sendBody(std::span<const char> data) override;
  void sendEnd(const http::HeaderBlock* trailers,
               std::span<const http::HeaderField> inject) override;
  void endWriting() override;
  void flushCorked() override;
  bool backedUp() const override { return connection_ && connection_->stream.backedUp(); }
  void setReading(bool reading) override;
  void bodyTaken(std::size_t) override {}  // (TCP's flow control: setReading())
  void release(bool reusable, bool clean) override;
  void drop() override;
  bool responseKeepsAlive() const override { return parser_.head().keep_alive; }
  // (Trailers of a chunked response are read and dropped by the parser.)
  const http::HeaderBlock* trailers() const override { return nullptr; }
  void discardCorked() override { out_.clear(); }
  void releaseBuffers() override;

 private:
  void onRead(io::TcpStream& stream, std::span<const char> data) override;
  void onEof(io::TcpStream& stream) override;
  void onError(io::TcpStream& stream, int status) override;
  void onDrained(io::TcpStream& stream) override;
  void onConnected(io::TcpStream&, int) override {}
  void onClosed(io::TcpStream&) override {}  // (a closing connection is the client's)
  void onResponseBody(std::span<const char> data) override;

  void send(std::string_view bytes);
  void writeNow(std::string_view bytes);
  void flushTls();
  void processPlaintext(std::span<const char> data);
  // Sends `bytes` but their last byte, which waits for sendEnd().
  void sendHoldingLast(std::string_view bytes);
  // Overwrites a buffer that held a head with an injected secret.
  void wipeIfSecret(std::string& buffer) const;

  ClientSide& host_;
  UpstreamEvents& events_;
  std::unique_ptr<UpstreamConnection> connection_;
  http::ResponseParser parser_;
  http::BodyFraming framing_ = http::BodyFraming::None;  // of the request, as forwarded
  // The origin never has a complete request before the client has sent all of it (its end:
  // sendEnd()): the last byte of a head without a body, or of a Content-Length body, is held
  // until then. An HTTP/2 stream's DATA may reach its declared length and go on, or a stream
  // that declared 0 may send DATA (RFC 9113 §8.1.1: malformed); the stream is reset, and the
  // origin, which has not had that byte, has no request to act on (docs/wire.md#http2).
  enum class LastByte : std::uint8_t { Sent, Held };
  LastByte last_byte_ = LastByte::Sent;
  char held_ = 0;
  std::uint64_t body_left_ = 0;  // of a Content-Length body, not sent yet
  bool secret_ = false;  // the head carries an injected secret: wipe what it passed through
  http::Upgrade upgrade_ = http::Upgrade::None;  // asked of the origin with the head
  bool switched_ = false;  // the origin's 101 came: its bytes are relayed, never parsed
  std::string expected_accept_;  // of a WebSocket upgrade: the Sec-WebSocket-Accept its key asks
  std::string out_;      // corked bytes for the upstream
  std::string scratch_;  // the head and chunk framing being written; reused
};

}  // namespace sluice::proxy::session
