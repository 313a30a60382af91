// Http2Session: a server and a client made as sluice makes them, talking to each other in
// memory. Each promises what its limits say (SETTINGS), windows go back only when told, and the
// floods the options bound end the session.
#include "proxy/http/http2_session.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace sluice::proxy::http {
namespace {

// What a peer saw: the SETTINGS it was sent, the DATA it got, how its streams closed.
struct Peer {
  Http2Session session;
  std::vector<nghttp2_settings_entry> settings;
  std::size_t data = 0;
  std::vector<std::uint32_t> closed;  // error codes
};

int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto& peer = *static_cast<Peer*>(user);
  if (frame->hd.type == NGHTTP2_SETTINGS && (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
    peer.settings.assign(frame->settings.iv, frame->settings.iv + frame->settings.niv);
  }
  return 0;
}

int onData(nghttp2_session*, std::uint8_t, std::int32_t, const std::uint8_t*, std::size_t length,
           void* user) {
  static_cast<Peer*>(user)->data += length;
  return 0;
}

int onClose(nghttp2_session*, std::int32_t, std::uint32_t error, void* user) {
  static_cast<Peer*>(user)->closed.push_back(error);
  return 0;
}

Http2Callbacks callbacks() {
  Http2Callbacks c;
  c.on_frame_recv = onFrameRecv;
  c.on_data_chunk_recv = onData;
  c.on_stream_close = onClose;
  return c;
}

// Everything `from` has to send goes to `to`; false if `to` refused it (a connection error).
bool pump(Peer& from, Peer& to) {
  std::string bytes;
  from.session.drain([&](std::string_view piece) { bytes.append(piece); });
  return bytes.empty() || to.session.receive(bytes) >= 0;
}

nghttp2_nv field(std::string_view name, std::string_view value) {
  // (nghttp2 copies the bytes: its non-const pointers are never written through.)
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

std::uint32_t setting(const Peer& peer, std::int32_t id) {
  for (const nghttp2_settings_entry& entry : peer.settings) {
    if (entry.settings_id == id) {
      return entry.value;
    }
  }
  return 0xffffffff;
}

class Http2SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limits_.max_concurrent_streams = 7;
    limits_.stream_window = 1000;
    limits_.connection_window = 70000;
    limits_.max_header_bytes = 4096;
    server_.session = Http2Session::make(Http2Session::Role::Server, callbacks(), &server_, limits_);
    client_.session = Http2Session::make(Http2Session::Role::Client, callbacks(), &client_, limits_);
    ASSERT_TRUE(server_.session);
    ASSERT_TRUE(client_.session);
    ASSERT_TRUE(pump(client_, server_));  // the preface and SETTINGS
    ASSERT_TRUE(pump(server_, client_));
    ASSERT_TRUE(pump(client_, server_));  // the acknowledgement
  }

  Http2Limits limits_;
  Peer server_;
  Peer client_;
};

TEST_F(Http2SessionTest, AServerPromisesItsLimitsAndExtendedConnect) {
  EXPECT_EQ(setting(client_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 7u);
  EXPECT_EQ(setting(client_, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE), 1000u);
  EXPECT_EQ(setting(client_, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE), 4096u);
  EXPECT_EQ(setting(client_, NGHTTP2_SETTINGS_ENABLE_PUSH), 0u);
  EXPECT_EQ(setting(client_, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL), 1u);
}

TEST_F(Http2SessionTest, AClientRefusesPushAndOffersNoExtendedConnect) {
  EXPECT_EQ(setting(server_, NGHTTP2_SETTINGS_ENABLE_PUSH), 0u);
  EXPECT_EQ(setting(server_, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE), 1000u);
  EXPECT_EQ(setting(server_, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE), 4096u);
  EXPECT_EQ(setting(server_, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL), 0xffffffffu);
  // The connection's window is the limit's, for both.
  EXPECT_EQ(nghttp2_session_get_local_window_size(client_.session.get()), 70000);
  EXPECT_EQ(nghttp2_session_get_local_window_size(server_.session.get()), 70000);
}

// The window a stream's peer may fill is given back only when the glue says the bytes were
// taken: the server sends no WINDOW_UPDATE on its own, so the client stops at the window.
TEST_F(Http2SessionTest, WindowsGoBackOnlyWhenConsumed) {
  static std::string body(5000, 'x');
  static std::size_t offset = 0;
  offset = 0;
  nghttp2_data_provider provider{};
  provider.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf,
                              std::size_t length, std::uint32_t* flags, nghttp2_data_source*,
                              void*) -> ssize_t {
    const std::size_t n = std::min(length, body.size() - offset);
    std::memcpy(buf, body.data() + offset, n);
    offset += n;
    if (offset == body.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
  };
  const nghttp2_nv head[] = {field(":method", "POST"), field(":scheme", "https"),
                             field(":authority", "a.test"), field(":path", "/")};
  const std::int32_t id =
      nghttp2_submit_request(client_.session.get(), nullptr, head, 4, &provider, nullptr);
  ASSERT_GT(id, 0);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pump(client_, server_));
    ASSERT_TRUE(pump(server_, client_));
  }
  EXPECT_EQ(server_.data, 1000u) << "the stream's window, and no more";

  nghttp2_session_consume(server_.session.get(), id, server_.data);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pump(server_, client_));
    ASSERT_TRUE(pump(client_, server_));
  }
  EXPECT_EQ(server_.data, 2000u) << "one more window once the first was consumed";
}

// More SETTINGS entries in one frame than kMaxSettings end the session (ENHANCE_YOUR_CALM).
TEST_F(Http2SessionTest, ASettingsFrameOfTooManyEntriesEndsTheSession) {
  std::vector<nghttp2_settings_entry> entries(Http2Session::kMaxSettings + 1,
                                              {NGHTTP2_SETTINGS_ENABLE_PUSH, 0});
  ASSERT_EQ(nghttp2_submit_settings(client_.session.get(), NGHTTP2_FLAG_NONE, entries.data(),
                                    entries.size()),
            0);
  pump(client_, server_);
  std::string bytes;
  server_.session.drain([&](std::string_view piece) { bytes.append(piece); });
  EXPECT_FALSE(server_.session.wantsRead()) << "the server reads nothing more";
}

}  // namespace
}  // namespace sluice::proxy::http
