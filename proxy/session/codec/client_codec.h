#pragma once
// The one seam between a client connection and the HTTP it carries (ARCHITECTURE.md, "The life
// of a connection"). The connection holds exactly one ClientCodec: HTTP/1.1 (the explicit
// listener's proxy head, a forwarding or redirected plain connection, a tunnel whose ALPN is
// http/1.1) or HTTP/2 (a tunnel whose ALPN is h2). Each codec owns its requests: the HTTP/1.1
// codec its one exchange, the HTTP/2 codec its streams and theirs. The connection owns the
// transport, the timer, the tunnel's opening and the upstream it parks, and never asks which
// protocol it carries: every bound it keeps (what is read, what is buffered, how long it idles)
// it keeps through this interface, so it holds for every protocol alike.
//
// CodecHost is the connection as its codec sees it: the client side its requests see, the
// writes to the client, and what only the connection decides (whether a request may begin, when
// the connection ends).

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "policy/reason.h"
#include "proxy/audit/audit_record.h"
#include "proxy/http/request_parser.h"
#include "proxy/session/context/client_side.h"

namespace sluice::proxy::session {

// Whether a new request may begin on the connection (CodecHost::admitRequest).
enum class Admission : std::uint8_t {
  Admit,
  // A reload left no generation for the connection to take up: the sandbox is gone, or has
  // another CA (its client trusts the old one), and the connection is to drain. Nothing is
  // processed or recorded: HTTP/1.1 finishes the connection, HTTP/2 refuses the stream
  // (REFUSED_STREAM) and says GOAWAY (docs/wire.md#http2).
  Refuse,
  // The sandbox's audit log cannot be written: the request is refused, 503 audit_unavailable,
  // its record kept with the others; the connection takes no further request (HTTP/1.1 ends,
  // HTTP/2 says GOAWAY).
  AuditUnavailable,
  // The same, once the connection has kept its one refusal: the request is refused unrecorded
  // (HTTP/2: REFUSED_STREAM, safe to retry), counted, so that one connection cannot make sluice
  // keep records without bound (docs/audit.md#when-the-audit-file-cannot-be-written).
  Shed,
};

// How the client's side of the connection ended.
enum class ClientEnd : std::uint8_t {
  Eof,          // FIN, outside TLS or under it
  CloseNotify,  // TLS close_notify: what is in flight may still be answered
  TlsFailed,    // garbage, or too many post-handshake messages: nothing more can be said
};

// Which of the connection's deadlines came when its timer fired.
struct Expired {
  bool phase = false;    // a request head took longer than handshake_timeout
  bool request = false;  // a request's own deadline (a dial's connect_timeout)
  bool idle = false;     // idle_timeout since the last progress
};

class CodecHost : public ClientSide {
 public:
  virtual void sendClient(std::string_view bytes) = 0;
  // The bytes that complete a response: they wait for the callback's end, after its records.
  virtual void sendClientFinal(std::string_view bytes) = 0;
  virtual bool clientBackedUp() const = 0;

  // Whether the connection reads requests now (not opening, lingering or closing), and whether
  // it waits for the explicit listener's first head (a CONNECT or an absolute-form request).
  virtual bool takesRequests() const = 0;
  virtual bool awaitsProxyHead() const = 0;
  // The first head on the explicit listener is not a CONNECT: forward mode, Serving.
  virtual void onProxyHead() = 0;
  // A CONNECT on the explicit listener; `rest` is what followed its head (the tunnel's first
  // bytes, never parsed as HTTP).
  virtual void onConnectHead(const http::RequestHead& head, std::string_view rest) = 0;
  // What a refused first head was asking for, as far as it was read (the record's `mode`).
  virtual void noteProxyMode(audit::Mode mode) = 0;
  // A request head began between requests: it must be complete within handshake_timeout.
  virtual void onHeadBegun() = 0;
  // A request's head is complete: whether it may begin (the connection takes up the generation
  // in force, the audit log is writable).
  virtual Admission admitRequest() = 0;
  // The generation the connection is bound to (after admitRequest(): the one the request is
  // judged by), for a request that keeps it while the connection takes up later ones.
  virtual std::shared_ptr<const Generation> holdGeneration() const = 0;

