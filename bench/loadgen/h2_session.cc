#include "bench/loadgen/h2_session.h"

#include <uv.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "bench/loadgen/load_thread.h"

namespace sluice::loadgen {

namespace {

// What one connection's output buffer starts with: SETTINGS, WINDOW_UPDATE and a few dozen
// HPACK-encoded GETs (a repeated GET is a handful of bytes once the table holds its fields).
constexpr std::size_t kOutputReserve = 16 * 1024;

nghttp2_nv field(std::string_view name, std::string_view value) {
  // NO_COPY: the names are literals and the values the Target's, both alive for the run.
  return nghttp2_nv{const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(name.data())),
                    const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(value.data())),
                    name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

}  // namespace

struct H2Session::Callbacks {
  static H2Session& self(void* user_data) { return *static_cast<H2Session*>(user_data); }
  static Slot* slotOf(nghttp2_session* session, std::int32_t stream_id) {
    return static_cast<Slot*>(nghttp2_session_get_stream_user_data(session, stream_id));
  }

  static int onHeader(nghttp2_session* session, const nghttp2_frame* frame,
                      const std::uint8_t* name, std::size_t name_len, const std::uint8_t* value,
                      std::size_t value_len, std::uint8_t /*flags*/, void* /*user_data*/) {
    // nghttp2 checks the response head (one :status of three digits, before the fields);
    // an interim 1xx head is followed by the final one, which overwrites it.
    if (frame->hd.type != NGHTTP2_HEADERS || name_len != 7 ||
        std::memcmp(name, ":status", 7) != 0 || value_len != 3) {
      return 0;
    }
    if (Slot* slot = slotOf(session, frame->hd.stream_id)) {
      slot->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
    }
    return 0;
  }

  static int onFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    H2Session& s = self(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA:
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
          if (Slot* slot = slotOf(session, frame->hd.stream_id)) {
            slot->complete = true;
          }
        }
        return 0;
      case NGHTTP2_GOAWAY:
        // Before nghttp2 closes the streams above its last id (REFUSED_STREAM, not counted).
        s.goaway_ = true;
        if (frame->goaway.error_code != NGHTTP2_NO_ERROR) {
          s.setFailed(ErrorKind::H2, "the server sent GOAWAY ",
                      nghttp2_http2_strerror(frame->goaway.error_code));
        }
        return 0;
      default:
        return 0;
    }
  }

  static int onFrameSend(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                         void* user_data) {
    // nghttp2 ends a session that broke the protocol with a GOAWAY carrying the error.
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR) {
      H2Session& s = self(user_data);
      std::string what =
          std::string("GOAWAY ") + nghttp2_http2_strerror(frame->goaway.error_code) + " sent: ";
      s.setFailed(ErrorKind::H2, what, s.last_error_);
    }
    return 0;
  }

  static int onDataChunk(nghttp2_session* /*session*/, std::uint8_t /*flags*/,
                         std::int32_t /*stream_id*/, const std::uint8_t* /*data*/, std::size_t len,
                         void* user_data) {
    self(user_data).owner_.countBody(len);  // counted, never copied or hashed
    return 0;
  }

  static int onStreamClose(nghttp2_session* session, std::int32_t stream_id,
                           std::uint32_t error_code, void* user_data) {
    if (Slot* slot = slotOf(session, stream_id)) {
      self(user_data).onStreamClosed(*slot, error_code);
    }
    return 0;
  }

  // nghttp2's reason for a stream or connection error it found in what the server sent.
  static int onError(nghttp2_session* /*session*/, int /*lib_error_code*/, const char* msg,
                     std::size_t len, void* user_data) {
    self(user_data).last_error_.assign(msg, len);
    return 0;
  }
};

H2Session::H2Session(LoadThread& owner, const Target& target) : owner_(owner), target_(target) {
  if (nghttp2_session_callbacks_new(&callbacks_) != 0 || nghttp2_option_new(&option_) != 0) {
    throw std::bad_alloc();
  }
  nghttp2_session_callbacks_set_on_header_callback(callbacks_, Callbacks::onHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks_, Callbacks::onFrameRecv);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks_, Callbacks::onFrameSend);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks_, Callbacks::onDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks_, Callbacks::onStreamClose);
  nghttp2_session_callbacks_set_error_callback2(callbacks_, Callbacks::onError);
  // Until the server's SETTINGS arrive, nghttp2 lets this many streams start (the rest wait).
  nghttp2_option_set_peer_max_concurrent_streams(option_, 100);
  request_ = {field(":method", "GET"),
              field(":scheme", "https"),
              field(":authority", target_.authority),
              field(":path", target_.path),
              field("user-agent", "sluice-loadgen"),
              field("accept", "*/*")};
  slots_.resize(static_cast<std::size_t>(target_.streams));
}

