#include "tests/support/http2_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>

namespace sluice::test_support {

namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::size_t kFrameHeader = 9;
constexpr std::size_t kMaxFrame = 16384;  // SETTINGS_MAX_FRAME_SIZE's default, both ways

// RFC 9113 section 6: frame types and flags.
constexpr std::uint8_t kData = 0x0;
constexpr std::uint8_t kHeaders = 0x1;
constexpr std::uint8_t kRstStream = 0x3;
constexpr std::uint8_t kSettings = 0x4;
constexpr std::uint8_t kPushPromise = 0x5;
constexpr std::uint8_t kPing = 0x6;
constexpr std::uint8_t kGoAway = 0x7;
constexpr std::uint8_t kWindowUpdate = 0x8;
constexpr std::uint8_t kContinuation = 0x9;
constexpr std::uint8_t kEndStream = 0x1;
constexpr std::uint8_t kAck = 0x1;
constexpr std::uint8_t kEndHeaders = 0x4;
constexpr std::uint8_t kPadded = 0x8;
constexpr std::uint8_t kPriority = 0x20;

void putUint32(std::string& out, std::uint32_t value) {
  out += static_cast<char>(value >> 24);
  out += static_cast<char>(value >> 16);
  out += static_cast<char>(value >> 8);
  out += static_cast<char>(value);
}

std::uint32_t getUint32(std::string_view bytes) {
  const auto byte = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[i]));
  };
  return (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3);
}

std::string_view typeName(std::uint8_t type) {
  static constexpr std::string_view kNames[] = {
      "DATA",         "HEADERS", "PRIORITY", "RST_STREAM",    "SETTINGS",
      "PUSH_PROMISE", "PING",    "GOAWAY",   "WINDOW_UPDATE", "CONTINUATION"};
  return type < std::size(kNames) ? kNames[type] : "UNKNOWN";
}

}  // namespace

std::optional<std::string> Http2Client::Stream::header(std::string_view name) const {
  for (const auto& [n, v] : head) {
    if (n == name) {
      return v;
    }
  }
  return std::nullopt;
}

Http2Client::Http2Client(SessionBed& bed, Options options)
    : bed_(bed), options_(std::move(options)) {
  EXPECT_EQ(nghttp2_hd_deflate_new(&deflater_, 4096), 0);
  EXPECT_EQ(nghttp2_hd_inflate_new(&inflater_), 0);
}

Http2Client::~Http2Client() {
  if (peer_ != nullptr) {
    peer_->on_read = nullptr;  // the peer is the bed's, and outlives this client
  }
  if (ping_timer_ != nullptr) {
    uv_close(reinterpret_cast<uv_handle_t*>(ping_timer_),
             [](uv_handle_t* handle) { delete reinterpret_cast<uv_timer_t*>(handle); });
  }
  nghttp2_hd_deflate_del(deflater_);
  nghttp2_hd_inflate_del(inflater_);
}

bool Http2Client::open() {
  authority_ = options_.host + ":" + std::to_string(bed_.tlsOrigin().port());
  peer_ = &bed_.connectClient();
  peer_->write("CONNECT " + authority_ + " HTTP/1.1\r\nHost: " + authority_ + "\r\n\r\n");
  bed_.runUntil([&] {
    return peer_->received().find("\r\n\r\n") != std::string::npos ||
           peer_->end() != LoopPeer::End::Open;
  });
  if (!peer_->received().starts_with("HTTP/1.1 200")) {
    ADD_FAILURE() << "CONNECT " << authority_ << " answered: " << peer_->received();
    return false;
  }
  peer_->received().clear();
  peer_->startTlsClient(bed_.sandboxCaFile(), options_.host, MemoryTls::Alpn::H2);
  bed_.runUntil([&] {
    return peer_->tls()->handshakeDone() || peer_->tls()->failed() ||
           peer_->end() != LoopPeer::End::Open;
  });
  if (!peer_->tls()->handshakeDone() || peer_->tls()->selectedAlpn() != "h2") {
    ADD_FAILURE() << "no h2 tunnel: " << peer_->tls()->error() << " (ALPN \""
                  << peer_->tls()->selectedAlpn() << "\")";
    return false;
  }
  peer_->on_read = [this](LoopPeer&) { onRead(); };
  std::string settings;
  for (const nghttp2_settings_entry& entry : options_.settings) {
    settings += static_cast<char>(entry.settings_id >> 8);
    settings += static_cast<char>(entry.settings_id);
    putUint32(settings, entry.value);
  }
  write(std::string(kPreface) + frame(kSettings, 0, 0, settings));
  onRead();  // what came with the handshake's last read
  bed_.runUntil(
      [&] { return (settings_received_ && settings_acked_) || ended() || !error_.empty(); });
  if (!settings_received_ || !settings_acked_) {
    ADD_FAILURE() << "no SETTINGS exchange: " << describe();
    return false;
  }
  return true;
}

