// libFuzzer target for what an origin's HTTP/2 frames meet: nghttp2's client session as sluice
// runs it toward origins (Http2UpstreamSession::newClientSession: its options, SETTINGS,
// windows), with requests open on it, and Http2ResponseBuilder on every stream's HEADERS
// blocks, fed the way Http2UpstreamSession's callbacks and Http2UpstreamStream feed it: a field
// per on_header (a field over the bound refused with TEMPORAL_CALLBACK_FAILURE: nghttp2 resets
// the stream), finish(END_STREAM) per HEADERS frame received, DATA given back as a reading
// client takes it, request bodies pulled from a buffer (readRequest's logic), and a stream let
// go the way Http2UpstreamStream::detach lets it go (forget: RST_STREAM CANCEL unless its
// response completed and nghttp2 took its request's end) when its response completes or fails.
// Parser files: proxy/http/http2_response.cc
// The requests: GET (stream 1), HEAD (3), POST whose client sends half of its body at once (5).
// The input is what the origin sends after TLS: its SETTINGS first (nghttp2 wants them first),
// then its frames, in two reads cut at a point chosen from the input's last byte. Between the
// reads the POST's client sends the rest and ends it, its client reads again, and a fourth
// request (GET) opens if the session still takes one. Invariants, each a trap on violation:
//   - add() refuses a field exactly when the block's names, values and 32 bytes a field pass
//     max_header_bytes (counted from the block's first field);
//   - each block is what its place says: a head with a :status of 100-199 not ending the
//     stream Interim, 200-999 Final, none or another Invalid; after the final head, a block
//     that ends the stream Trailers, any other Invalid; after the trailers, Invalid. A head
//     nghttp2 accepted with a status of 100-999 is never Invalid, nor are trailers it accepted;
//   - head() holds exactly the regular fields of the block that made it (nothing of a 1xx in
//     the final head; the trailers never in it), with its status;
//   - a Final head's framing: None for a HEAD's answer, 204 and 304 (a content-length kept as
//     has_content_length); ContentLength 0 when the head ended the stream; ContentLength n for
//     content-length n; Chunked otherwise. The body nghttp2 delivers never passes n, is n when
//     the stream ends, and is empty for None;
//   - trailers() is null until a Trailers block ended, then holds exactly its fields;
//   - request bytes are never pulled from a stream the session let go (its exchange is over
//     and may be reused or freed): a read for one is refused;
//   - nghttp2 errors end the session, never crash it; nothing leaks or reads out of bounds.

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "proxy/http/http2_response.h"
#include "proxy/session/upstream/http2_upstream_session.h"

namespace {

namespace sh = sluice::proxy::http;
using Block = sh::Http2ResponseBuilder::Block;
using Fields = std::vector<std::pair<std::string, std::string>>;

// max_header_bytes: small, so that inputs reach the bound (sluice's default is 64 KiB).
constexpr std::size_t kMaxHeaderBytes = 4096;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

// HeaderBlock keeps values without their surrounding whitespace.
std::string trimmed(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) {
    v.remove_prefix(1);
  }
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) {
    v.remove_suffix(1);
  }
  return std::string(v);
}

