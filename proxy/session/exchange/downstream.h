#pragma once
// The client's side of one exchange, as the connection's codec frames it: the HTTP/1.1 codec
// (proxy/session/http1), or one HTTP/2 stream (proxy/session/http2). The exchange decides what
// to answer and when; the codec decides how the bytes look: the response head sluice writes,
// the body in the client's framing (re-chunked when its length is unknown, DATA frames on a
// stream), sluice's own answers. A denial on HTTP/1.1 ends the connection; on a stream it ends
// only the stream: the exchange does not know which.

#include <span>
#include <string_view>

#include "policy/reason.h"
#include "proxy/audit/audit_record.h"
#include "proxy/http/response_parser.h"

namespace sluice::proxy::session {

class SecretMask;

class Downstream {
 public:
  // "100 Continue" on the exchange's behalf: its body is read before any upstream is asked.
  virtual void sendContinue() = 0;
  // A 1xx the upstream sent (never 101), masked with `mask` when it is active.
  virtual void sendInterimHead(const http::ResponseHead& head, SecretMask& mask) = 0;
  // The final head, masked whole with `mask` when it is active; a bodiless answer (HEAD, 204,
  // 304, Content-Length: 0) is complete with it.
  virtual void sendResponseHead(const http::ResponseHead& head, SecretMask& mask) = 0;
  // A piece of the body; `completes`: these bytes complete the response.
  virtual void sendResponseBody(std::span<const char> data, bool completes) = 0;
  // The response is over (the last chunk, when the codec re-chunked it), with the origin's
  // trailer fields when it sent any (null: none): HTTP/2 sends them as trailers, a re-chunked
  // HTTP/1.1 body in its last chunk, a body with a Content-Length has no place for them.
  virtual void endResponse(const http::HeaderBlock* trailers) = 0;
  // sluice's own answer for `reason` (status, Sluice-Reason, Proxy-Status, a line of text); the
  // HTTP status it sent (the record's: a gRPC client's refusal is a 200 that carries its
  // grpc-status).
  virtual int sendDenial(policy::Reason reason, std::string_view detail) = 0;
  // The response ended before the request's body did: the client's connection is in no known
  // state (HTTP/1.1 closes it after this exchange; a stream would just end).
  virtual void requestCutShort() = 0;
  // The origin switched to the WebSocket the exchange asked for (its 101 head was sent): the
  // client's side carries WebSocket bytes from now on, never HTTP again (HTTP/1.1: the
  // connection ends with the session).
  virtual void switchedProtocols() = 0;
  // The exchange can take the rest of its request (its upstream is ready): feed it what the
  // client already sent.
  virtual void resumeRequest() = 0;
  // The client's write queue is over its high watermark: read nothing that adds to it.
  virtual bool backedUp() const = 0;
  // It keeps the answer's bytes until its client's flow control lets them go (an HTTP/2
  // stream), and says when they went (Exchange::onResponseTaken): an HTTP/2 origin's window is
  // then reopened only as the client takes them. HTTP/1.1 writes them at once.
  virtual bool buffersResponse() const = 0;
  // For the upgrade its client asked for, any 2xx tells the client the protocol switched (RFC
  // 8441 §5: an extended CONNECT's tunnel is established by a 2xx). An origin's answer that did
  // not switch must then never reach it as a 2xx.
  virtual bool successMeansSwitched() const = 0;
  // The HTTP the client speaks here: the record's `proto`.
  virtual audit::Proto protocol() const = 0;

 protected:
  ~Downstream() = default;
};

}  // namespace sluice::proxy::session