// --- frames out ---------------------------------------------------------------------------------

std::string Http2Client::frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream,
                               std::string_view payload) {
  std::string out;
  out.reserve(kFrameHeader + payload.size());
  out += static_cast<char>(payload.size() >> 16);
  out += static_cast<char>(payload.size() >> 8);
  out += static_cast<char>(payload.size());
  out += static_cast<char>(type);
  out += static_cast<char>(flags);
  putUint32(out, static_cast<std::uint32_t>(stream) & 0x7fffffffu);
  out.append(payload);
  return out;
}

std::string Http2Client::dataFrame(std::int32_t id, std::string_view bytes, bool end_stream) {
  return frame(kData, end_stream ? kEndStream : 0, id, bytes);
}

std::string Http2Client::pingFrame(std::uint64_t opaque, bool ack) {
  std::string payload;
  putUint32(payload, static_cast<std::uint32_t>(opaque >> 32));
  putUint32(payload, static_cast<std::uint32_t>(opaque));
  return frame(kPing, ack ? kAck : 0, 0, payload);
}

std::string Http2Client::rstStreamFrame(std::int32_t id, std::uint32_t error_code) {
  std::string payload;
  putUint32(payload, error_code);
  return frame(kRstStream, 0, id, payload);
}

std::int32_t Http2Client::takeStreamId() {
  const std::int32_t id = next_stream_id_;
  next_stream_id_ += 2;
  return id;
}

Http2Client::Fields Http2Client::requestFields(std::string_view method, std::string_view path,
                                               const Fields& extra) const {
  Fields fields = {{":method", std::string(method)},
                   {":scheme", "https"},
                   {":authority", authority_},
                   {":path", std::string(path)}};
  fields.insert(fields.end(), extra.begin(), extra.end());
  return fields;
}

std::string Http2Client::headersFrame(std::int32_t id, const Fields& fields, bool end_stream) {
  std::vector<nghttp2_nv> nva;
  for (const auto& [name, value] : fields) {
    // (nghttp2 copies the bytes: its non-const pointers are never written through.)
    nva.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                   reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                   value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  std::string block(nghttp2_hd_deflate_bound(deflater_, nva.data(), nva.size()), '\0');
  const ssize_t n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<std::uint8_t*>(block.data()),
                                          block.size(), nva.data(), nva.size());
  EXPECT_GE(n, 0) << "HPACK: " << nghttp2_strerror(static_cast<int>(n));
  block.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  EXPECT_LE(block.size(), kMaxFrame) << "a test's header block fits one frame";
  return frame(kHeaders, static_cast<std::uint8_t>(kEndHeaders | (end_stream ? kEndStream : 0)), id,
               block);
}

std::int32_t Http2Client::request(std::string_view method, std::string_view path,
                                  const Fields& extra, bool end_stream) {
  const std::int32_t id = takeStreamId();
  headers(id, requestFields(method, path, extra), end_stream);
  return id;
}

void Http2Client::headers(std::int32_t id, const Fields& fields, bool end_stream) {
  write(headersFrame(id, fields, end_stream));
}

void Http2Client::data(std::int32_t id, std::string_view bytes, bool end_stream) {
  write(dataFrame(id, bytes, end_stream));
}

void Http2Client::ping(std::uint64_t opaque) { write(pingFrame(opaque)); }

void Http2Client::rstStream(std::int32_t id, std::uint32_t error_code) {
  write(rstStreamFrame(id, error_code));
}

void Http2Client::windowUpdate(std::int32_t id, std::uint32_t increment) {
  std::string payload;
  putUint32(payload, increment & 0x7fffffffu);
  write(frame(kWindowUpdate, 0, id, payload));
}

void Http2Client::acknowledgeSettings() { write(frame(kSettings, kAck, 0, "")); }

void Http2Client::write(std::string_view frames) {
  if (peer_ != nullptr && !peer_->closed()) {
    peer_->write(frames);
  }
}