bool sameFields(const sh::HeaderBlock& block, const Fields& fields) {
  if (block.size() != fields.size()) {
    return false;
  }
  for (std::size_t i = 0; i < block.size(); ++i) {
    if (block.name(i) != fields[i].first || block.value(i) != trimmed(fields[i].second)) {
      return false;
    }
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

// The first content-length of `fields`, if it is a number (RFC 9110 §8.6, at most INT64_MAX).
std::optional<std::uint64_t> contentLength(const Fields& fields) {
  for (const auto& [name, raw] : fields) {
    if (!iequals(name, "content-length")) {
      continue;
    }
    const std::string value = trimmed(raw);
    if (value.empty()) {
      return std::nullopt;
    }
    std::uint64_t n = 0;
    for (char c : value) {
      if (c < '0' || c > '9') {
        return std::nullopt;
      }
      const auto digit = static_cast<std::uint64_t>(c - '0');
      if (n > (std::numeric_limits<std::int64_t>::max() - digit) / 10) {
        return std::nullopt;
      }
      n = n * 10 + digit;
    }
    return n;
  }
  return std::nullopt;
}

// A :status value as a number, if it is 100-999 (nghttp2 checked it has three digits).
std::optional<int> statusOf(const std::optional<std::string>& value) {
  if (!value || value->empty() || value->size() > 3) {
    return std::nullopt;
  }
  int n = 0;
  for (char c : *value) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    n = n * 10 + (c - '0');
  }
  return n >= 100 && n <= 999 ? std::optional<int>(n) : std::nullopt;
}

// One request's stream: Http2UpstreamStream's request buffer and response builder, and beside
// them the response as the target saw it come (what the builder's answers are checked against).
struct Stream {
  enum class Phase : std::uint8_t { Head, Body, Done };

  sh::Http2ResponseBuilder response;
  std::int32_t id = -1;
  bool head_request = false;
  // The request body not yet pulled into DATA (readRequest), and whether the client ended it.
  std::string out;
  std::size_t out_offset = 0;
  bool request_ended = true;
  bool request_sent = false;  // nghttp2 took its end (Http2UpstreamStream::request_sent_)
  bool reading = true;  // its client takes the bytes (else they wait: setReading)
  std::size_t unconsumed = 0;
  bool attached = false;  // the session knows it (Http2UpstreamStream::session_)
  bool let_go = false;    // the session forgot it: its exchange is over
  bool complete = false;
  bool failed = false;

  // The response as received.
  Phase phase = Phase::Head;
  Fields block;                       // regular fields of the block being received
  std::optional<std::string> status;  // its :status
  std::size_t block_bytes = 0;
  bool refused = false;  // add() said no: nghttp2 resets the stream
  int final_status = 0;
  Fields final_fields;
  std::uint64_t body_bytes = 0;
};

struct Session {
  nghttp2_session* session = nullptr;
  std::array<Stream, 4> streams;  // (never freed while nghttp2 may name them: let_go traps)
  std::unordered_map<std::int32_t, Stream*> open;  // Http2UpstreamSession::streams_
  bool going_away = false;

  Stream* streamOf(std::int32_t id) const {
    auto it = open.find(id);
    return it == open.end() ? nullptr : it->second;
  }

  // Http2UpstreamSession::forget, called by Http2UpstreamStream::detach when the exchange lets
  // its channel go: out of the map; reset unless nghttp2 closed it.
  void forget(Stream& s, bool reset) {
    s.attached = false;
    s.let_go = true;
    if (open.erase(s.id) == 0) {
      return;
    }
    if (reset && nghttp2_session_find_stream(session, s.id) != nullptr) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
    }
  }

  // Http2UpstreamStream::detach: reset unless both sides ended.
  void detach(Stream& s) {
    if (s.attached) {
      forget(s, !(s.complete && s.request_sent));
    }
  }

  // The exchange finished (onResponseComplete -> finish -> release) or failed (-> release).
  void complete(Stream& s) {
    if (s.phase == Stream::Phase::Head || s.complete || s.failed) {
      return;
    }
    s.complete = true;
    detach(s);
  }
  void fail(Stream& s) {
    s.failed = true;
    detach(s);
  }
};

Session* sessionOf(void* user) { return static_cast<Session*>(user); }