  // The connection closes after the requests in flight (a response said so, the client shut
  // its side, the worker drains).
  virtual bool closesAfterExchange() const = 0;
  virtual void closeAfterExchange() = 0;
  // No request is in flight any more. False: the connection finishes now (it was to close
  // after them); true: it goes on, and its idle time counts from here.
  virtual bool onRequestsOver() = 0;
  // Ends the connection politely: what was said goes before close_notify and FIN.
  virtual void finishConnection() = 0;
  // Why a tunnel that carried no request ended (the first cause noted stands).
  virtual void noteTunnelEnd(audit::Error why) = 0;
  // The sandbox made the connection fail (an HTTP/2 flood, a connection error of RFC 9113): the
  // tunnel's record says so, after the records of the requests it cut short.
  virtual void onConnectionError(audit::Error error) = 0;

 protected:
  ~CodecHost() = default;
};

class ClientCodec {
 public:
  virtual ~ClientCodec() = default;

  // The HTTP the client speaks (the records' `proto`).
  virtual audit::Proto protocol() const = 0;

  // --- reading
  // Client plaintext. False: nothing more is to be fed now (the codec is over).
  virtual bool feed(std::span<const char> plaintext) = 0;
  // Goes on with what it holds (HTTP/1.1 parses what a request waiting for its upstream kept).
  virtual void process() = 0;
  // Whether the client is read now (before the connection's backed-up rule).
  virtual bool wantsBytes() const = 0;
  // Bytes fed now would wait (a head waits for DNS or a connection): the connection keeps
  // them in TLS meanwhile.
  virtual bool holdsInput() const = 0;

  // --- what is in flight
  // A request is in flight.
  virtual bool inFlight() const = 0;
  // Anything is unfinished: a request in flight, or a response the codec still sends.
  virtual bool busy() const = 0;
  // Between requests with nothing held: its buffers may go back.
  virtual bool idle() const = 0;
  // No new request is taken (GOAWAY said).
  virtual bool goingAway() const = 0;
  // The earliest deadline of its requests (0: none).
  virtual std::uint64_t deadline() const = 0;
  // Its requests in flight each keep their own idle deadline (in deadline()), from their own
  // progress: the connection's idle rule waits until none is in flight (HTTP/2: frames that
  // carry no request, a PING or a WINDOW_UPDATE, keep no stream and no connection alive).
  // HTTP/1.1: no; its one request's progress is the connection's.
  virtual bool timesRequests() const = 0;

  // --- what the connection does to every request
  // A safe point: no request's callback is on the stack (finished requests may be freed).
  virtual void collect() = 0;
  // The client's queue is (or is no longer) backed up: upstreams are read accordingly.
  virtual void updateUpstreamReading(bool client_backed_up) = 0;
  virtual void flushCorkedUpstreams() = 0;
  virtual void discardCorkedUpstreams() = 0;
  // What the codec has to say beyond its requests' writes (HTTP/2's frames), into the corked
  // writes. True if it wrote anything.
  virtual bool sendPending() = 0;
  // A peer took what it was sent: held request bytes go on.
  virtual void onPeerDrained() = 0;
  // The connection's timer fired with these deadlines come.
  virtual void onTimeout(const Expired& expired) = 0;
  // The client's side ended (the connection closes after the requests in flight).
  virtual void onClientEnd(ClientEnd how) = 0;
  // The worker drains, or a reload removed the sandbox: no new request. True: nothing is in
  // flight, the connection may finish now.
  virtual bool drain() = 0;
  // The connection finishes politely: requests still in flight are cut short (on record), their
  // upstreams released; what is queued goes with the connection's last writes.
  virtual void finish() = 0;
  // The connection closes now: each request in flight is on record as it stands...
  virtual void abandon() = 0;
  // ... and, once the connection is closing, its upstream is dropped.
  virtual void dropUpstreams() = 0;
  // The connection idles: buffers go back.
  virtual void releaseBuffers() = 0;
};

}  // namespace sluice::proxy::session
