#pragma once
// The client's side of the wire: its TCP stream and, inside a tunnel, the TLS session toward the
// sandbox, and the writes to it. While the connection is corked (inside a callback) small writes
// are gathered and go out as one TLS record and one write when the callback returns: a response
// head and a small body otherwise cost two of each. Large pieces (a body read from the upstream)
// are encrypted at once, uncopied, but their records also wait for the end of the callback, up
// to kWriteBatch: one write per upstream read, not one per 16 KiB record. The bytes that
// complete a response always wait for the end of the callback, after the audit records written
// meanwhile have reached the OS (TransportOwner::flushRecords()).
//
// Owned by the connection (TransportOwner), which is the stream's handler.

#include <uv.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "proxy/io/tcp_stream.h"
#include "proxy/tls/tls_session.h"

namespace sluice::proxy::session {

class TransportOwner {
 public:
  // The audit records written so far go to the OS (before gathered bytes that may complete
  // the answers they describe).
  virtual void flushRecords() = 0;
  // Everything corked goes out, on both legs, in order.
  virtual void flushCorked() = 0;
  // A write to the client failed: nothing more can be said; the connection closes.
  virtual void onTransportFailed(std::string_view why) = 0;
  virtual bool closing() const = 0;

 protected:
  ~TransportOwner() = default;
};

class ClientTransport {
 public:
  ClientTransport(uv_loop_t* loop, io::TcpStream::Handler* handler, TransportOwner& owner);
  ClientTransport(const ClientTransport&) = delete;
  ClientTransport& operator=(const ClientTransport&) = delete;

  io::TcpStream& stream() { return stream_; }
  const io::TcpStream& stream() const { return stream_; }

  // TLS toward the sandbox, once a tunnel's ClientHello was allowed.
  bool secure() const { return tls_.has_value(); }
  tls::TlsSession& tls() { return *tls_; }
  void startTls(tls::TlsSession session) { tls_.emplace(std::move(session)); }
  void dropTls() { tls_.reset(); }  // nothing polite to say over a session that never was

  void cork() { ++cork_depth_; }
  // True when the outermost cork came off: the owner flushes then.
  bool uncork() { return --cork_depth_ == 0; }
  bool corked() const { return cork_depth_ > 0; }

  // Writes to the client (through TLS inside a tunnel), gathered while corked.
  void send(std::string_view bytes);
  // The bytes that complete a response (its last body bytes, the last chunk, a bodiless head):
  // inside a callback they wait for its end, after the records written meanwhile.
  void sendFinal(std::string_view bytes);
  // Seals what was gathered and hands every pending TLS record to the socket.
  void flush();
  // Drops what was gathered (the connection is closing).
  void discard() { out_.clear(); }
  // Bytes on the socket as they are, outside TLS and gathering (200 Connection established, an
  // alert for a tunnel that gets no TLS session).
  void writeRaw(std::string_view bytes) { stream_.write(bytes); }
  // Gives the memory of the write buffers and TLS records back while the connection idles.
  void releaseBuffers();

 private:
  void writeNow(std::string_view bytes);
  // Encrypts `bytes` into the TLS output (plain HTTP: writes them).
  void seal(std::string_view bytes);
  // Hands the pending TLS records to the socket.
  void push();

  TransportOwner& owner_;
  io::TcpStream stream_;
  std::optional<tls::TlsSession> tls_;
  std::string out_;  // corked plaintext for the client
  int cork_depth_ = 0;
};

}  // namespace sluice::proxy::session
