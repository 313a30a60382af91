// libFuzzer target for RequestParser (llhttp 8.1 strict plus sluice's checks).
// Parser files: proxy/http/request_parser.cc proxy/http/message_core.cc
//   proxy/http/field_rules.cc proxy/http/header_block.cc
// The input is fed four ways, like a session receiving the same bytes in different reads:
//   (a) whole, (b) split at one point chosen from the first input byte, (c) in three reads cut
// at points chosen from the last two bytes, (d) byte by byte, with max_head_bytes 8 KiB. After
// each event the rest of the read is fed again, as a session does. Invariants, each a trap on
// violation:
//   - the four runs give the same events (NeedMore aside), the same error kind, the same heads
//     (method, target, host, framing, content length, keep-alive, origin target), the same body
//     bytes per message, and the same tunnel bytes after a ConnectHead;
//   - consumed never exceeds what was given; NeedMore consumes everything;
//   - no head arrives after more than 8 KiB of head bytes; an accepted head's fields are tokens
//     and field values; the body of a Content-Length message has exactly that length;
//   - nothing crashes, leaks or reads out of bounds (ASan, UBSan).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proxy/http/request_parser.h"

namespace {

namespace sh = sluice::proxy::http;

constexpr std::size_t kMaxHead = 8 * 1024;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

struct Sink : sh::RequestBodySink {
  std::string body;
  void onRequestBody(std::span<const char> data) override { body.append(data.data(), data.size()); }
};

struct Run {
  std::string events;  // H M C E
  sh::ParseError error = sh::ParseError::None;
  std::vector<std::string> heads;   // the fields that matter to forwarding, flattened
  std::vector<std::string> bodies;  // per completed message
  std::string tunnel;
};

std::string describe(const sh::RequestHead& h) {
  std::string s;
  s.append(h.method).append("|").append(h.target).append("|").append(h.host).append("|");
  s.append(std::to_string(h.host_count)).append("|");
  s.append(std::to_string(static_cast<int>(h.framing))).append("|");
  s.append(std::to_string(h.content_length)).append("|");
  s.append(h.keep_alive ? "ka" : "close").append("|").append(h.origin_target).append("|");
  s.append(h.upgrade_requested ? "up" : "").append(h.is_connect ? "connect" : "");
  return s;
}

void checkHead(const sh::RequestHead& h) {
  for (std::size_t i = 0; i < h.headers.size(); ++i) {
    check(sh::ascii::isToken(h.headers.name(i)));
    check(sh::ascii::isFieldValue(h.headers.value(i)));
  }
  check(h.http_major == 1 && (h.http_minor == 0 || h.http_minor == 1));
  check(h.is_connect || !h.origin_target.empty());
}

// Feeds `reads` in order; stops at ConnectHead or Error.
Run feed(const std::vector<std::string_view>& reads) {
  sh::RequestParser parser(kMaxHead);
  Sink sink;
  Run run;
  std::uint64_t expected_body = 0;
  bool has_length = false;
  for (std::size_t r = 0; r < reads.size(); ++r) {
    std::string_view rest = reads[r];
    while (true) {
      const sh::ParseEvent e = parser.feed(rest, sink);
      check(e.consumed <= rest.size());
      rest.remove_prefix(e.consumed);
      switch (e.kind) {
        case sh::EventKind::NeedMore:
          check(rest.empty());
          break;
        case sh::EventKind::HeadComplete:
          run.events += 'H';
          // Read whole, every message starts a feed(): its head is what it consumed.
          check(reads.size() != 1 || e.consumed <= kMaxHead);
          checkHead(parser.head());
          run.heads.push_back(describe(parser.head()));
          has_length = parser.head().framing == sh::BodyFraming::ContentLength;
          expected_body = parser.head().content_length;
          sink.body.clear();
          continue;
        case sh::EventKind::MessageComplete:
          run.events += 'M';
          check(!has_length || sink.body.size() == expected_body);
          run.bodies.push_back(sink.body);
          continue;
        case sh::EventKind::ConnectHead:
          run.events += 'C';
          check(reads.size() != 1 || e.consumed <= kMaxHead);
          checkHead(parser.head());
          run.heads.push_back(describe(parser.head()));
          run.tunnel.assign(rest);
          for (std::size_t later = r + 1; later < reads.size(); ++later) {
            run.tunnel.append(reads[later]);
          }
          return run;
        case sh::EventKind::Error:
          run.events += 'E';
          run.error = e.error;
          check(e.error != sh::ParseError::None && !e.detail.empty());
          return run;
        case sh::EventKind::InterimHead:
          check(false);  // requests never have interim heads
          return run;
      }
      break;
    }
  }
  return run;
}

bool same(const Run& a, const Run& b) {
  return a.events == b.events && a.error == b.error && a.heads == b.heads && a.bodies == b.bodies &&
         a.tunnel == b.tunnel;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const Run whole = feed({input});

  const std::size_t split = size == 0 ? 0 : static_cast<std::size_t>(data[0]) * size / 256;
  const Run two = feed({input.substr(0, split), input.substr(split)});

  // Two more cuts, from the last two bytes: a verdict that depends on where a fault falls
  // relative to a read boundary (a fault scanned in one read, a limit passed in another) shows.
  std::size_t first = size < 2 ? 0 : static_cast<std::size_t>(data[size - 1]) * size / 256;
  std::size_t second = size < 2 ? 0 : static_cast<std::size_t>(data[size - 2]) * size / 256;
  if (first > second) {
    std::swap(first, second);
  }
  const Run three =
      feed({input.substr(0, first), input.substr(first, second - first), input.substr(second)});

  std::vector<std::string_view> bytes;
  bytes.reserve(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes.push_back(input.substr(i, 1));
  }
  const Run single = feed(bytes);

  check(same(whole, two));
  check(same(whole, three));
  check(same(whole, single));
  return 0;
}
