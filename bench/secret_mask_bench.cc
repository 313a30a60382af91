// What masking a response costs on an exchange that injects a secret: one pass of the
// automaton over every form of every secret (SecretPatterns), fed in the 16 KiB pieces the
// session reads. Exchanges that inject nothing skip it (BM_CopyOnly is what they pay).
//   build/bench/secret_mask_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/secrets/secret_patterns.h"
#include "proxy/session/exchange/secret_mask.h"

namespace {

using sluice::proxy::session::SecretMask;
using sluice::proxy::SecretPatterns;

constexpr std::size_t kBodyBytes = 1 << 20;
constexpr std::size_t kPiece = 16 * 1024;

const std::vector<std::string_view> kTwoSecrets = {
    "sk-ant-api03-7f3a9c0e5b1d4a2e8c6f0a1b2c3d4e5f6a7b8c9d0e1f2a3b",
    "ghp_Zx9q/w+e=rT y_u.i-o3f4e5d6c7b8a9",
};

// A body of the kind an API answers: JSON with words, numbers, ids and a base64 blob.
std::string jsonBody() {
  std::mt19937 rng(42);
  const char* words[] = {"the",  "model", "answered", "with",  "a",       "token", "stream", "of",
                         "text", "and",   "numbers",  "delta", "content", "index", "role"};
  const std::string b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string body;
  while (body.size() < kBodyBytes) {
    body += "{\"id\":\"msg_" + std::to_string(rng()) +
            "\",\"index\":" + std::to_string(rng() % 999) + ",\"delta\":{\"text\":\"";
    for (int i = 0; i < 12; ++i) {
      body += words[rng() % std::size(words)];
      body += ' ';
    }
    body += "\"},\"blob\":\"";
    for (int i = 0; i < 64; ++i) {
      body += b64[rng() % 64];
    }
    body += "\"}\n";
  }
  body.resize(kBodyBytes);
  return body;
}

// Random bytes from an alphabet: base64 or hex text starts a pattern at almost every byte.
std::string alphabetBody(std::string_view alphabet) {
  std::mt19937 rng(7);
  std::string body(kBodyBytes, ' ');
  for (char& c : body) {
    c = alphabet[rng() % alphabet.size()];
  }
  return body;
}

void maskBody(benchmark::State& state, const std::string& body,
              const std::vector<std::string_view>& secrets) {
  const SecretPatterns patterns = SecretPatterns::build(secrets);
  SecretMask mask;
  std::string out;
  out.reserve(kPiece * 2);
  for (auto _ : state) {
    mask.reset(&patterns);
    for (std::size_t at = 0; at < body.size(); at += kPiece) {
      out.clear();
      mask.feed(std::span<const char>(body.data() + at, std::min(kPiece, body.size() - at)), out);
      benchmark::DoNotOptimize(out.data());
    }
    out.clear();
    mask.finish(out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.counters["patterns"] = static_cast<double>(patterns.patternCount());
  state.counters["automaton_KiB"] = static_cast<double>(patterns.memoryBytes()) / 1024.0;
}

void BM_MaskJsonTwoSecrets(benchmark::State& state) { maskBody(state, jsonBody(), kTwoSecrets); }
BENCHMARK(BM_MaskJsonTwoSecrets);

void BM_MaskJsonWithEchoedSecrets(benchmark::State& state) {
  // The same body with each secret echoed, as it is and base64-encoded, every 4 KiB.
  std::string body = jsonBody();
  const std::string echo = std::string(kTwoSecrets[0]) + " c2stYW50LWFwaTAzLTdmM2E5YzBlNWIx";
  for (std::size_t at = 1000; at + echo.size() < body.size(); at += 4096) {
    body.replace(at, echo.size(), echo);
  }
  maskBody(state, body, kTwoSecrets);
}
BENCHMARK(BM_MaskJsonWithEchoedSecrets);

void BM_MaskRandomBase64TwoSecrets(benchmark::State& state) {
  maskBody(state, alphabetBody("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
           kTwoSecrets);
}
BENCHMARK(BM_MaskRandomBase64TwoSecrets);

void BM_MaskRandomHexTwoSecrets(benchmark::State& state) {
  maskBody(state, alphabetBody("0123456789abcdef"), kTwoSecrets);
}
BENCHMARK(BM_MaskRandomHexTwoSecrets);

void BM_MaskDegenerateSecretOverItsOwnByte(benchmark::State& state) {
  // A secret of one repeated byte over a body of that byte: every position ends a match.
  maskBody(state, std::string(kBodyBytes, 'a'), {"aaaaaaaaaaaaaaaaaaaaaaaa"});
}
BENCHMARK(BM_MaskDegenerateSecretOverItsOwnByte);

void BM_MaskJsonTwentySecrets(benchmark::State& state) {
  std::vector<std::string> values;
  for (int i = 0; i < 20; ++i) {
    values.push_back("sk-" + std::to_string(i) + "-7f3a9c0e5b1d4a2e8c6f0a1b2c3d4e5f6a7b8c9d");
  }
  std::vector<std::string_view> views(values.begin(), values.end());
  maskBody(state, jsonBody(), views);
}
BENCHMARK(BM_MaskJsonTwentySecrets);

// What an exchange that injects nothing pays for its body: the copy into the output alone.
void BM_CopyOnly(benchmark::State& state) {
  const std::string body = jsonBody();
  std::string out;
  out.reserve(kPiece * 2);
  for (auto _ : state) {
    for (std::size_t at = 0; at < body.size(); at += kPiece) {
      out.clear();
      out.append(body.data() + at, std::min(kPiece, body.size() - at));
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_CopyOnly);

// Built once per set of secret values (at start and at each reload), never per request.
void BM_BuildPatternsTwoSecrets(benchmark::State& state) {
  for (auto _ : state) {
    SecretPatterns patterns = SecretPatterns::build(kTwoSecrets);
    benchmark::DoNotOptimize(patterns.patternCount());
  }
}
BENCHMARK(BM_BuildPatternsTwoSecrets);

}  // namespace

BENCHMARK_MAIN();
