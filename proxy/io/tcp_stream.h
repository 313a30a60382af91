#pragma once
// A TCP connection on a libuv loop: reading with backpressure, writing without blocking, and the
// close-then-free contract: memory goes only after the last close callback.
//
// Ownership: a TcpStream embeds its uv_tcp_t, so it must outlive the handle. Its owner calls
// close() and keeps the object until Handler::onClosed() has run; only then may it be destroyed.
// All Handler calls happen on the loop thread, never from inside a TcpStream method (close()
// included), so a handler may close or start/stop reading from within any callback.
//
// Reads land in one 64 KiB buffer per thread (read_buffer.h), valid only during
// Handler::onRead(): an idle connection holds no read buffer. Writes first try the socket
// directly; what the kernel does not take is copied into a pending buffer and written with
// uv_write, one request at a time.

#include <uv.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "policy/ip_address.h"

namespace sluice::proxy::io {

class TcpStream {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // Bytes from the peer; `data` is valid only for the duration of the call.
    virtual void onRead(TcpStream& stream, std::span<const char> data) = 0;
    // The peer closed its sending side (EOF). Reading has stopped.
    virtual void onEof(TcpStream& stream) = 0;
    // A read or write failed (reset, timeout...). The stream should be closed.
    virtual void onError(TcpStream& stream, int uv_status) = 0;
    // The write backlog fell from above kHighWatermark to kLowWatermark or below: backedUp()
    // has just turned false.
    virtual void onDrained(TcpStream& stream) = 0;
    // connect() finished: status 0, or a libuv error.
    virtual void onConnected(TcpStream& stream, int status) = 0;
    // The handle is closed; the TcpStream may now be destroyed.
    virtual void onClosed(TcpStream& stream) = 0;
  };

  // Above this many queued bytes, a producer should stop reading its source until onDrained().
  // The queue holds only what the kernel would not take: the socket's own buffers come first.
  static constexpr std::size_t kHighWatermark = 256 * 1024;
  static constexpr std::size_t kLowWatermark = 64 * 1024;

  TcpStream(uv_loop_t* loop, Handler* handler);
  ~TcpStream();
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  // Takes over an accepted connection's fd. Returns 0 or a libuv error (the fd then stays the
  // caller's to close).
  int adopt(int fd);
  // Starts connecting; Handler::onConnected() reports the outcome.
  int connect(const policy::Endpoint& to);

  // Hands the stream's callbacks to another owner (a pooled upstream moves between a session
  // and the pool).
  void setHandler(Handler* handler) { handler_ = handler; }

  void startReading();
  void stopReading();
  bool reading() const { return reading_; }

  // Queues `data` for the peer. Ignored once the stream is closing.
  void write(std::span<const char> data);
  void write(std::string_view data) { write(std::span<const char>(data.data(), data.size())); }
  // Bytes accepted by write() and not yet handed to the kernel.
  std::size_t backlog() const { return pending_.size() + inflight_.size(); }
  // The backlog went over kHighWatermark and has not yet fallen to kLowWatermark (onDrained()
  // ends it). While it holds, nothing that adds to this queue should be read; the gap between
  // the two marks keeps a slow reader from costing a stop and a restart per write.
  bool backedUp() const { return above_high_; }
  // Sends FIN once everything queued has been written.
  void shutdownWrite();

  // Idempotent. Pending writes are dropped; onClosed() follows.
  void close();
  // Closes with an RST instead of a FIN (for connections sluice refuses to speak to).
  void reset();
  bool closing() const { return state_ == State::Closing || state_ == State::Closed; }

  // Gives the write buffers' memory back while the connection idles.
  void releaseBuffers();

  // The peer's and our own address, as the kernel reports them (zero on failure).
  policy::Endpoint peer() const;
  policy::Endpoint local() const;
  // The original destination of a redirected connection (proxy/net/socket_address.h).
  std::optional<policy::Endpoint> originalDestination() const;
  uv_tcp_t* handle() { return &tcp_; }

 private:
  enum class State : std::uint8_t { Idle, Connecting, Open, Closing, Closed };

  static void onReadCb(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void onWriteCb(uv_write_t* req, int status) noexcept;
  static void onConnectCb(uv_connect_t* req, int status) noexcept;
  static void onShutdownCb(uv_shutdown_t* req, int status) noexcept;
  static void onCloseCb(uv_handle_t* handle) noexcept;

  void flush();
  void maybeShutdown();
  int socketFd() const;  // -1 before adopt()/connect()
  void configureSocket();

  uv_tcp_t tcp_{};
  uv_write_t write_req_{};
  uv_connect_t connect_req_{};
  uv_shutdown_t shutdown_req_{};
  Handler* handler_;
  State state_ = State::Idle;
  bool reading_ = false;
  bool write_in_flight_ = false;
  bool shutdown_wanted_ = false;
  bool shutdown_sent_ = false;
  bool above_high_ = false;
  std::string pending_;   // not yet handed to uv_write
  std::string inflight_;  // owned by the uv_write in flight
};

}  // namespace sluice::proxy::io