// nghttp2 pulls request DATA: Http2UpstreamSession's readRequestBody (the stream looked up by
// its id: one let go is refused) and Http2UpstreamStream::readRequest.
ssize_t readBody(nghttp2_session*, std::int32_t stream_id, std::uint8_t* buf, std::size_t length,
                 std::uint32_t* flags, nghttp2_data_source* source, void* user) {
  Stream* s = sessionOf(user)->streamOf(stream_id);
  if (s == nullptr) {
    // Let go while nghttp2 held its DATA: never read (its exchange may hold another request's
    // body by now, or be freed), and the source pointer confirms which one it was.
    check(static_cast<Stream*>(source->ptr)->let_go);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  check(!s->let_go && static_cast<Stream*>(source->ptr) == s);
  const std::size_t available = s->out.size() - s->out_offset;
  const std::size_t n = std::min(length, available);
  if (n > 0) {
    std::memcpy(buf, s->out.data() + s->out_offset, n);
    s->out_offset += n;
  }
  if (s->out_offset == s->out.size()) {
    s->out.clear();
    s->out_offset = 0;
    if (s->request_ended) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      s->request_sent = true;
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
  }
  return static_cast<ssize_t>(n);
}

int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
             std::size_t name_length, const std::uint8_t* value, std::size_t value_length,
             std::uint8_t, void* user) {
  Stream* s = sessionOf(user)->streamOf(frame->hd.stream_id);
  if (s == nullptr || frame->hd.type != NGHTTP2_HEADERS) {
    return 0;
  }
  const std::string_view n(reinterpret_cast<const char*>(name), name_length);
  const std::string_view v(reinterpret_cast<const char*>(value), value_length);
  s->block_bytes += n.size() + v.size() + 32;
  const bool expected = s->block_bytes <= kMaxHeaderBytes;
  const bool taken = s->response.add(n, v);
  check(taken == expected);
  if (!taken) {
    s->refused = true;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (!n.empty() && n.front() == ':') {
    if (n == ":status" && s->phase == Stream::Phase::Head) {
      s->status = std::string(v);
    }
  } else if (s->phase != Stream::Phase::Done) {
    s->block.emplace_back(n, v);
  }
  return 0;
}

// The final head, against the rules of http2_response.h.
void checkFinal(const Stream& s, bool end_stream) {
  const sh::ResponseHead& h = s.response.head();
  check(h.status >= 200 && h.status <= 999);
  check(h.status == *statusOf(s.status));
  check(sameFields(h.headers, s.block));
  check(h.http_major == 2 && h.http_minor == 0);
  const std::optional<std::uint64_t> length = contentLength(s.block);
  if (s.head_request || h.status == 204 || h.status == 304) {
    check(h.framing == sh::ResponseFraming::None);
    check(h.has_content_length == length.has_value());
    check(h.content_length == length.value_or(0));
  } else if (end_stream) {
    check(h.framing == sh::ResponseFraming::ContentLength);
    check(h.has_content_length && h.content_length == 0);
  } else if (length) {
    check(h.framing == sh::ResponseFraming::ContentLength);
    check(h.has_content_length && h.content_length == *length);
  } else {
    check(h.framing == sh::ResponseFraming::Chunked);
    check(!h.has_content_length && h.content_length == 0);
  }
}

// A HEADERS block ended: Http2UpstreamStream::onHeadersEnd, with the invariants.
void onHeadersEnd(Session& session, Stream& s, bool end_stream) {
  if (s.complete || s.failed) {
    return;
  }
  const Stream::Phase phase = s.phase;
  const std::optional<int> status = statusOf(s.status);
  Block expected = Block::Invalid;
  if (phase == Stream::Phase::Body) {
    expected = end_stream ? Block::Trailers : Block::Invalid;
  } else if (phase == Stream::Phase::Head && status) {
    expected = *status >= 200 ? Block::Final : end_stream ? Block::Invalid : Block::Interim;
  }
  const Block got = s.response.finish(end_stream);
  if (!s.refused) {  // (a refused block's count runs on: nothing is predicted after it)
    check(got == expected);
    // What nghttp2 accepted as a head with a status, or as trailers, is never out of place.
    check(got != Block::Invalid || phase == Stream::Phase::Done ||
          (phase == Stream::Phase::Head && !status));
  }
  switch (got) {
    case Block::Interim:
      check(s.response.head().status >= 100 && s.response.head().status <= 199);
      check(sameFields(s.response.head().headers, s.block));
      check(s.response.trailers() == nullptr);
      break;
    case Block::Final:
      if (!s.refused) {
        checkFinal(s, end_stream);
      }
      check(s.response.trailers() == nullptr);
      s.phase = Stream::Phase::Body;
      s.final_status = s.response.head().status;
      s.final_fields = s.block;
      break;
    case Block::Trailers:
      check(s.response.trailers() != nullptr);
      if (!s.refused) {
        check(sameFields(*s.response.trailers(), s.block));
      }
      // The head is as it was.
      check(s.response.head().status == s.final_status);
      check(sameFields(s.response.head().headers, s.final_fields));
      s.phase = Stream::Phase::Done;
      break;
    case Block::Invalid:
      break;
  }
  s.block.clear();
  s.status.reset();
  s.block_bytes = 0;
  if (got == Block::Invalid) {
    session.fail(s);  // ("the origin sent a HEADERS block out of place")
  } else if (got == Block::Trailers || (got == Block::Final && end_stream)) {
    session.complete(s);
  }
}

int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  Session& session = *sessionOf(user);
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    session.going_away = true;
    return 0;
  }
  Stream* s = session.streamOf(frame->hd.stream_id);
  if (s == nullptr) {
    return 0;
  }
  check((s->response.trailers() != nullptr) == (s->phase == Stream::Phase::Done));
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS) {
    onHeadersEnd(session, *s, end_stream);
  } else if (frame->hd.type == NGHTTP2_DATA && end_stream && s->phase == Stream::Phase::Body &&
             !s->complete && !s->failed) {
    const sh::ResponseHead& h = s->response.head();
    if (h.framing == sh::ResponseFraming::ContentLength) {
      check(s->body_bytes == h.content_length);
    }
    session.complete(*s);
  }
  return 0;
}