H2Session::~H2Session() {
  end();
  nghttp2_option_del(option_);
  nghttp2_session_callbacks_del(callbacks_);
}

bool H2Session::begin(std::uint64_t first_start_ns) {
  end();
  open_ = 0;
  succeeded_ = 0;
  last_ok_ = false;
  goaway_ = false;
  failed_ = false;
  failure_.clear();
  last_error_.clear();
  out_.reserve(kOutputReserve);
  if (nghttp2_session_client_new2(&session_, callbacks_, this, option_) != 0) {
    session_ = nullptr;
    setFailed(ErrorKind::H2, "cannot create an nghttp2 session", "");
    return false;
  }
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kStreamWindow)},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0 ||
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow) !=
          0) {
    setFailed(ErrorKind::H2, "cannot queue SETTINGS", "");
    return false;
  }
  for (Slot& slot : slots_) {
    submit(slot, first_start_ns);
    if (failed_) {
      return false;
    }
  }
  return true;
}

void H2Session::end() {
  if (session_ != nullptr) {
    nghttp2_session_del(session_);  // calls no callback
    session_ = nullptr;
  }
  for (Slot& slot : slots_) {
    slot = Slot{};
  }
  open_ = 0;
}

void H2Session::submit(Slot& slot, std::uint64_t start_ns) {
  const std::int32_t id =
      nghttp2_submit_request(session_, nullptr, request_.data(), request_.size(), nullptr, &slot);
  if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
    goaway_ = true;  // 2^30 requests on one connection: finish these, then a new connection
    return;
  }
  if (id < 0) {
    setFailed(ErrorKind::H2, "cannot submit a request: ", nghttp2_strerror(id));
    return;
  }
  slot = Slot{id, 0, false, start_ns};
  ++open_;
}

void H2Session::onStreamClosed(Slot& slot, std::uint32_t error_code) {
  --open_;
  if (slot.complete) {
    last_ok_ = slot.status / 100 == 2;
    if (last_ok_) {
      ++succeeded_;
      owner_.onResponse(uv_hrtime() - slot.start_ns);
    } else {
      char text[48];
      std::snprintf(text, sizeof text, "response status %d", slot.status);
      owner_.onFailure(ErrorKind::Status, text);  // the request failed, not the connection
    }
  } else if (!(goaway_ && error_code == NGHTTP2_REFUSED_STREAM)) {
    // Above a GOAWAY's last stream id a request was never processed: not counted.
    last_ok_ = false;
    char text[200];
    std::snprintf(text, sizeof text, "stream closed before its END_STREAM (%s)%s%.120s",
                  nghttp2_http2_strerror(error_code), last_error_.empty() ? "" : ": ",
                  last_error_.c_str());
    owner_.onFailure(ErrorKind::H2, text);
  }
  slot.stream_id = 0;
  if (repeats() && !goaway_ && !failed_ && owner_.running()) {
    submit(slot, uv_hrtime());  // the next GET on this slot: out with the next mem_send
  }
}

void H2Session::receive(std::span<const char> data) {
  if (session_ != nullptr && !failed_) {
    const auto n = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    if (n < 0) {
      setFailed(ErrorKind::H2, "session error: ", nghttp2_strerror(static_cast<int>(n)));
    }
  }
}

std::span<const char> H2Session::output() {
  out_.clear();
  if (session_ == nullptr) {
    return {};
  }
  for (;;) {
    const std::uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      setFailed(ErrorKind::H2, "cannot send: ", nghttp2_strerror(static_cast<int>(n)));
      break;
    }
    if (n == 0) {
      break;
    }
    // Frames are gathered so that one TLS write (one record, most often) carries them all.
    out_.insert(out_.end(), reinterpret_cast<const char*>(data),
                reinterpret_cast<const char*>(data) + n);
  }
  return out_;
}

void H2Session::goAway() {
  if (session_ != nullptr) {
    nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
  }
}

H2Session::Status H2Session::status() const {
  if (failed_) {
    return Status::Failed;
  }
  if (session_ == nullptr || (open_ == 0 && (!repeats() || goaway_))) {
    return Status::Done;
  }
  if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
    return Status::Done;
  }
  return Status::Running;
}

void H2Session::releaseBuffers() { std::vector<char>().swap(out_); }

void H2Session::setFailed(ErrorKind kind, std::string_view what, std::string_view detail) {
  if (failed_) {
    return;
  }
  failed_ = true;
  failure_kind_ = kind;
  failure_.assign(what);
  failure_.append(detail);
}

}  // namespace sluice::loadgen
