#pragma once
// An HTTP/2 client for the session tests, frame by frame: it opens a tunnel through a SessionBed
// (CONNECT, TLS offering ALPN h2 and verifying the sandbox's CA, the connection preface and its
// SETTINGS), writes the frames a test asks for, well-formed or hostile, and reads every frame
// sluice sends back: per stream its head, body, trailers and reset; per connection GOAWAY, PING
// acknowledgements, SETTINGS and windows.
//
// Raw frames both ways. A client session of nghttp2's would refuse to send what a hostile client
// sends, and would take sluice's answer on a stream it did not open itself for a connection
// error; here the framing (RFC 9113 sections 4 and 6) is written and read by the test, and only
// HPACK is nghttp2's (its deflater and inflater), so sluice's output is read by other eyes than
// its own.
//
// Flow control toward the client is the test's: by default the window of every DATA frame goes
// back at once (the stream's and the connection's); with Options::return_windows false none
// does, and what sluice sent is summed per stream and in all for the test to hold against the
// windows it gave. The client's own sending is not flow-controlled: a test sends small bodies.
//
// Runs on the bed's loop, from the test's thread: a test writes, then waits with bed.runUntil
// (or the await*() below) for what the client records. Declare it after the bed: it closes its
// timer and stops reading its LoopPeer (the bed's) when destroyed, before the bed runs the loop
// dry.

#include <uv.h>

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/support/session_harness.h"

namespace sluice::test_support {

struct Http2ClientOptions {
  // Each DATA frame's window goes back as it arrives (stream and connection).
  bool return_windows = true;
  // The SETTINGS of the client's preface.
  std::vector<nghttp2_settings_entry> settings;
  // sluice's SETTINGS acknowledged as they come; false: only by acknowledgeSettings(), so a
  // test can act in the window before they are in force (RFC 9113 section 6.5.3).
  bool acknowledge_settings = true;
  // The name the tunnel is opened to (CONNECT and SNI), on the TLS origin's port.
  std::string host = "origin.test";
};

class Http2Client {
 public:
  using Fields = std::vector<std::pair<std::string, std::string>>;
  using Options = Http2ClientOptions;

  // What sluice sent on one stream.
  struct Stream {
    int status = 0;  // the final response's :status (0: no final head yet)
    Fields head;     // its fields, pseudo-headers included, as decoded
    Fields trailers;
    std::string body;            // DATA, padding removed
    std::size_t data_bytes = 0;  // DATA payloads with their padding: what windows count
    std::size_t data_frames = 0;
    bool ended = false;                  // END_STREAM seen
    std::optional<std::uint32_t> reset;  // RST_STREAM's error code
    // The first field of the head named `name` (lower case).
    std::optional<std::string> header(std::string_view name) const;
    bool over() const { return ended || reset.has_value(); }
  };

  struct GoAway {
    std::int32_t last_stream_id = 0;
    std::uint32_t error_code = 0;
    std::string debug;
  };

  // One frame as it came, in order.
  struct Frame {
    std::uint8_t type = 0;
    std::uint8_t flags = 0;
    std::int32_t stream = 0;
    std::size_t length = 0;
    std::uint32_t code = 0;  // RST_STREAM's and GOAWAY's error code
  };

  explicit Http2Client(SessionBed& bed, Options options = {});
  ~Http2Client();
  Http2Client(const Http2Client&) = delete;
  Http2Client& operator=(const Http2Client&) = delete;

  // A new client of the bed: CONNECT origin.test:<the TLS origin's port>, TLS with SNI
  // origin.test (or Options::host) offering h2, then the preface and SETTINGS. True once sluice
  // chose h2, its SETTINGS came (acknowledged) and it acknowledged the client's; a failure says
  // which step.
  bool open();
  // origin.test:<port>: the tunnel's authority, which a stream's :authority names.
  const std::string& authority() const { return authority_; }
  LoopPeer& peer() { return *peer_; }

