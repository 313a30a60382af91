#pragma once
// HTTP/1.1 toward the sandbox: the client's plaintext in, requests out; responses in, bytes
// out. It feeds http::RequestParser (strict: every smuggling shape is refused) for as long as
// the connection and its exchange want request bytes, hands each head to the connection (which
// starts the exchange) and the body, de-chunked, to the exchange; it holds what a pipelining
// client sends ahead (up to kPipelineBudget before the connection stops reading) and never
// reads on after a denial (the connection closes). As the exchange's Downstream it writes the
// response head sluice builds (http::writeResponseHead), the body in the client's framing (a
// body of unknown length is re-chunked so the client keeps its connection), 1xx answers and
// sluice's own denials.
//
// Owned by the connection (CodecHost); the exchange it serves is the connection's too.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "policy/reason.h"
#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"
#include "proxy/session/connection_state.h"
#include "proxy/session/downstream.h"

namespace sluice::proxy::session {

class Exchange;

// What the codec asks of its connection.
class CodecHost {
 public:
  virtual ConnectionState state() const = 0;
  virtual bool closing() const = 0;
  virtual void sendClient(std::string_view bytes) = 0;
  virtual void sendClientFinal(std::string_view bytes) = 0;
  virtual bool clientBackedUp() const = 0;
  virtual void noteProgress() = 0;
  // The connection closes after the exchange in progress (the response head says so).
  virtual bool closesAfterExchange() const = 0;
  virtual void closeAfterExchange() = 0;
  // A request head began between requests: it must be complete within handshake_timeout.
  virtual void onHeadBegun() = 0;
  virtual void onConnectHead(const http::RequestHead& head) = 0;
  virtual void onRequestHead(const http::RequestHead& head) = 0;
  // The parser refused what the client sent (400 or 431).
  virtual void onBadRequest(policy::Reason reason, std::string_view detail) = 0;

 protected:
  ~CodecHost() = default;
};

class Http1ServerCodec final : public Downstream, private http::RequestBodySink {
 public:
  // Plaintext of requests pipelined behind the one in progress that is held before the
  // connection stops reading the client.
  static constexpr std::size_t kPipelineBudget = 16 * 1024;

  Http1ServerCodec(CodecHost& host, Exchange& exchange, std::size_t max_header_bytes);
  Http1ServerCodec(const Http1ServerCodec&) = delete;
  Http1ServerCodec& operator=(const Http1ServerCodec&) = delete;

  // Client plaintext, kept until the parser takes it; in a WebSocket (Tunneling) it goes to the
  // exchange as it comes, unless bytes from before the switch are still held.
  void feed(std::span<const char> plaintext);
  // Parses what it holds for as long as the connection and the exchange want request bytes.
  void process();
  // Bytes held and not parsed yet.
  std::size_t pending() const { return plain_.size() - offset_; }
  // After a CONNECT head: the bytes that followed it are the tunnel's, never parsed.
  std::string_view unparsed() const { return std::string_view(plain_).substr(offset_); }
  void dropUnparsed();
  // A new byte stream (the requests inside a tunnel once TLS is terminated).
  void restart() { parser_.reset(); }
  // Whether the client is read now (before the connection's backed-up rule).
  bool wantsBytes() const;
  // What a head the parser refused showed, for its record.
  http::RequestParser::PartialHead partialHead() const { return parser_.partialHead(); }
  void releaseBuffers();

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
  audit::Proto protocol() const override { return audit::Proto::Http1; }

 private:
  void onRequestBody(std::span<const char> data) override;
  bool mayParse() const;
  bool tunneling() const;
  // Tunneling: what it holds goes to the exchange as it is (the client's WebSocket bytes).
  void relayHeld();
  // Empties the scratch buffer for a head, with room for a typical one.
  void startHead();
  static constexpr std::size_t kHeadReserve = 512;
  // A head (masked whole when the mask is active: then the mask starts over for the body).
  void sendHead(std::string_view head, bool completes_response, SecretMask& mask);

  CodecHost& host_;
  Exchange& exchange_;
  http::RequestParser parser_;
  std::string plain_;  // client plaintext not yet parsed (a paused parser)
  std::size_t offset_ = 0;
  bool message_end_pending_ = false;  // after a head: its end may come without more bytes
  http::ResponseFraming to_client_ = http::ResponseFraming::None;
  std::string scratch_;  // heads and chunk framing being written; reused
  std::string masked_;   // a response head after masking; reused
};

}  // namespace sluice::proxy::session
