// sluice-loadgen: measures a TLS-intercepting proxy, or a TLS origin directly, with four
// workloads (keepalive, newconn, bulk, idle), over HTTP/1.1 or HTTP/2 (--proto h2, nghttp2:
// --streams concurrent streams per connection). See options.h for the command line and report.h
// for the JSON it prints.
//
// The generator shares its cores with what it measures, so every request must be cheap: one
// libuv loop per thread, TLS on memory buffers (proxy/tls/TlsSession), the response parser of
// proxy/http, request bytes built once, body bytes counted and never copied or hashed.

#include <sys/resource.h>
#include <uv.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/loadgen/load_thread.h"
#include "bench/loadgen/options.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/target.h"
#include "proxy/tls/tls_context.h"

namespace {

using namespace sluice::loadgen;

constexpr int kExitRan = 0;
constexpr int kExitNothingSucceeded = 1;
constexpr int kExitUsage = 2;

double cpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Idle mode holds thousands of sockets: use every descriptor the hard limit allows.
void raiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// Thread `index`'s part of `total` split as evenly as possible among `parts` threads.
std::uint64_t share(std::uint64_t total, int parts, int index) {
  const auto n = static_cast<std::uint64_t>(parts);
  return total / n + (static_cast<std::uint64_t>(index) < total % n ? 1 : 0);
}

void sleepUntil(std::uint64_t hrtime_ns) {
  std::uint64_t now = uv_hrtime();
  if (hrtime_ns > now) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(hrtime_ns - now));
  }
}

