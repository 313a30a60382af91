// Micro-benchmarks of the pure hot path: what every request costs before any I/O.
//   build/bench/policy_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "policy/address_class.h"
#include "policy/config_loader.h"
#include "policy/decision.h"
#include "policy/host_name.h"

namespace {

using namespace sluice::policy;

std::shared_ptr<const Config> loadBenchConfig(int extra_rules) {
  std::string yaml =
      "version: 1\nsandboxes:\n  - name: s\n    listen: 127.0.0.1:3128\n    policy: p\n"
      "policies:\n  p:\n    rules:\n"
      "      - name: pypi\n        hosts: [pypi.org, files.pythonhosted.org]\n"
      "        methods: [GET, HEAD]\n        paths: [/simple/, /packages/]\n"
      "      - name: wild\n        hosts: [\"*.example.com\"]\n";
  for (int i = 0; i < extra_rules; ++i) {
    yaml += "      - name: r" + std::to_string(i) + "\n        hosts: [host" + std::to_string(i) +
            ".example.org, \"*.zone" + std::to_string(i) + ".example.net\"]\n";
  }
  auto config = loadConfig({"bench.yaml", yaml}, {});
  if (!config) {
    std::abort();
  }
  return std::move(config).value();
}

void BM_CanonicalizeHost(benchmark::State& state) {
  for (auto _ : state) {
    auto h = canonicalizeHost("Files.PythonHosted.org.");
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_CanonicalizeHost);

void BM_ClassifyAddress(benchmark::State& state) {
  IpAddress v4 = *IpAddress::parse("151.101.0.223");
  IpAddress v6 = *IpAddress::parse("2a04:4e42::223");
  for (auto _ : state) {
    benchmark::DoNotOptimize(classifyAddress(v4));
    benchmark::DoNotOptimize(classifyAddress(v6));
  }
}
BENCHMARK(BM_ClassifyAddress);

// A full per-request decision: SNI, Host, rule match with method and path, two addresses.
void BM_DecideRequest(benchmark::State& state) {
  auto config = loadBenchConfig(static_cast<int>(state.range(0)));
  const Sandbox& sandbox = config->sandboxes.front();
  std::vector<IpAddress> addresses = {*IpAddress::parse("151.101.0.223"),
                                      *IpAddress::parse("2a04:4e42::223")};
  RequestHead head;
  head.method = "GET";
  head.target = "/packages/ab/cd/requests-2.31.0-py3-none-any.whl";
  head.host_count = 1;
  head.host = "files.pythonhosted.org";
  RequestFacts facts;
  facts.target_host = "files.pythonhosted.org";
  facts.port = 443;
  facts.sni_state = SniState::Present;
  facts.sni = "files.pythonhosted.org";
  facts.request = &head;
  facts.resolved = true;
  facts.addresses = addresses;
  for (auto _ : state) {
    Decision d = decide(sandbox, facts);
    benchmark::DoNotOptimize(d);
  }
  state.SetLabel(std::to_string(config->policies.front()->rules.size()) + " rules");
}
BENCHMARK(BM_DecideRequest)->Arg(0)->Arg(1000);

void BM_DecideWildcardDenied(benchmark::State& state) {
  auto config = loadBenchConfig(1000);
  const Sandbox& sandbox = config->sandboxes.front();
  RequestFacts facts;
  facts.target_host = "a.b.c.d.not-listed.example.io";
  facts.port = 443;
  for (auto _ : state) {
    Decision d = decide(sandbox, facts);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_DecideWildcardDenied);

}  // namespace

BENCHMARK_MAIN();
