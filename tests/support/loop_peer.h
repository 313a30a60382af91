#pragma once
// The session's peers for tests on a real loop, driven byte by byte from the test's own thread:
// LoopPeer is one TCP connection (the sandbox's client, or one connection of an origin) that
// records what it reads and how it ended; OriginServer is a listener on 127.0.0.1:0 whose
// connections cut what they read into requests and hand each to the test's script (answer,
// stall, reset mid-body, close after reading, ...); Blackhole is a port where a connect is
// never answered.
//
// Everything runs on the test's loop, so a test waits for an event (runLoopUntil) and nothing
// races it. Lifetime: close() (or the destructor) uv_close()s the handles; the loop must run
// once more to free them, before uv_loop_close().

#include <uv.h>

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/http_message.h"
#include "tests/support/memory_tls.h"

namespace sluice::test_support {

class LoopPeer {
 public:
  enum class End : std::uint8_t {
    Open,   // nothing from the peer says it is done
    Eof,    // the peer sent FIN
    Reset,  // the peer reset the connection (or another read error: error())
  };

  explicit LoopPeer(uv_loop_t* loop);
  ~LoopPeer();
  LoopPeer(const LoopPeer&) = delete;
  LoopPeer& operator=(const LoopPeer&) = delete;

  // Takes over a connected socket and reads from it; 0 or a libuv error.
  int open(int fd);
  // Accepts the pending connection of `listener` and reads from it.
  int accept(uv_stream_t* listener);

  // Sends `bytes`, through TLS once a TLS start was called.
  void write(std::string_view bytes);
  // Sends `bytes` as they are, whatever TLS says.
  void writeRaw(std::string_view bytes);
  // FIN after what was written.
  void shutdownWrite();
  // Closes the socket (the kernel sends FIN, or RST when input is left unread).
  void close();
  // Closes with RST (SO_LINGER 0).
  void reset();

  // TLS from here on: a client verifying `host` against `ca_file` sends its ClientHello now; a
  // server waits for one.
  void startTlsClient(const std::string& ca_file, const std::string& host,
                      MemoryTls::Alpn alpn = MemoryTls::Alpn::Http11);
  void startTlsServer(X509* certificate, EVP_PKEY* key);
  // close_notify.
  void closeNotify();
  MemoryTls* tls() { return tls_.get(); }

  // What the peer sent: plaintext once TLS started (the bytes before it stay at the front).
  // A test may erase what it has looked at.
  std::string& received() { return received_; }
  std::size_t rawBytesReceived() const { return raw_bytes_; }
  End end() const { return end_; }
  int error() const { return error_; }
  bool closed() const { return closed_; }  // closed by this side

  // One complete response from the front of received(), taken out; nullopt while incomplete.
  std::optional<HttpMessage> takeResponse(bool bodiless = false);

  // Runs after every read, and when the peer's end is seen.
  std::function<void(LoopPeer&)> on_read;

 private:
  static void onAlloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf);
  static void onRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void onClose(uv_handle_t* handle);
  void flushTls();

  uv_tcp_t* tcp_;  // freed by its close callback, which may run after this object is gone
  bool closed_ = false;
  bool shutdown_ = false;
  End end_ = End::Open;
  int error_ = 0;
  std::size_t raw_bytes_ = 0;
  std::string received_;
  std::unique_ptr<MemoryTls> tls_;
};

// An origin on 127.0.0.1:0, plain or TLS.
class OriginServer {
 public:
  struct Request {
    std::size_t connection = 0;  // the index of the connection it came on (accept order)
    std::size_t on_connection = 0;  // 1 for the first request on that connection, ...
    HttpMessage message;
  };
  // What the origin does with each complete request; unset: nothing (it stalls).
  using Script = std::function<void(LoopPeer& connection, const Request& request)>;

  // With a certificate and key: TLS on every connection.
  explicit OriginServer(uv_loop_t* loop, X509* certificate = nullptr, EVP_PKEY* key = nullptr);
  ~OriginServer();
  OriginServer(const OriginServer&) = delete;
  OriginServer& operator=(const OriginServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::size_t accepted() const { return connections_.size(); }
  LoopPeer& connection(std::size_t index) { return *connections_.at(index).peer; }
  const std::vector<Request>& requests() const { return requests_; }
  // The requests whose target is `target`, in the order they came.
  std::vector<Request> requestsFor(std::string_view target) const;

  Script on_request;
  void close();
  // Forgets the requests seen so far, and the connections that are over (closed by either
  // side; connection() is not to be asked for one): a long run (a fuzz target) keeps its
  // memory bounded.
  void forget();

 private:
  struct Connection {
    std::unique_ptr<LoopPeer> peer;
    std::size_t parsed = 0;  // bytes of received() cut into requests
    std::size_t count = 0;
  };
  static void onConnection(uv_stream_t* listener, int status);
  void cutRequests(std::size_t index);

  uv_loop_t* loop_;
  uv_tcp_t* listener_;
  std::uint16_t port_ = 0;
  bool closed_ = false;
  X509* certificate_;
  EVP_PKEY* key_;
  std::vector<Connection> connections_;
  std::vector<Request> requests_;
};

// A port on 127.0.0.1 where a connect is never answered: a socket that listens with a backlog
// of one, filled by a connection of its own and never accepted, so the kernel drops every
// further SYN. Plain sockets; nothing on the loop.
class Blackhole {
 public:
  Blackhole();
  ~Blackhole();
  Blackhole(const Blackhole&) = delete;
  Blackhole& operator=(const Blackhole&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int listener_ = -1;
  std::vector<int> fillers_;
  std::uint16_t port_ = 0;
};

}  // namespace sluice::test_support
