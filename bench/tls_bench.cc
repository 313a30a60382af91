// Micro-benchmarks of what a new sandbox connection costs sluice before any byte goes upstream:
// reading the ClientHello, matching the SNI against the rules, finding (or minting) the leaf,
// and the TLS handshake itself.
//   build/bench/tls_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "certs/ca.h"
#include "certs/leaf_cache.h"
#include "policy/host_name.h"
#include "policy/host_pattern.h"
#include "proxy/tls/client_hello.h"
#include "proxy/tls/tls_context.h"
#include "proxy/tls/tls_session.h"

namespace {

using namespace sluice;
using proxy::tls::HandshakeStatus;
using proxy::tls::TlsSession;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "tls_bench: %s\n", why.c_str());
  std::abort();
}

std::string describe(const std::string& error) { return error; }
std::string describe(policy::HostError error) { return std::string(policy::toString(error)); }

template <class T, class E>
T orDie(Result<T, E> result) {
  if (!result) {
    die(describe(result.error()));
  }
  return std::move(result).value();
}

// One sandbox CA (made in a temp dir that is removed at once: the objects stay in memory), its
// leaf cache, and the two TLS contexts, shared by every benchmark.
struct Fixture {
  certs::CertificateAuthority ca = createCa();
  certs::LeafCache leaves{ca};
  proxy::tls::SslCtxPtr server_ctx = proxy::tls::makeServerContext();
  proxy::tls::SslCtxPtr client_ctx;

  Fixture() {
    client_ctx = orDie(proxy::tls::makeUpstreamContext(ca.certificatePath()));
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(ca.certificatePath()).parent_path(), ignored);
    if (!server_ctx) {
      die("cannot build the server context");
    }
  }

  static certs::CertificateAuthority createCa() {
    char dir[] = "/tmp/sluice-tls-bench-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      die("mkdtemp failed");
    }
    return orDie(certs::CertificateAuthority::create(dir, "tls bench CA"));
  }
};

Fixture& fixture() {
  static Fixture* shared = new Fixture();  // lives until exit; OpenSSL objects need no order
  return *shared;
}

// The first flight of sluice's own TLS client (OpenSSL 3, TLS 1.3 + 1.2, ALPN http/1.1): a
// genuine ClientHello, as the sandbox's OpenSSL-based tools (curl, pip) send one.
std::vector<std::uint8_t> genuineHello(std::string_view host) {
  TlsSession client = orDie(TlsSession::client(fixture().client_ctx.get(), host));
  if (client.handshake() != HandshakeStatus::WantIo) {
    die("the client did not wait for the server");
  }
  std::span<const char> bytes = client.peekCiphertext();
  return {bytes.begin(), bytes.end()};
}

void BM_ParseClientHello(benchmark::State& state) {
  const std::vector<std::uint8_t> hello = genuineHello("files.pythonhosted.org");
  for (auto _ : state) {
    proxy::tls::HelloResult result = proxy::tls::parseClientHello(hello);
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * hello.size()));
  state.SetLabel(std::to_string(hello.size()) + " bytes");
}
BENCHMARK(BM_ParseClientHello);