  // --- frames out (each written at once, in its own TLS record)
  // A request's HEADERS on the next client stream: :method, :scheme https, :authority (the
  // tunnel's), :path, then `extra`. Returns the stream's id.
  std::int32_t request(std::string_view method, std::string_view path, const Fields& extra = {},
                       bool end_stream = true);
  // HEADERS of exactly `fields` (END_HEADERS; END_STREAM if `end_stream`) on `id`.
  void headers(std::int32_t id, const Fields& fields, bool end_stream);
  void data(std::int32_t id, std::string_view bytes, bool end_stream);
  void ping(std::uint64_t opaque = 0);
  void rstStream(std::int32_t id, std::uint32_t error_code);
  void windowUpdate(std::int32_t id, std::uint32_t increment);
  // The SETTINGS acknowledgement (Options::acknowledge_settings false).
  void acknowledgeSettings();
  // A PING every `every` from a timer on the bed's loop, until the connection ends.
  void pingEvery(std::chrono::milliseconds every);
  std::size_t pingsSent() const { return pings_sent_; }

  // --- frames as bytes, for a test that writes many at once (write())
  // The next client stream id, taken.
  std::int32_t takeStreamId();
  // The HEADERS frame of `fields`: HPACK-encoded now, so such frames must be written in the
  // order they were made (the encoder's table is the connection's).
  std::string headersFrame(std::int32_t id, const Fields& fields, bool end_stream);
  // The fields of a request as request() sends them.
  Fields requestFields(std::string_view method, std::string_view path,
                       const Fields& extra = {}) const;
  static std::string frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream,
                           std::string_view payload);
  static std::string dataFrame(std::int32_t id, std::string_view bytes, bool end_stream);
  static std::string pingFrame(std::uint64_t opaque, bool ack = false);
  static std::string rstStreamFrame(std::int32_t id, std::uint32_t error_code);
  void write(std::string_view frames);

  // --- what came in
  // The stream `id` as seen so far (an empty one if nothing came on it).
  const Stream& stream(std::int32_t id) { return streams_[id]; }
  const std::optional<GoAway>& goAway() const { return goaway_; }
  std::size_t pingAcks() const { return ping_acks_; }
  // DATA payload bytes on every stream (padding included).
  std::size_t dataBytes() const { return data_bytes_; }
  // RST_STREAM frames with `error_code`.
  std::size_t resets(std::uint32_t error_code) const;
  std::size_t resets() const { return resets_; }
  const std::vector<Frame>& frames() const { return frames_; }
  // sluice's SETTINGS value for `id`, if it sent one.
  std::optional<std::uint32_t> setting(std::int32_t id) const;
  // The connection's end as the client's socket saw it (FIN or RST).
  bool ended() const { return peer_ != nullptr && peer_->end() != LoopPeer::End::Open; }
  // What the client could not read (it reads nothing more after it): "" while all is well.
  const std::string& error() const { return error_; }
  // The frames seen, for a failure's message.
  std::string describe() const;

  // --- waits on the bed's loop (false when the limit passed first)
  bool awaitStream(std::int32_t id, std::chrono::milliseconds limit = std::chrono::seconds(5));
  bool awaitGoAway(std::chrono::milliseconds limit = std::chrono::seconds(5));
  bool awaitEnd(std::chrono::milliseconds limit = std::chrono::seconds(5));
  bool awaitPingAcks(std::size_t count, std::chrono::milliseconds limit = std::chrono::seconds(5));

 private:
  void onRead();
  void onFrame(std::uint8_t type, std::uint8_t flags, std::int32_t id, std::string_view payload);
  void onHeaderBlock(std::int32_t id, bool end_stream);
  void fail(std::string why);

  SessionBed& bed_;
  Options options_;
  LoopPeer* peer_ = nullptr;  // the bed's
  std::string authority_;
  nghttp2_hd_deflater* deflater_ = nullptr;
  nghttp2_hd_inflater* inflater_ = nullptr;
  std::int32_t next_stream_id_ = 1;
  uv_timer_t* ping_timer_ = nullptr;  // freed by its close callback
  std::size_t pings_sent_ = 0;

  std::map<std::int32_t, Stream> streams_;
  std::vector<Frame> frames_;
  std::optional<GoAway> goaway_;
  std::map<std::int32_t, std::uint32_t> settings_;
  bool settings_received_ = false;
  bool settings_acked_ = false;
  std::size_t ping_acks_ = 0;
  std::size_t data_bytes_ = 0;
  std::size_t resets_ = 0;
  // A header block continued in CONTINUATION frames.
  std::string block_;
  std::int32_t block_stream_ = 0;
  bool block_ends_stream_ = false;
  std::string error_;
};

}  // namespace sluice::test_support
