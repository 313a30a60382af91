// libFuzzer target for what a sandbox's HTTP/2 frames meet: nghttp2's server session configured
// as sluice runs it (Http2ServerCodec::newServerSession: its options, SETTINGS, windows, flood
// limits) and Http2RequestBuilder on every request head, answered the way Http2Stream answers
// (a response whose DATA is pulled from a buffer, request windows given back as consumed).
// Parser files: proxy/session/http2/http2_server_codec.cc proxy/http/http2_request.cc
// The input follows the client connection preface, in two reads cut at a point chosen from its
// first byte. Invariants, each a trap on violation:
//   - a head the builder accepts has a method, a path starting with '/' or '*', a host, and
//     only fields whose names are lower-case tokens and whose values are clean
//     (http2FieldProblem is null for each);
//   - a head it refuses or finds malformed says why;
//   - nghttp2 errors end the session, never crash it; nothing leaks or reads out of bounds.

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "proxy/http/http2_request.h"
#include "proxy/session/http2/http2_server_codec.h"

namespace {

namespace sh = sluice::proxy::http;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

struct Stream {
  sh::Http2RequestBuilder request;
  std::string body = std::string(300, 'b');
  std::size_t sent = 0;
};

struct Session {
  std::map<std::int32_t, Stream> streams;
  nghttp2_session* session = nullptr;
};

ssize_t readBody(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                 std::uint32_t* flags, nghttp2_data_source* source, void*) {
  auto* s = static_cast<Stream*>(source->ptr);
  const std::size_t n = std::min(length, s->body.size() - s->sent);
  std::memcpy(buf, s->body.data() + s->sent, n);
  s->sent += n;
  if (s->sent == s->body.size()) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return static_cast<ssize_t>(n);
}

void checkHead(const sh::Http2RequestBuilder& b, sh::Http2RequestBuilder::Outcome outcome) {
  using Outcome = sh::Http2RequestBuilder::Outcome;
  if (outcome == Outcome::Malformed) {
    check(!b.malformation().empty());
    return;
  }
  if (outcome == Outcome::Refused) {
    check(!b.refusal().detail.empty());
    return;
  }
  const sh::RequestHead& h = b.head();
  check(!h.method.empty() && !h.target.empty() && h.host_count == 1 && !h.host.empty());
  check(h.target.front() == '/' || h.target.front() == '*');
  for (std::size_t i = 0; i < h.headers.size(); ++i) {
    check(sh::http2FieldProblem(h.headers.name(i), h.headers.value(i)) == nullptr);
  }
}

int onBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* s = static_cast<Session*>(user);
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s->streams[frame->hd.stream_id].request.reset();
  }
  return 0;
}

int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
             std::size_t name_length, const std::uint8_t* value, std::size_t value_length,
             std::uint8_t, void* user) {
  auto* s = static_cast<Session*>(user);
  auto it = s->streams.find(frame->hd.stream_id);
  if (it != s->streams.end() && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    it->second.request.add(std::string_view(reinterpret_cast<const char*>(name), name_length),
                           std::string_view(reinterpret_cast<const char*>(value), value_length));
  }
  return 0;
}

int onFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  auto* s = static_cast<Session*>(user);
  auto it = s->streams.find(frame->hd.stream_id);
  if (it == s->streams.end() || frame->hd.type != NGHTTP2_HEADERS ||
      frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
    return 0;
  }
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  const auto outcome = it->second.request.finish(end_stream);
  checkHead(it->second.request, outcome);
  if (outcome == sh::Http2RequestBuilder::Outcome::Malformed) {
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                              NGHTTP2_PROTOCOL_ERROR);
    return 0;
  }
  static const char kStatus[] = ":status";
  static const char k200[] = "200";
  nghttp2_nv nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(kStatus)),
                reinterpret_cast<std::uint8_t*>(const_cast<char*>(k200)), 7, 3,
                NGHTTP2_NV_FLAG_NONE};
  nghttp2_data_provider provider{};
  provider.source.ptr = &it->second;
  provider.read_callback = readBody;
  nghttp2_submit_response(session, frame->hd.stream_id, &nv, 1, &provider);
  return 0;
}

int onDataChunk(nghttp2_session* session, std::uint8_t, std::int32_t stream_id, const std::uint8_t*,
                std::size_t length, void*) {
  nghttp2_session_consume(session, stream_id, length);  // as an upstream that takes it all
  return 0;
}

int onStreamClose(nghttp2_session*, std::int32_t stream_id, std::uint32_t, void* user) {
  static_cast<Session*>(user)->streams.erase(stream_id);
  return 0;
}

void drain(nghttp2_session* session) {
  for (int i = 0; i < 64; ++i) {
    const std::uint8_t* out = nullptr;
    if (nghttp2_session_mem_send(session, &out) <= 0) {
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sluice::proxy::http::Http2Callbacks callbacks;
  callbacks.on_begin_headers = onBeginHeaders;
  callbacks.on_header = onHeader;
  callbacks.on_frame_recv = onFrameRecv;
  callbacks.on_data_chunk_recv = onDataChunk;
  callbacks.on_stream_close = onStreamClose;
  Session s;
  const sluice::proxy::http::Http2Session owned =
      sluice::proxy::session::Http2ServerCodec::newServerSession(callbacks, &s, 8 * 1024);
  s.session = owned.get();
  check(s.session != nullptr);

  std::string input(NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
  input.append(reinterpret_cast<const char*>(data), size);
  const std::size_t cut =
      size == 0 ? input.size() : NGHTTP2_CLIENT_MAGIC_LEN + data[0] % (size + 1);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(input.data());
  const ssize_t first = nghttp2_session_mem_recv(s.session, bytes, cut);
  drain(s.session);
  if (first >= 0 && cut < input.size()) {
    nghttp2_session_mem_recv(s.session, bytes + cut, input.size() - cut);
    drain(s.session);
  }
  return 0;
}
