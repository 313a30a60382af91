#include "proxy/http/http2_session.h"

#include <iterator>

namespace sluice::proxy::http {

namespace {

template <class T, void (*Free)(T*)>
struct Owned {
  T* p = nullptr;
  ~Owned() {
    if (p != nullptr) {
      Free(p);
    }
  }
};

}  // namespace

Http2Session Http2Session::make(Role role, const Http2Callbacks& callbacks, void* user_data,
                                const Http2Limits& limits) {
  Owned<nghttp2_session_callbacks, nghttp2_session_callbacks_del> table;
  Owned<nghttp2_option, nghttp2_option_del> option;
  if (nghttp2_session_callbacks_new(&table.p) != 0 || nghttp2_option_new(&option.p) != 0) {
    return {};
  }
  nghttp2_session_callbacks* c = table.p;
  if (callbacks.on_begin_headers != nullptr) {
    nghttp2_session_callbacks_set_on_begin_headers_callback(c, callbacks.on_begin_headers);
  }
  if (callbacks.on_header != nullptr) {
    nghttp2_session_callbacks_set_on_header_callback(c, callbacks.on_header);
  }
  if (callbacks.on_frame_recv != nullptr) {
    nghttp2_session_callbacks_set_on_frame_recv_callback(c, callbacks.on_frame_recv);
  }
  if (callbacks.on_frame_send != nullptr) {
    nghttp2_session_callbacks_set_on_frame_send_callback(c, callbacks.on_frame_send);
  }
  if (callbacks.on_data_chunk_recv != nullptr) {
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, callbacks.on_data_chunk_recv);
  }
  if (callbacks.on_stream_close != nullptr) {
    nghttp2_session_callbacks_set_on_stream_close_callback(c, callbacks.on_stream_close);
  }

  // Windows go back only as the glue says the bytes were taken: memory per stream is bounded.
  nghttp2_option_set_no_auto_window_update(option.p, 1);
  nghttp2_option_set_max_settings(option.p, kMaxSettings);
  nghttp2_option_set_max_continuations(option.p, kMaxContinuations);
  Http2Session session;
  nghttp2_session* raw = nullptr;
  int rv = 0;
  if (role == Role::Server) {
    nghttp2_option_set_stream_reset_rate_limit(option.p, kLibraryResetBurst, kLibraryResetRate);
    // (The client's HPACK table for what sluice sends: nghttp2's default, 4 KiB, bounds it.)
    rv = nghttp2_session_server_new2(&raw, c, user_data, option.p);
  } else {
    // Until the origin's SETTINGS say otherwise, no more streams than sluice would open.
    nghttp2_option_set_peer_max_concurrent_streams(option.p, limits.max_concurrent_streams);
    rv = nghttp2_session_client_new2(&raw, c, user_data, option.p);
  }
  if (rv != 0) {
    return {};
  }
  session.session_.reset(raw);

  const auto window = static_cast<std::uint32_t>(limits.stream_window);
  const auto header_list = static_cast<std::uint32_t>(limits.max_header_bytes);
  if (role == Role::Server) {
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, header_list},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        // RFC 8441: WebSocket over a stream (extended CONNECT), decided like HTTP/1.1's upgrade.
        {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1},
    };
    rv = nghttp2_submit_settings(raw, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  } else {
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, header_list},
    };
    rv = nghttp2_submit_settings(raw, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  }
  if (rv != 0 || nghttp2_session_set_local_window_size(raw, NGHTTP2_FLAG_NONE, 0,
                                                       limits.connection_window) != 0) {
    return {};
  }
  return session;
}

long Http2Session::receive(std::span<const char> bytes) {
  return static_cast<long>(nghttp2_session_mem_recv(
      session_.get(), reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace sluice::proxy::http
