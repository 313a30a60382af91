#pragma once
// nghttp2 as sluice runs it, on both legs: the one owner of an nghttp2_session (freed with it,
// never by hand), the options and SETTINGS that bound what a peer may make it do (set here and
// nowhere else), the callbacks a glue forwards from, and the two pumps: frames in, frames out.
// Sans-IO: bytes in, bytes out. Toward the sandbox the glue is the HTTP/2 codec
// (proxy/session/h2), toward origins the shared upstream session (proxy/session/upstream); the
// fuzz targets make their sessions here too, so they fuzz what sluice runs
// (docs/wire.md#http2, docs/wire.md#http2-toward-origins).
//
// Both sides: request or response windows go back only when the glue says the bytes were
// taken (no automatic WINDOW_UPDATE), at most kMaxSettings entries in a SETTINGS frame and
// kMaxContinuations CONTINUATION frames in a header block, no server push. A server also
// offers extended CONNECT (RFC 8441) and keeps nghttp2's own rapid-reset bound behind sluice's.

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace sluice::proxy::http {

// The nghttp2 callbacks a glue wants (null: not called).
struct Http2Callbacks {
  nghttp2_on_begin_headers_callback on_begin_headers = nullptr;
  nghttp2_on_header_callback on_header = nullptr;
  nghttp2_on_frame_recv_callback on_frame_recv = nullptr;
  nghttp2_on_frame_send_callback on_frame_send = nullptr;
  nghttp2_on_data_chunk_recv_callback on_data_chunk_recv = nullptr;
  nghttp2_on_stream_close_callback on_stream_close = nullptr;
};

// What a session promises its peer, and holds it to.
struct Http2Limits {
  // Streams the peer may open at once (a server's SETTINGS); for a client, the streams it
  // assumes the server allows until the server's SETTINGS say.
  std::uint32_t max_concurrent_streams = 100;
  // SETTINGS_INITIAL_WINDOW_SIZE: what the peer may send on a stream before its window is
  // given back; and the connection's window, for all streams together.
  std::int32_t stream_window = 64 * 1024;
  std::int32_t connection_window = 1024 * 1024;
  std::size_t max_header_bytes = 64 * 1024;  // SETTINGS_MAX_HEADER_LIST_SIZE
};

class Http2Session {
 public:
  // SETTINGS entries in one frame, and CONTINUATION frames in one header block, beyond which
  // nghttp2 ends the session (floods: docs/wire.md#http2).
  static constexpr std::size_t kMaxSettings = 32;
  static constexpr std::size_t kMaxContinuations = 8;
  // nghttp2's own bound on a client's resets (CVE-2023-44487): behind sluice's, which the codec
  // counts itself (docs/wire.md#http2).
  static constexpr std::uint64_t kLibraryResetBurst = 200;
  static constexpr std::uint64_t kLibraryResetRate = 100;

  enum class Role : std::uint8_t { Server, Client };

  Http2Session() = default;
  // A session with `callbacks` (their user data `user_data`) and `limits`, its SETTINGS and
  // windows queued (they go with the first drain()). Empty (false) if nghttp2 could not set it
  // up.
  static Http2Session make(Role role, const Http2Callbacks& callbacks, void* user_data,
                           const Http2Limits& limits);

  explicit operator bool() const { return session_ != nullptr; }
  nghttp2_session* get() const { return session_.get(); }
  void reset() { session_.reset(); }

  // Frames in: what nghttp2 used (all of it) or a negative nghttp2 error (a connection error;
  // nghttp2 has queued GOAWAY where one is due).
  long receive(std::span<const char> bytes);
  // Frames out: each piece nghttp2 serialises, handed to `sink(std::string_view)` until it has
  // nothing more (or an error). The pieces are nghttp2's and valid only during the call.
  template <class Sink>
  void drain(Sink&& sink) {
    for (;;) {
      const std::uint8_t* data = nullptr;
      const auto n = nghttp2_session_mem_send(session_.get(), &data);
      if (n <= 0) {
        return;
      }
      sink(std::string_view(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n)));
    }
  }
  // Whether nghttp2 still reads, or has something to write (both false: the session is over).
  bool wantsRead() const { return nghttp2_session_want_read(session_.get()) != 0; }
  bool wantsWrite() const { return nghttp2_session_want_write(session_.get()) != 0; }

 private:
  struct Free {
    void operator()(nghttp2_session* session) const noexcept { nghttp2_session_del(session); }
  };
  std::unique_ptr<nghttp2_session, Free> session_;
};

}  // namespace sluice::proxy::http
