// libFuzzer target for chunked bodies (RFC 9112 §7.1) as both parsers de-chunk them: the input
// is the body of a request (after "POST / HTTP/1.1 ... Transfer-Encoding: chunked") and of a
// response (after "HTTP/1.1 200 OK ... Transfer-Encoding: chunked"), checked against a
// reference decoder written here from the grammar.
// Parser files: proxy/http/message_core.cc proxy/http/request_parser.cc
//   proxy/http/response_parser.cc
//
// Each parser gets head + input three ways: whole, in two reads cut at a point chosen from the
// first input byte, byte by byte; each run stops at the first MessageComplete or Error.
// Invariants, each a trap on violation:
//   - the verdict (complete, refused, or still reading), the de-chunked body and the bytes
//     consumed are the same however the bytes were cut, and the same for request and response;
//   - sound: a body the parsers complete is one the reference accepts (CRLF line ends, 1*HEXDIG
//     sizes that fit 64 bits, an extension only after ';', no control characters, trailer lines
//     that are not obs-fold), with the same de-chunked bytes, ending at the same byte;
//   - complete: a body the reference accepts without extensions or trailers is completed by
//     the parsers (no false refusal of plain chunking);
//   - a refused body is refused after the head was accepted, never before.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "proxy/http/request_parser.h"
#include "proxy/http/response_parser.h"

