// libFuzzer target for ResponseParser (llhttp 8.1 strict plus sluice's checks): what an origin
// answers on one upstream connection, heads and bodies of every framing (Content-Length,
// chunked, until close, none), interim 1xx heads, several responses in a row.
// Parser files: proxy/http/response_parser.cc proxy/http/message_core.cc
//   proxy/http/field_rules.cc proxy/http/header_block.cc
//
// The first input byte is a control byte: bit i (i < 6) set makes the i-th response answer a
// HEAD request; bit 6 makes every other request a GET that asked for a WebSocket (a 101 to it
// ends the HTTP: the rest of the bytes are the caller's); bit 7 chooses where the second split
// falls. The rest is the upstream's bytes,
// fed four ways, like a session receiving the same bytes in different reads: (a) whole, (b) in
// two reads cut at a point chosen from the second byte, (c) in three reads cut at points chosen
// from the last two bytes, (d) byte by byte; then the upstream closes (finish()).
// Invariants, each a trap on violation:
//   - the four runs give the same events (NeedMore aside), the same error kind, the same heads
//     (status, reason, version, framing, Content-Length, keep-alive, fields), the same body
//     bytes per message, the same verdict at the close: the verdict never depends on the cut;
//   - consumed never exceeds what was given; NeedMore consumes everything;
//   - no head arrives after more than 8 KiB of head bytes in one read; an accepted head has a
//     status 100-599, HTTP/1.0 or 1.1, fields that are tokens and field values; a 101 only to a
//     request that asked for a WebSocket, Switched, never kept alive, and then the bytes after
//     its head are exactly the rest of the input, however it was cut;
//   - framing: an answer to HEAD, a 1xx, 204 or 304 has no body (MessageComplete follows the
//     head with no body byte); a Content-Length body has exactly that length; a body read
//     until the close is never keep-alive; only UntilClose completes at finish();
//   - nothing crashes, leaks or reads out of bounds (ASan, UBSan).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/http/response_parser.h"

namespace {

namespace sh = sluice::proxy::http;

constexpr std::size_t kMaxHead = 8 * 1024;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

struct Sink : sh::ResponseBodySink {
  std::string body;
  void onResponseBody(std::span<const char> data) override {
    body.append(data.data(), data.size());
  }
};

struct Run {
  std::string events;  // I H M E, then at the close: m (MessageComplete), e (Error), s (switched)
  std::string after_switch;  // the bytes after a 101's head
  sh::ParseError error = sh::ParseError::None;
  std::vector<std::string> heads;
  std::vector<std::string> bodies;
};

std::string describe(const sh::ResponseHead& h) {
  std::string s = std::to_string(h.status);
  s.append("|").append(h.reason).append("|").append(std::to_string(h.http_minor)).append("|");
  s.append(std::to_string(static_cast<int>(h.framing))).append("|");
  s.append(h.has_content_length ? std::to_string(h.content_length) : "-").append("|");
  s.append(h.keep_alive ? "ka" : "close");
  for (std::size_t i = 0; i < h.headers.size(); ++i) {
    s.append("|").append(h.headers.name(i)).append(":").append(h.headers.value(i));
  }
  return s;
}

void checkHead(const sh::ResponseHead& h, bool websocket_asked) {
  check(h.status >= 100 && h.status <= 599);
  check((h.status == 101) == (h.framing == sh::ResponseFraming::Switched));
  check(h.status != 101 || (websocket_asked && !h.keep_alive));
  check(h.http_major == 1 && (h.http_minor == 0 || h.http_minor == 1));
  for (std::size_t i = 0; i < h.headers.size(); ++i) {
    check(sh::ascii::isToken(h.headers.name(i)));
    check(sh::ascii::isFieldValue(h.headers.value(i)));
  }
  check(h.framing != sh::ResponseFraming::UntilClose || !h.keep_alive);
}

class Feeder {
 public:
  explicit Feeder(std::uint8_t head_mask) : parser_(kMaxHead), head_mask_(head_mask) {
    expectNext();
  }