void printErrorSummary(const std::vector<std::unique_ptr<LoadThread>>& threads) {
  std::array<std::uint64_t, kErrorKinds> kinds{};
  std::uint64_t total = 0;
  std::uint64_t ignored = 0;
  std::string first;
  for (const auto& t : threads) {
    const ThreadStats& s = t->stats();
    for (std::size_t k = 0; k < kErrorKinds; ++k) {
      kinds[k] += s.errors_by_kind[k];
    }
    total += s.errors;
    ignored += s.ignored_errors;
    if (first.empty()) {
      first = s.first_error;
    }
  }
  if (total == 0 && ignored == 0) {
    return;
  }
  std::string line = "sluice-loadgen: " + std::to_string(total) + " errors";
  for (std::size_t k = 0; k < kErrorKinds; ++k) {
    if (kinds[k] != 0) {
      line +=
          std::string(" ") + toString(static_cast<ErrorKind>(k)) + "=" + std::to_string(kinds[k]);
    }
  }
  if (ignored != 0) {
    line += " (and " + std::to_string(ignored) + " during the warmup)";
  }
  if (!first.empty()) {
    line += "; first: " + first;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that resets mid-write is an error value, not a death
  bool help = false;
  bool version = false;
  auto parsed =
      parseOptions({argv + 1, static_cast<std::size_t>(argc > 0 ? argc - 1 : 0)}, &help, &version);
  if (help) {
    std::fputs(usage(), stdout);
    return kExitRan;
  }
  if (version) {
    std::printf("sluice-loadgen %s\n", SLUICE_LOADGEN_VERSION);
    return kExitRan;
  }
  if (!parsed) {
    std::fprintf(stderr, "sluice-loadgen: %s\n\n%s", parsed.error().c_str(), usage());
    return kExitUsage;
  }
  const Options options = std::move(parsed).value();
  auto context = sluice::proxy::tls::makeUpstreamContext(options.cacert);
  if (!context) {
    std::fprintf(stderr, "sluice-loadgen: --cacert: %s\n", context.error().c_str());
    return kExitUsage;
  }
  // sluice's contexts free OpenSSL's record buffers whenever a connection has nothing
  // buffered (an idle proxy connection costs little), which is a malloc and free of 16 KiB
  // per record read on a busy connection. The generator keeps them; idle mode frees them
  // itself once a connection is held (Connection::drainTls).
  SSL_CTX_clear_mode(context->get(), SSL_MODE_RELEASE_BUFFERS);
  if (options.proto == Proto::H2) {
    // h2 alone: a server (or proxy) that cannot speak it agrees to nothing, and every
    // connection fails with that said (Connection::startH2), instead of measuring HTTP/1.1.
    static constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
    if (SSL_CTX_set_alpn_protos(context->get(), kAlpnH2, sizeof kAlpnH2) != 0) {
      std::fprintf(stderr, "sluice-loadgen: cannot offer ALPN h2\n");
      return kExitUsage;
    }
  }
  raiseDescriptorLimit();
  const Target target = makeTarget(options, context->get());

  // Connections are split among threads; a thread never gets none (nor, for --requests,
  // a quota of none).
  const bool idle = options.mode == Mode::Idle;
  const int slots = idle ? options.connections : options.concurrency;
  std::uint64_t thread_cap = static_cast<std::uint64_t>(std::min(slots, options.concurrency));
  if (options.requests && !idle) {
    thread_cap = std::min(thread_cap, *options.requests);
  }
  const int thread_count = static_cast<int>(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(options.threads), thread_cap));

  HoldBarrier barrier(thread_count);
  const std::uint64_t start_ns = uv_hrtime();
  const auto warmup_ms = idle ? 0 : static_cast<std::uint64_t>(options.warmup * 1000.0);
  std::vector<std::unique_ptr<LoadThread>> threads;
  for (int i = 0; i < thread_count; ++i) {
    ThreadPlan plan;
    plan.connections = static_cast<int>(share(static_cast<std::uint64_t>(slots), thread_count, i));
    plan.concurrency =
        static_cast<int>(share(static_cast<std::uint64_t>(options.concurrency), thread_count, i));
    if (options.requests && !idle) {
      plan.quota = share(*options.requests, thread_count, i);
    }
    plan.start_ns = start_ns;
    plan.warmup_ms = warmup_ms;
    if (options.duration && !idle) {
      plan.duration_ms = static_cast<std::uint64_t>(*options.duration * 1000.0);
    }
    threads.push_back(std::make_unique<LoadThread>(target, plan, &barrier));
  }
  for (auto& t : threads) {
    t->start();
  }

  double cpu_begin = 0;
  double cpu_end = 0;
  if (idle) {
    cpu_begin = cpuSeconds();
    const std::uint64_t held = barrier.wait();
    cpu_end = cpuSeconds();
    std::printf("%s\n", holdingLine(held).c_str());
    std::fflush(stdout);
    sleepUntil(uv_hrtime() + static_cast<std::uint64_t>(options.hold * 1e9));
    for (auto& t : threads) {
      t->stop();
    }
    for (auto& t : threads) {
      t->join();
    }
  } else {
    sleepUntil(start_ns + warmup_ms * 1'000'000);
    cpu_begin = cpuSeconds();
    for (auto& t : threads) {
      t->join();
    }
    cpu_end = cpuSeconds();
  }

  Summary summary;
  summary.threads = thread_count;
  summary.cpu_seconds = cpu_end - cpu_begin;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  for (const auto& t : threads) {
    const ThreadStats& s = t->stats();
    summary.requests += s.requests;
    summary.errors += s.errors;
    summary.bytes += s.bytes;
    summary.held += s.held;
    summary.latency.merge(s.latency);
    if (s.begin_ns != 0 && s.end_ns != 0) {
      begin = begin == 0 ? s.begin_ns : std::min(begin, s.begin_ns);
      end = std::max(end, s.end_ns);
    }
  }
  summary.seconds = end > begin ? static_cast<double>(end - begin) / 1e9 : 0.0;
  printErrorSummary(threads);
  std::printf("%s\n", resultLine(options, summary).c_str());
  std::fflush(stdout);
  // A bulk run may end inside its first downloads: the body bytes it moved are its result.
  const bool succeeded = summary.requests > 0 || (options.mode == Mode::Bulk && summary.bytes > 0);
  return succeeded ? kExitRan : kExitNothingSucceeded;
}