void Http2Client::pingEvery(std::chrono::milliseconds every) {
  if (ping_timer_ == nullptr) {
    ping_timer_ = new uv_timer_t;
    uv_timer_init(bed_.loop(), ping_timer_);
    ping_timer_->data = this;
  }
  const auto period = static_cast<std::uint64_t>(every.count());
  uv_timer_start(
      ping_timer_,
      [](uv_timer_t* timer) {
        auto* self = static_cast<Http2Client*>(timer->data);
        if (self->ended() || self->peer_->closed() || self->goaway_) {
          uv_timer_stop(timer);
          return;
        }
        self->ping(++self->pings_sent_);
      },
      period, period);
}

// --- frames in ----------------------------------------------------------------------------------

void Http2Client::onRead() {
  std::string& in = peer_->received();
  std::size_t at = 0;
  while (error_.empty() && in.size() - at >= kFrameHeader) {
    const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(in[at + i]); };
    const std::size_t length = (std::size_t{byte(0)} << 16) | (std::size_t{byte(1)} << 8) | byte(2);
    if (in.size() - at < kFrameHeader + length) {
      break;
    }
    const std::uint8_t type = byte(3);
    const std::uint8_t flags = byte(4);
    const auto id =
        static_cast<std::int32_t>(getUint32(std::string_view(in).substr(at + 5)) & 0x7fffffffu);
    const std::string_view payload = std::string_view(in).substr(at + kFrameHeader, length);
    onFrame(type, flags, id, payload);
    at += kFrameHeader + length;
  }
  in.erase(0, at);
}

void Http2Client::fail(std::string why) {
  if (error_.empty()) {
    error_ = std::move(why);
  }
}

void Http2Client::onFrame(std::uint8_t type, std::uint8_t flags, std::int32_t id,
                          std::string_view payload) {
  frames_.push_back({type, flags, id, payload.size(), 0});
  if (!block_.empty() && type != kContinuation) {
    fail("a header block interrupted by " + std::string(typeName(type)));
    return;
  }
  // A padded frame's padding (DATA, HEADERS): its length byte and the padding itself.
  std::string_view content = payload;
  if ((type == kData || type == kHeaders) && (flags & kPadded) != 0) {
    const std::size_t pad = content.empty() ? 0 : static_cast<std::uint8_t>(content[0]);
    if (content.empty() || pad + 1 > content.size()) {
      fail("padding longer than its frame");
      return;
    }
    content = content.substr(1, content.size() - 1 - pad);
  }
  switch (type) {
    case kData: {
      Stream& s = streams_[id];
      s.body.append(content);
      s.data_bytes += payload.size();
      ++s.data_frames;
      data_bytes_ += payload.size();
      s.ended = s.ended || (flags & kEndStream) != 0;
      if (options_.return_windows && !payload.empty()) {
        if (!s.ended) {
          windowUpdate(id, static_cast<std::uint32_t>(payload.size()));
        }
        windowUpdate(0, static_cast<std::uint32_t>(payload.size()));
      }
      return;
    }
    case kHeaders:
      if ((flags & kPriority) != 0) {
        content.remove_prefix(std::min<std::size_t>(5, content.size()));
      }
      block_.assign(content);
      block_stream_ = id;
      block_ends_stream_ = (flags & kEndStream) != 0;
      if ((flags & kEndHeaders) != 0) {
        onHeaderBlock(id, block_ends_stream_);
      }
      return;
    case kContinuation:
      if (id != block_stream_) {
        fail("CONTINUATION of no header block");
        return;
      }
      block_.append(content);
      if ((flags & kEndHeaders) != 0) {
        onHeaderBlock(id, block_ends_stream_);
      }
      return;
    case kRstStream:
      if (payload.size() == 4) {
        streams_[id].reset = getUint32(payload);
        frames_.back().code = getUint32(payload);
        ++resets_;
      }
      return;
    case kSettings:
      if ((flags & kAck) != 0) {
        settings_acked_ = true;
        return;
      }
      for (std::size_t i = 0; i + 6 <= payload.size(); i += 6) {
        const auto setting_id =
            static_cast<std::int32_t>((static_cast<std::uint8_t>(payload[i]) << 8) |
                                      static_cast<std::uint8_t>(payload[i + 1]));
        settings_[setting_id] = getUint32(payload.substr(i + 2));
      }
      settings_received_ = true;
      if (options_.acknowledge_settings) {
        acknowledgeSettings();
      }
      return;
    case kPing:
      if ((flags & kAck) != 0) {
        ++ping_acks_;
      } else {
        write(frame(kPing, kAck, 0, payload));
      }
      return;
    case kGoAway:
      if (payload.size() >= 8) {
        goaway_ = GoAway{static_cast<std::int32_t>(getUint32(payload) & 0x7fffffffu),
                         getUint32(payload.substr(4)), std::string(payload.substr(8))};
        frames_.back().code = goaway_->error_code;
      }
      return;
    case kPushPromise:
      fail("PUSH_PROMISE: sluice pushes nothing");
      return;
    default:
      return;  // WINDOW_UPDATE, PRIORITY: nothing the client sends needs them
  }
}