int onDataChunk(nghttp2_session* ng, std::uint8_t, std::int32_t stream_id, const std::uint8_t*,
                std::size_t length, void* user) {
  nghttp2_session_consume_connection(ng, length);
  Stream* s = sessionOf(user)->streamOf(stream_id);
  if (s == nullptr) {
    nghttp2_session_consume_stream(ng, stream_id, length);
    return 0;
  }
  // Http2UpstreamStream::onData: bytes before the final head, or after a failure, are dropped.
  if (s->phase == Stream::Phase::Head || s->complete || s->failed) {
    return 0;
  }
  check(s->response.trailers() == nullptr);
  s->body_bytes += length;
  const sh::ResponseHead& h = s->response.head();
  if (!s->refused) {
    check(h.framing != sh::ResponseFraming::None || s->body_bytes == 0);
    check(h.framing != sh::ResponseFraming::ContentLength || s->body_bytes <= h.content_length);
  }
  if (s->reading) {
    nghttp2_session_consume_stream(ng, stream_id, length);
  } else {
    s->unconsumed += length;
  }
  return 0;
}

int onStreamClose(nghttp2_session*, std::int32_t stream_id, std::uint32_t, void* user) {
  Session& session = *sessionOf(user);
  Stream* s = session.streamOf(stream_id);
  if (s == nullptr) {
    return 0;
  }
  session.open.erase(stream_id);
  s->attached = false;  // (onClosed: the session forgot it; the exchange fails or is complete)
  if (!s->complete) {
    s->failed = true;
  }
  return 0;
}

// What nghttp2 has queued, written (Http2UpstreamSession::writeNow).
void drain(nghttp2_session* session) {
  for (int i = 0; i < 256; ++i) {
    const std::uint8_t* out = nullptr;
    if (nghttp2_session_mem_send(session, &out) <= 0) {
      return;
    }
  }
}