  // Feeds one read; false once the parser refused the stream.
  bool feed(std::string_view read, bool whole) {
    if (switched_) {
      run_.after_switch.append(read);  // no HTTP any more
      return true;
    }
    std::string_view rest = read;
    while (true) {
      const sh::ParseEvent e = parser_.feed(rest, sink_);
      check(e.consumed <= rest.size());
      rest.remove_prefix(e.consumed);
      switch (e.kind) {
        case sh::EventKind::NeedMore:
          check(rest.empty());
          return true;
        case sh::EventKind::InterimHead:
          run_.events += 'I';
          onHead(e, whole);
          check(parser_.head().status / 100 == 1);
          continue;
        case sh::EventKind::HeadComplete:
          run_.events += 'H';
          onHead(e, whole);
          sink_.body.clear();
          if (parser_.head().framing == sh::ResponseFraming::Switched) {
            switched_ = true;
            run_.after_switch.append(rest);
            return true;
          }
          continue;
        case sh::EventKind::MessageComplete:
          run_.events += 'M';
          onMessage();
          continue;
        case sh::EventKind::Error:
          run_.events += 'E';
          run_.error = e.error;
          check(e.error != sh::ParseError::None && !e.detail.empty());
          return false;
        case sh::EventKind::ConnectHead:
          check(false);  // responses never have CONNECT heads
          return false;
      }
    }
  }

  Run close() {
    if (switched_) {
      run_.events += 's';
      return run_;
    }
    const sh::ParseEvent e = parser_.finish();
    if (e.kind == sh::EventKind::MessageComplete) {
      run_.events += 'm';
      onMessage();
    } else {
      check(e.kind == sh::EventKind::Error);
      run_.events += 'e';
    }
    return run_;
  }

  Run refused() const { return run_; }

 private:
  bool headRequest() const { return responses_ < 6 && ((head_mask_ >> responses_) & 1) != 0; }
  bool websocketAsked() const { return !headRequest() && (head_mask_ & 0x40) != 0; }

  void expectNext() {
    parser_.expect(headRequest() ? "HEAD" : "GET",
                   websocketAsked() ? sh::Upgrade::WebSocket : sh::Upgrade::None);
  }

  void onHead(const sh::ParseEvent& e, bool whole) {
    // Read whole, every head starts a feed(): its head is what it consumed.
    check(!whole || e.consumed <= kMaxHead);
    const sh::ResponseHead& h = parser_.head();
    checkHead(h, websocketAsked());
    run_.heads.push_back(describe(h));
    if (h.status == 101) {
      return;
    }
    if (h.status / 100 == 1 || h.status == 204 || h.status == 304 || headRequest()) {
      check(h.framing == sh::ResponseFraming::None);
    }
    framing_ = h.framing;
    content_length_ = h.content_length;
  }

  void onMessage() {
    check(framing_ != sh::ResponseFraming::None || sink_.body.empty());
    check(framing_ != sh::ResponseFraming::ContentLength || sink_.body.size() == content_length_);
    run_.bodies.push_back(sink_.body);
    sink_.body.clear();
    ++responses_;
    expectNext();
  }

  sh::ResponseParser parser_;
  Sink sink_;
  Run run_;
  std::uint8_t head_mask_;
  std::size_t responses_ = 0;
  bool switched_ = false;
  sh::ResponseFraming framing_ = sh::ResponseFraming::None;
  std::uint64_t content_length_ = 0;
};

Run feedAll(std::uint8_t head_mask, const std::vector<std::string_view>& reads) {
  Feeder feeder(head_mask);
  for (std::string_view read : reads) {
    if (!feeder.feed(read, reads.size() == 1)) {
      return feeder.refused();
    }
  }
  return feeder.close();
}

bool same(const Run& a, const Run& b) {
  return a.events == b.events && a.error == b.error && a.heads == b.heads && a.bodies == b.bodies &&
         a.after_switch == b.after_switch;
}

std::size_t cutAt(std::uint8_t chooser, std::size_t size) { return chooser * size / 256; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) {
    return 0;
  }
  const std::uint8_t control = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t n = input.size();

  const Run whole = feedAll(control, {input});

  const std::size_t cut = cutAt(data[1], n);
  const Run two = feedAll(control, {input.substr(0, cut), input.substr(cut)});

  std::size_t first = cutAt(data[size - 1], n);
  std::size_t second = cutAt(static_cast<std::uint8_t>(data[size - 2] ^ (control & 0x80)), n);
  if (first > second) {
    std::swap(first, second);
  }
  const Run three = feedAll(
      control, {input.substr(0, first), input.substr(first, second - first), input.substr(second)});

  std::vector<std::string_view> bytes;
  bytes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    bytes.push_back(input.substr(i, 1));
  }
  const Run single = feedAll(control, bytes);

  if (whole.events.ends_with('s')) {
    check(input.ends_with(whole.after_switch));  // the rest of the input, nothing of the head
  }
  check(same(whole, two));
  check(same(whole, three));
  check(same(whole, single));
  return 0;
}