void Http2Client::onHeaderBlock(std::int32_t id, bool end_stream) {
  Fields fields;
  auto* in = reinterpret_cast<std::uint8_t*>(block_.data());
  std::size_t left = block_.size();
  for (;;) {
    nghttp2_nv nv;
    int inflate_flags = 0;
    const ssize_t n = nghttp2_hd_inflate_hd2(inflater_, &nv, &inflate_flags, in, left, 1);
    if (n < 0) {
      fail("HPACK: " + std::string(nghttp2_strerror(static_cast<int>(n))));
      return;
    }
    in += n;
    left -= static_cast<std::size_t>(n);
    if ((inflate_flags & NGHTTP2_HD_INFLATE_EMIT) != 0) {
      fields.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                          std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
    }
    if ((inflate_flags & NGHTTP2_HD_INFLATE_FINAL) != 0) {
      nghttp2_hd_inflate_end_headers(inflater_);
      break;
    }
    if ((inflate_flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && left == 0) {
      break;
    }
  }
  block_.clear();
  Stream& s = streams_[id];
  int status = 0;
  if (!fields.empty() && fields.front().first == ":status") {
    std::from_chars(fields.front().second.data(),
                    fields.front().second.data() + fields.front().second.size(), status);
  }
  if (status != 0 && (s.status == 0 || s.status < 200)) {
    s.status = status;
    s.head = std::move(fields);
  } else {
    s.trailers = std::move(fields);
  }
  s.ended = s.ended || end_stream;
}

// --- what came in -------------------------------------------------------------------------------

std::size_t Http2Client::resets(std::uint32_t error_code) const {
  return static_cast<std::size_t>(
      std::count_if(frames_.begin(), frames_.end(),
                    [&](const Frame& f) { return f.type == kRstStream && f.code == error_code; }));
}

std::optional<std::uint32_t> Http2Client::setting(std::int32_t id) const {
  auto it = settings_.find(id);
  return it == settings_.end() ? std::nullopt : std::optional<std::uint32_t>(it->second);
}

std::string Http2Client::describe() const {
  std::string out = std::to_string(frames_.size()) + " frames from sluice:";
  std::size_t shown = 0;
  for (const Frame& f : frames_) {
    if (++shown > 40) {
      out += " ...";
      break;
    }
    out += " " + std::string(typeName(f.type)) + "(" + std::to_string(f.stream);
    if (f.type == kRstStream || f.type == kGoAway) {
      out += ", code " + std::to_string(f.code);
    }
    out += ")";
  }
  if (goaway_) {
    out += "; GOAWAY last stream " + std::to_string(goaway_->last_stream_id) + ", code " +
           std::to_string(goaway_->error_code) + " \"" + goaway_->debug + "\"";
  }
  if (peer_ != nullptr && peer_->end() != LoopPeer::End::Open) {
    out += peer_->end() == LoopPeer::End::Eof ? "; then EOF" : "; then a reset";
  }
  if (!error_.empty()) {
    out += "; unreadable: " + error_;
  }
  return out;
}

// --- waits --------------------------------------------------------------------------------------

bool Http2Client::awaitStream(std::int32_t id, std::chrono::milliseconds limit) {
  return bed_.runUntil([&] { return streams_[id].over() || ended() || !error_.empty(); }, limit) &&
         streams_[id].over();
}

bool Http2Client::awaitGoAway(std::chrono::milliseconds limit) {
  return bed_.runUntil([&] { return goaway_.has_value() || ended() || !error_.empty(); }, limit) &&
         goaway_.has_value();
}

bool Http2Client::awaitEnd(std::chrono::milliseconds limit) {
  return bed_.runUntil([&] { return ended(); }, limit);
}

bool Http2Client::awaitPingAcks(std::size_t count, std::chrono::milliseconds limit) {
  return bed_.runUntil([&] { return ping_acks_ >= count || ended() || !error_.empty(); }, limit) &&
         ping_acks_ >= count;
}

}  // namespace sluice::test_support
