#include "proxy/io/read_buffer.h"

namespace sluice::proxy::io {

namespace {

thread_local char t_read_buffer[kReadBufferSize];

}  // namespace

void allocReadBuffer(uv_handle_t*, std::size_t, uv_buf_t* buf) noexcept {
  buf->base = t_read_buffer;
  buf->len = kReadBufferSize;
}

}  // namespace sluice::proxy::io
