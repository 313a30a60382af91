// The package firewall's metadata filters on documents of real size (docs/packages.md#metadata):
// an npm packument of thousands of versions with a `time` map and a large readme (the shape of
// a popular package's: ~30 MiB at 5,000 versions), and a PEP 691 page of as many files. Bytes
// per second are of the document as received; each run filters a fresh copy, as the gateway
// filters each response once.
//   build/bench/package_filter_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "proxy/packages/npm_packument_filter.h"
#include "proxy/packages/pypi_simple_filter.h"
#include "proxy/packages/version_order.h"

namespace {

namespace pk = sluice::proxy::packages;
using sluice::policy::Ecosystem;

std::string versionOf(int i) {
  return std::to_string(i / 100) + "." + std::to_string((i / 10) % 10) + "." +
         std::to_string(i % 10);
}

// One manifest of ~4.7 KiB: the fields npm's registry writes, with a long dependency list and
// description as popular packages have.
std::string manifest(const std::string& name, const std::string& version) {
  std::string m = R"({"name":")" + name + R"(","version":")" + version +
                  R"(","description":")" + std::string(600, 'd') + R"(","main":"index.js",)";
  m += R"("dependencies":{)";
  for (int d = 0; d < 40; ++d) {
    m += (d ? "," : "") + std::string(R"("dependency-number-)") + std::to_string(d) +
         R"(":"^)" + std::to_string(d) + R"(.0.0")";
  }
  m += R"(},"scripts":{"test":")" + std::string(300, 't') + R"("},"dist":{"shasum":")" +
       std::string(40, 'a') + R"(","tarball":"https://registry.npmjs.org/)" + name + "/-/" +
       name + "-" + version + R"(.tgz","integrity":"sha512-)" + std::string(88, 'B') +
       R"(","signatures":[{"keyid":"SHA256:)" + std::string(43, 'k') + R"(","sig":")" +
       std::string(96, 's') + R"("}]},"_npmUser":{"name":"someone","email":"a@example.com"},)";
  m += R"("maintainers":[)";
  for (int k = 0; k < 20; ++k) {
    m += (k ? "," : "") + std::string(R"({"name":"maintainer)") + std::to_string(k) +
         R"(","email":"maintainer@example.com"})";
  }
  m += R"(],"_hasShrinkwrap":false,"readme":")" + std::string(1800, 'r') + R"("})";
  return m;
}

std::string packument(int versions) {
  const std::string name = "popular-package";
  std::string doc = R"({"_id":")" + name + R"(","name":")" + name +
                    R"(","dist-tags":{"latest":")" + versionOf(versions - 1) +
                    R"("},"versions":{)";
  for (int i = 0; i < versions; ++i) {
    const std::string v = versionOf(i);
    doc += (i ? "," : "") + std::string("\"") + v + "\":" + manifest(name, v);
  }
  doc += R"(},"time":{"created":"2015-01-01T00:00:00.000Z","modified":"2026-12-01T00:00:00.000Z")";
  for (int i = 0; i < versions; ++i) {
    char day[64];
    std::snprintf(day, sizeof(day), "2%03d-%02d-%02dT12:00:00.000Z", 16 + i / 365 % 10,
                  1 + i / 28 % 12, 1 + i % 28);
    doc += ",\"" + versionOf(i) + "\":\"" + day + "\"";
  }
  doc += R"(},"readme":")" + std::string(7 << 20, 'R') + R"(","license":"MIT"})";
  return doc;
}

std::string simplePage(int files) {
  std::string doc = R"({"meta":{"api-version":"1.1"},"name":"popular-package","files":[)";
  for (int i = 0; i < files; ++i) {
    const std::string v = versionOf(i / 2);
    const std::string file = i % 2 ? "popular_package-" + v + ".tar.gz"
                                   : "popular_package-" + v + "-py3-none-any.whl";
    doc += (i ? "," : "") + std::string(R"({"filename":")") + file +
           R"(","url":"https://files.pythonhosted.org/packages/aa/bb/)" + std::string(60, 'c') +
           "/" + file + R"(","hashes":{"sha256":")" + std::string(64, 'e') +
           R"("},"requires-python":">=3.8","size":123456,"upload-time":"2024-05-01T12:34:56.789012Z","yanked":false})";
  }
  doc += R"(],"versions":[])";
  doc += "}";
  return doc;
}

// Removes every tenth version, as a policy that refuses some of a package's versions would.
class EveryTenth : public pk::VersionJudge {
 public:
  pk::VersionVerdict judge(std::string_view version,
                           std::optional<std::int64_t>) const override {
    pk::VersionVerdict verdict;
    if (!version.empty() && version.back() == '7') {
      verdict.reason = sluice::policy::Reason::PackageMalicious;
      verdict.advisory = "MAL-0000-0001";
    }
    return verdict;
  }
};

const pk::VersionOrder kOrder{&pk::compareVersions, &pk::isPrerelease};

// Filters a fresh copy of `original` per run with `filter(document, judge)`, which returns
// the filter's Result; bytes per second are of the document as received.
template <class Filter>
void runFilter(benchmark::State& state, const std::string& original, Filter filter) {
  EveryTenth judge;
  std::string doc;
  for (auto _ : state) {
    state.PauseTiming();
    doc.reserve(original.size() + pk::kMetadataPadding);
    doc.assign(original);
    state.ResumeTiming();
    auto filtered = filter(doc, judge);
    if (!filtered) {
      state.SkipWithError("the document was refused");
      return;
    }
    benchmark::DoNotOptimize(&filtered.value());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * original.size()));
  state.counters["MiB"] = static_cast<double>(original.size()) / (1 << 20);
}

void BM_FilterNpmPackument(benchmark::State& state) {
  runFilter(state, packument(static_cast<int>(state.range(0))),
            [](std::string& doc, const EveryTenth& judge) {
              return pk::filterNpmPackument(doc, judge, kOrder);
            });
}
BENCHMARK(BM_FilterNpmPackument)->Arg(500)->Arg(5000)->Unit(benchmark::kMillisecond);

void BM_FilterPypiSimpleJson(benchmark::State& state) {
  runFilter(state, simplePage(static_cast<int>(state.range(0))),
            [](std::string& doc, const EveryTenth& judge) {
              return pk::filterSimpleJson(doc, "popular-package", judge, kOrder);
            });
}
BENCHMARK(BM_FilterPypiSimpleJson)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
