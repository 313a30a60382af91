#pragma once
// One read buffer per loop thread, shared by every read on it (TCP streams, the sandbox
// resolver's UDP and TCP): libuv calls alloc and read back to back, and the reader consumes (or
// copies) the bytes before returning, so no connection holds a buffer of its own while idle.
// 64 KiB holds any UDP datagram, so none is ever cut.

#include <uv.h>

#include <cstddef>

namespace sluice::proxy::io {

inline constexpr std::size_t kReadBufferSize = 64 * 1024;

// A uv_alloc_cb handing out the thread's buffer.
void allocReadBuffer(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf) noexcept;

}  // namespace sluice::proxy::io
