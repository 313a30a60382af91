#pragma once
// The HTTP/2 side of a Connection (--proto h2): an nghttp2 client session on the connection's
// TLS, once ALPN agreed h2. Sans-IO: the Connection feeds it decrypted bytes (receive()) and
// writes what it has to send (output()) into its TLS; the session counts responses and body
// bytes with the LoadThread, as the HTTP/1.1 path does.
//
//   keepalive, bulk: `streams` GETs of the target at once; as one completes a new stream takes
//     its place, until the run ends or the server sends GOAWAY: the streams it accepted finish,
//     then the session is Done and the Connection opens another connection (as after an
//     HTTP/1.1 "Connection: close"). Streams above the GOAWAY's last id were never processed
//     and are not counted.
//   newconn, idle: one GET; the session is Done when it completes.
//
// Latency: keepalive, bulk: from submitting the stream to its END_STREAM (a stream submitted
// while the server's SETTINGS_MAX_CONCURRENT_STREAMS are all in use waits in nghttp2's queue,
// and that wait counts); newconn, idle: from the TCP connect, as for HTTP/1.1.
//
// Outcomes: a complete response is onResponse() if 2xx, else a Status failure; a stream reset
// by the peer (or closed before its END_STREAM) is an H2 failure of that request and the
// connection goes on; a session error (nghttp2 refuses what the peer sent) or a GOAWAY with an
// error code is Failed, and the Connection counts it once and closes.
//
// Allocation: the slot per stream, the header list (pointing into the Target: nghttp2 copies
// no name or value), nghttp2's callbacks and options and the output buffer are made once per
// Connection slot and kept across its connections; a request allocates nothing here. nghttp2
// itself still mallocs per connection (the session) and per stream (its stream and frame
// objects, the header list array, decoded header buffers).
//
// Reentrancy: nghttp2's callbacks only count, record and submit. The owner may end the run
// from inside one (a --requests quota), which closes the Connection: the nghttp2 session stays
// until end() (the Connection's releaseStream(), a safe point), and nothing is submitted once
// the run has stopped. mem_recv and mem_send are never called from inside a callback.

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/loadgen/target.h"

namespace sluice::loadgen {

class LoadThread;

class H2Session {
 public:
  enum class Status : std::uint8_t {
    Running,  // streams open, or more to come
    Done,     // nothing more to do (see above); the session may still answer PINGs (idle)
    Failed,   // see failure()
  };

  // What the generator tells the server (SETTINGS) and gives its own window: large, and given
  // back as soon as bytes arrive (nghttp2's automatic WINDOW_UPDATE): a bulk download is never
  // held back by the reader.
  static constexpr std::int32_t kStreamWindow = 1024 * 1024;
  static constexpr std::int32_t kConnectionWindow = 16 * 1024 * 1024;

  H2Session(LoadThread& owner, const Target& target);
  ~H2Session();
  H2Session(const H2Session&) = delete;
  H2Session& operator=(const H2Session&) = delete;

  // A new connection's session: queues the preface, SETTINGS and the first request(s), whose
  // latency starts at `first_start_ns` (uv_hrtime). False on failure (see failure()).
  bool begin(std::uint64_t first_start_ns);
  // Drops the connection's session (after it closed). begin() may be called again.
  void end();
  bool active() const { return session_ != nullptr; }

  // Decrypted bytes from the server. Then output(), then status(): a request queued when a
  // GOAWAY arrived ends inside output() (nghttp2 refuses to send it).
  void receive(std::span<const char> data);
  // Everything the session has to send now (frames for the TLS to encrypt), valid until the
  // next call. Check status() afterwards: serializing may fail.
  std::span<const char> output();
  // Queues GOAWAY (NO_ERROR): the polite end of a connection this side closes.
  void goAway();
  Status status() const;

  // Whether any response of this connection was a complete 2xx, and whether the last one was.
  bool anySucceeded() const { return succeeded_ > 0; }
  bool lastSucceeded() const { return last_ok_; }
  ErrorKind failureKind() const { return failure_kind_; }
  const std::string& failure() const { return failure_; }

  // Held (idle) connections: frees the output buffer until it is needed again.
  void releaseBuffers();

 private:
  struct Slot {
    std::int32_t stream_id = 0;  // 0: free
    int status = 0;              // :status of the final response head; 0 before it
    bool complete = false;       // END_STREAM received
    std::uint64_t start_ns = 0;
  };
  struct Callbacks;

  void submit(Slot& slot, std::uint64_t start_ns);
  void onStreamClosed(Slot& slot, std::uint32_t error_code);
  void setFailed(ErrorKind kind, std::string_view what, std::string_view detail);
  bool repeats() const { return target_.mode == Mode::KeepAlive || target_.mode == Mode::Bulk; }

  LoadThread& owner_;
  const Target& target_;
  nghttp2_session_callbacks* callbacks_ = nullptr;
  nghttp2_option* option_ = nullptr;
  nghttp2_session* session_ = nullptr;
  std::array<nghttp2_nv, 6> request_{};
  std::vector<Slot> slots_;  // sized once: nghttp2 holds pointers to them (stream user data)
  std::vector<char> out_;
  int open_ = 0;  // streams submitted and not yet closed
  std::uint64_t succeeded_ = 0;
  bool last_ok_ = false;
  bool goaway_ = false;
  bool failed_ = false;
  ErrorKind failure_kind_ = ErrorKind::H2;
  std::string failure_;
  std::string last_error_;  // nghttp2's last error message (error_callback2), for details
};

}  // namespace sluice::loadgen