void submit(Session& session, Stream& s, std::string_view method, std::string_view path,
            std::string_view body, bool body_ended) {
  std::vector<std::pair<std::string_view, std::string_view>> fields = {
      {":method", method}, {":scheme", "https"}, {":authority", "origin.test"}, {":path", path}};
  fields.emplace_back("user-agent", "fuzz");
  if (method == "POST") {
    fields.emplace_back("content-length", "20");
    fields.emplace_back("te", "trailers");
  }
  std::vector<nghttp2_nv> nva;
  for (const auto& [name, value] : fields) {
    nva.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                   reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                   value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  s.head_request = method == "HEAD";
  s.response.setMaxListBytes(kMaxHeaderBytes);
  s.response.reset(s.head_request);
  s.out.assign(body);
  s.request_ended = body_ended;
  const bool with_body = !(body.empty() && body_ended);
  s.request_sent = !with_body;
  nghttp2_data_provider provider{};
  provider.source.ptr = &s;
  provider.read_callback = readBody;
  s.id = nghttp2_submit_request(session.session, nullptr, nva.data(), nva.size(),
                                with_body ? &provider : nullptr, nullptr);
  if (s.id > 0) {
    s.attached = true;
    session.open[s.id] = &s;
  }
}

// Http2UpstreamSession::acceptsStreams.
bool acceptsStreams(const Session& session) {
  if (session.going_away || nghttp2_session_check_request_allowed(session.session) == 0) {
    return false;
  }
  const std::uint32_t allowed =
      std::min(sluice::proxy::session::Http2UpstreamSession::kMaxStreams,
               nghttp2_session_get_remote_settings(session.session,
                                                   NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS));
  return session.open.size() < allowed;
}

// The origin's bytes; false when nghttp2 found a connection error (the session ends: what it
// queued, GOAWAY among it, is written first).
bool receive(Session& session, const std::uint8_t* data, std::size_t size) {
  const ssize_t n = nghttp2_session_mem_recv(session.session, data, size);
  drain(session.session);
  return n >= 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sluice::proxy::http::Http2Callbacks callbacks;
  callbacks.on_header = onHeader;
  callbacks.on_frame_recv = onFrameRecv;
  callbacks.on_data_chunk_recv = onDataChunk;
  callbacks.on_stream_close = onStreamClose;
  Session session;
  const sluice::proxy::http::Http2Session owned =
      sluice::proxy::session::Http2UpstreamSession::newClientSession(callbacks, &session,
                                                                     kMaxHeaderBytes);
  session.session = owned.get();
  check(session.session != nullptr);

  submit(session, session.streams[0], "GET", "/a", "", true);
  submit(session, session.streams[1], "HEAD", "/b", "", true);
  submit(session, session.streams[2], "POST", "/c", "0123456789", false);
  session.streams[2].reading = false;  // its client is backed up until the second read
  check(session.streams[0].id == 1 && session.streams[1].id == 3 && session.streams[2].id == 5);
  drain(session.session);  // the preface, SETTINGS, the heads, what the POST has so far

  const std::size_t cut = size == 0 ? 0 : data[size - 1] % (size + 1);
  if (receive(session, data, cut)) {
    // The POST's client sends the rest and ends (sendBody, sendEnd), and reads again
    // (setReading): what waited is given back.
    Stream& post = session.streams[2];
    if (post.attached) {
      post.out.append("abcdefghij");
      post.request_ended = true;
      nghttp2_session_resume_data(session.session, post.id);
    }
    post.reading = true;
    if (post.attached && post.unconsumed > 0) {
      nghttp2_session_consume_stream(session.session, post.id, post.unconsumed);
      post.unconsumed = 0;
    }
    // Another exchange takes a stream on the session, if it takes one.
    if (acceptsStreams(session)) {
      submit(session, session.streams[3], "GET", "/d", "", true);
    }
    drain(session.session);
    if (cut < size) {
      receive(session, data + cut, size - cut);
    }
  }
  return 0;
}
