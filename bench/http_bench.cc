// Micro-benchmarks of request head handling: what a sandbox's head costs sluice between its last
// byte and the head sluice writes upstream (parse, checks, re-serialisation).
//   build/bench/http_bench --benchmark_min_time=0.5
//
// The hostile shapes are heads of 62 KiB, just under the default max_header_bytes, with as many
// fields as the parser takes (kDefaultMaxFields): a sandbox chooses both, so their cost must grow
// with the head's size and no faster.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "proxy/http/head_writer.h"
#include "proxy/http/request_parser.h"

namespace {

using namespace sluice::proxy::http;

constexpr std::size_t kHeadBytes = 62 * 1024;

struct NoBody : RequestBodySink {
  void onRequestBody(std::span<const char>) override {}
};

// "GET / HTTP/1.1", Host, then `connection_fields` Connection fields whose comma-separated
// tokens (none naming a field present) share the bytes left, and plain fields up to the field
// limit.
std::string connectionHeavyHead(std::size_t connection_fields) {
  std::string head = "GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n";
  const std::size_t plain_fields = kDefaultMaxFields - 1 - connection_fields;
  std::string plain;
  for (std::size_t i = 0; i < plain_fields; ++i) {
    plain += "X-Plain-" + std::to_string(i) + ": v\r\n";
  }
  const std::size_t budget = kHeadBytes - head.size() - plain.size() - 2;
  const std::size_t per_field = connection_fields == 0 ? 0 : budget / connection_fields;
  for (std::size_t c = 0; c < connection_fields; ++c) {
    std::string field = "Connection: ";
    for (std::size_t t = 0; field.size() + 16 < per_field; ++t) {
      field += "tok" + std::to_string(c) + "-" + std::to_string(t) + ", ";
    }
    field += "close\r\n";
    head += field;
  }
  head += plain;
  head += "\r\n";
  return head;
}

void parseAndWrite(benchmark::State& state, const std::string& text) {
  RequestParser parser(64 * 1024, kDefaultMaxFields);
  NoBody sink;
  std::string out;
  for (auto _ : state) {
    parser.reset();
    const ParseEvent e = parser.feed(std::string_view(text), sink);
    if (e.kind != EventKind::HeadComplete) {
      state.SkipWithError("the head did not parse");
      return;
    }
    out.clear();
    writeRequestHead(out, parser.head(), parser.head().origin_target, "pypi.org", {});
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.SetLabel(std::to_string(text.size()) + " B head, " +
                 std::to_string(parser.head().headers.size()) + " fields");
}

// Many Connection fields (the argument) among plain ones, 62 KiB in all.
void BM_ConnectionHeavyHead(benchmark::State& state) {
  parseAndWrite(state, connectionHeavyHead(static_cast<std::size_t>(state.range(0))));
}
BENCHMARK(BM_ConnectionHeavyHead)
    ->Arg(1)
    ->Arg(5)
    ->Arg(64)
    ->Arg(128)
    ->Arg(250)
    ->Unit(benchmark::kMicrosecond);

// The same 62 KiB as one long Cookie among plain fields: the baseline a linear head costs.
void BM_LongCookieHead(benchmark::State& state) {
  std::string head = "GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n";
  std::string plain;
  for (std::size_t i = 0; i + 2 < kDefaultMaxFields; ++i) {
    plain += "X-Plain-" + std::to_string(i) + ": v\r\n";
  }
  head += "Cookie: ";
  head.append(kHeadBytes - head.size() - plain.size() - 4, 'c');
  head += "\r\n" + plain + "\r\n";
  parseAndWrite(state, head);
}
BENCHMARK(BM_LongCookieHead)->Unit(benchmark::kMicrosecond);

// An ordinary request head, for scale.
void BM_TypicalHead(benchmark::State& state) {
  parseAndWrite(state,
                "GET /simple/requests/ HTTP/1.1\r\nHost: pypi.org\r\n"
                "User-Agent: pip/24.0 {\"installer\":{\"name\":\"pip\"}}\r\n"
                "Accept: application/vnd.pypi.simple.v1+json, text/html;q=0.01\r\n"
                "Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
                "Cache-Control: max-age=0\r\n\r\n");
}
BENCHMARK(BM_TypicalHead);

}  // namespace

BENCHMARK_MAIN();