namespace {

namespace sh = sluice::proxy::http;

constexpr std::string_view kRequestHead =
    "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n";
constexpr std::string_view kResponseHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

// --- Reference decoder -------------------------------------------------------------------------

struct Reference {
  enum class Verdict { Complete, Refused, NeedMore } verdict = Verdict::NeedMore;
  std::string body;
  std::size_t end = 0;  // with Complete: bytes of the input the chunked body spans
  bool plain = true;    // no extension and no trailer field was seen
};

bool isHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool isCtl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

// One line ending in CRLF starting at `at`; nullopt if it does not end in the input yet, and
// sets `bad` when the line has a bare CR, a bare LF or a control character.
std::optional<std::string_view> line(std::string_view in, std::size_t at, bool& bad) {
  for (std::size_t i = at; i < in.size(); ++i) {
    if (in[i] == '\n') {
      bad = true;  // an LF not after CR (a CRLF is caught below)
      return std::nullopt;
    }
    if (in[i] == '\r') {
      if (i + 1 == in.size()) {
        return std::nullopt;
      }
      if (in[i + 1] != '\n') {
        bad = true;
        return std::nullopt;
      }
      return in.substr(at, i - at);
    }
    if (isCtl(in[i])) {
      bad = true;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Reference decode(std::string_view in) {
  Reference r;
  std::size_t at = 0;
  auto refuse = [&r] {
    r.verdict = Reference::Verdict::Refused;
    return r;
  };
  while (true) {
    bool bad = false;
    const std::optional<std::string_view> size_line = line(in, at, bad);
    if (bad) {
      return refuse();
    }
    if (!size_line) {
      return r;
    }
    std::size_t digits = 0;
    std::uint64_t size = 0;
    while (digits < size_line->size() && isHex((*size_line)[digits])) {
      const char c = (*size_line)[digits];
      const unsigned v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      if (size > (UINT64_MAX >> 4)) {
        return refuse();
      }
      size = size << 4 | v;
      ++digits;
    }
    if (digits == 0) {
      return refuse();
    }
    if (digits < size_line->size()) {
      if ((*size_line)[digits] != ';') {
        return refuse();
      }
      r.plain = false;
    }
    at += size_line->size() + 2;
    if (size == 0) {
      break;
    }
    if (in.size() - at < size) {
      r.body.append(in.substr(at));  // a parser delivers chunk data as it arrives
      return r;
    }
    r.body.append(in.substr(at, size));
    at += size;
    if (in.size() - at < 2) {
      return r;
    }
    if (in.substr(at, 2) != "\r\n") {
      return refuse();
    }
    at += 2;
  }
  // Trailer section: field lines until an empty one.
  while (true) {
    bool bad = false;
    const std::optional<std::string_view> field = line(in, at, bad);
    if (bad) {
      return refuse();
    }
    if (!field) {
      return r;
    }
    at += field->size() + 2;
    if (field->empty()) {
      break;
    }
    r.plain = false;
    const char first = field->front();
    if (first == ' ' || first == '\t' || field->find(':') == std::string_view::npos) {
      return refuse();
    }
  }
  r.verdict = Reference::Verdict::Complete;
  r.end = at;
  return r;
}

// --- The parsers -------------------------------------------------------------------------------

struct Run {
  char verdict = 'n';  // 'c' complete, 'e' refused, 'n' still reading
  bool head_seen = false;
  std::string body;
  std::size_t consumed = 0;  // bytes of the input (the body) used up to the verdict
  bool operator==(const Run&) const = default;
};

struct Sink : sh::RequestBodySink, sh::ResponseBodySink {
  std::string body;
  void onRequestBody(std::span<const char> d) override { body.append(d.data(), d.size()); }
  void onResponseBody(std::span<const char> d) override { body.append(d.data(), d.size()); }
};

template <class Parser>
Run feed(const std::vector<std::string_view>& reads) {
  Parser parser(sh::kDefaultMaxHeadBytes);
  if constexpr (std::is_same_v<Parser, sh::ResponseParser>) {
    parser.expect("GET");
  }
  Sink sink;
  Run run;
  for (std::string_view read : reads) {
    std::string_view rest = read;
    while (true) {
      const sh::ParseEvent e = parser.feed(rest, sink);
      check(e.consumed <= rest.size());
      run.consumed += e.consumed;
      rest.remove_prefix(e.consumed);
      if (e.kind == sh::EventKind::NeedMore) {
        check(rest.empty());
        break;
      }
      if (e.kind == sh::EventKind::HeadComplete) {
        check(!run.head_seen);
        run.head_seen = true;
        continue;
      }
      run.body = sink.body;
      if (e.kind == sh::EventKind::MessageComplete) {
        run.verdict = 'c';
        return run;
      }
      check(e.kind == sh::EventKind::Error);
      run.verdict = 'e';
      run.consumed = 0;  // where an error is noticed is not part of the verdict
      return run;
    }
  }
  run.body = sink.body;
  return run;
}

template <class Parser>
Run feedEveryWay(std::string_view head, std::string_view body, std::uint8_t chooser) {
  const std::string all = std::string(head) + std::string(body);
  const std::string_view input(all);
  const Run whole = feed<Parser>({input});
  const std::size_t cut = chooser * input.size() / 256;
  check(feed<Parser>({input.substr(0, cut), input.substr(cut)}) == whole);
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < input.size(); ++i) {
    bytes.push_back(input.substr(i, 1));
  }
  check(feed<Parser>(bytes) == whole);
  check(whole.head_seen);
  Run run = whole;
  if (run.verdict != 'e') {
    check(run.consumed >= head.size());
    run.consumed -= head.size();
  }
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Run request = feedEveryWay<sh::RequestParser>(kRequestHead, body, data[0]);
  const Run response = feedEveryWay<sh::ResponseParser>(kResponseHead, body, data[0]);
  check(request == response);

  const Reference ref = decode(body);
  if (request.verdict == 'c') {
    check(ref.verdict == Reference::Verdict::Complete);
    check(ref.body == request.body);
    check(ref.end == request.consumed);
  }
  if (ref.verdict == Reference::Verdict::Complete && ref.plain) {
    check(request.verdict == 'c');
  }
  if (request.verdict == 'n' && ref.verdict == Reference::Verdict::NeedMore) {
    check(request.body == ref.body);  // every data byte read so far, and only those
  }
  return 0;
}