// The hello arrived in two segments: the first parse stops at NeedMore (the session parses the
// whole buffer again when the rest comes).
void BM_ParseClientHelloFirstHalf(benchmark::State& state) {
  const std::vector<std::uint8_t> hello = genuineHello("files.pythonhosted.org");
  const std::span<const std::uint8_t> half(hello.data(), hello.size() / 2);
  for (auto _ : state) {
    proxy::tls::HelloResult result = proxy::tls::parseClientHello(half);
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(BM_ParseClientHelloFirstHalf);

// What the session does with the SNI the parser read: canonicalise it, match a rule's pattern.
void BM_SniCanonicalizeAndMatch(benchmark::State& state) {
  const std::vector<std::uint8_t> hello = genuineHello("files.pythonhosted.org");
  const proxy::tls::HelloResult parsed = proxy::tls::parseClientHello(hello);
  const policy::HostPattern exact = orDie(policy::HostPattern::parse("files.pythonhosted.org"));
  const policy::HostPattern wildcard = orDie(policy::HostPattern::parse("*.pythonhosted.org"));
  for (auto _ : state) {
    auto host = policy::canonicalizeHost(parsed.info.sni());
    bool matched = host && (exact.matches(*host) || wildcard.matches(*host));
    benchmark::DoNotOptimize(matched);
  }
}
BENCHMARK(BM_SniCanonicalizeAndMatch);

void BM_HostPatternMatch(benchmark::State& state) {
  const policy::HostPattern wildcard = orDie(policy::HostPattern::parse("*.pythonhosted.org"));
  const policy::CanonicalHost inside = orDie(policy::canonicalizeHost("files.pythonhosted.org"));
  const policy::CanonicalHost outside = orDie(policy::canonicalizeHost("evilpythonhosted.org"));
  for (auto _ : state) {
    benchmark::DoNotOptimize(wildcard.matches(inside));
    benchmark::DoNotOptimize(wildcard.matches(outside));
  }
}
BENCHMARK(BM_HostPatternMatch);

// A cache hit: the leaf of a host seen before (a lock, a hash lookup, an LRU splice).
void BM_LeafCacheHit(benchmark::State& state) {
  certs::LeafCache& leaves = fixture().leaves;
  (void)orDie(leaves.get("files.pythonhosted.org"));
  for (auto _ : state) {
    auto leaf = leaves.get("files.pythonhosted.org");
    benchmark::DoNotOptimize(leaf);
  }
}
BENCHMARK(BM_LeafCacheHit);

// A miss: one P-256 signature (the leaf key is shared, so no key generation). A cache of one
// leaf asked for two hosts in turn misses every time.
void BM_LeafMint(benchmark::State& state) {
  certs::LeafCache leaves(fixture().ca, 1);
  const std::string hosts[] = {"a.pythonhosted.org", "b.pythonhosted.org"};
  std::size_t i = 0;
  for (auto _ : state) {
    auto leaf = leaves.get(hosts[i++ & 1]);
    benchmark::DoNotOptimize(leaf);
  }
  state.counters["minted"] = static_cast<double>(leaves.stats().minted);
}
BENCHMARK(BM_LeafMint);

bool transfer(TlsSession& from, TlsSession& to) {
  std::span<const char> bytes = from.peekCiphertext();
  if (bytes.empty()) {
    return false;
  }
  to.feed(bytes);
  from.consumeCiphertext(bytes.size());
  return true;
}

// A full TLS 1.3 handshake on memory buffers, both ends in this thread: sluice's server side
// (leaf from the cache) and an upstream-style client that verifies chain and name. What a
// newconn request costs in TLS, sluice's share and the client's together.
void BM_FullHandshakeBothEnds(benchmark::State& state) {
  Fixture& f = fixture();
  auto leaf = orDie(f.leaves.get("files.pythonhosted.org"));
  for (auto _ : state) {
    TlsSession server =
        orDie(TlsSession::server(f.server_ctx.get(), leaf->certificate.get(), f.leaves.key()));
    TlsSession client = orDie(TlsSession::client(f.client_ctx.get(), "files.pythonhosted.org"));
    HandshakeStatus c = HandshakeStatus::WantIo;
    HandshakeStatus s = HandshakeStatus::WantIo;
    for (int round = 0; round < 8 && (c != HandshakeStatus::Done || s != HandshakeStatus::Done);
         ++round) {
      c = client.handshake();
      transfer(client, server);
      s = server.handshake();
      transfer(server, client);
    }
    if (c != HandshakeStatus::Done || s != HandshakeStatus::Done) {
      state.SkipWithError("handshake did not complete");
      break;
    }
  }
}
BENCHMARK(BM_FullHandshakeBothEnds)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
