#include "proxy/runtime/generation.h"

#include <algorithm>

#include "certs/client_configs.h"
#include "certs/shown_path.h"
#include "certs/trust_store.h"
#include "proxy/tls/tls_context.h"

namespace sluice::proxy {

namespace {

std::atomic<std::uint64_t> next_runtime_id{1};

const SandboxView* findIn(const Generation* generation, std::string_view name) {
  return generation == nullptr ? nullptr : generation->find(name);
}

CaFiles caFilesIn(const std::string& dir) {
  return {FileIdentity::ofPath(dir + "/" + std::string(certs::CertificateAuthority::kCertFile)),
          FileIdentity::ofPath(dir + "/" + std::string(certs::CertificateAuthority::kKeyFile))};
}

// The previous runtime of a sandbox if its CA is unchanged (same CA, same leaves, same
// counters), else a new one with the CA loaded or created. Unchanged is the same directory
// and the same two files in it: an operator rotating a CA replaces them and reloads, and the
// sandbox's connections made under the old CA drain (Worker::drainRemovedSandboxes).
Result<std::shared_ptr<SandboxRuntime>, std::string> runtimeFor(
    const policy::Sandbox& sandbox, const SandboxView* before, std::vector<std::string>* notices) {
  // Taken before the files are read: were they replaced meanwhile, the next reload sees it.
  const CaFiles files = caFilesIn(sandbox.ca_dir);
  const bool same_dir = before != nullptr && before->runtime->ca_dir == sandbox.ca_dir;
  if (same_dir && before->runtime->ca_files == files) {
    return before->runtime;
  }
  if (same_dir && (!files.cert || !files.key)) {
    // Gone from under a running sandbox: a reload that some other change set off must not
    // make a new CA its clients do not trust. The one in memory serves on.
    if (notices != nullptr) {
      notices->push_back("sandbox '" + sandbox.name + "': the CA files in " +
                         certs::shownPath(sandbox.ca_dir) +
                         " are gone; the CA in memory serves on (restore them: a restart would "
                         "create a new CA)");
    }
    return before->runtime;
  }
  auto runtime = std::make_shared<SandboxRuntime>();
  runtime->id = next_runtime_id.fetch_add(1);
  runtime->name = sandbox.name;
  runtime->ca_dir = sandbox.ca_dir;
  runtime->ca_pem_shown = certs::shownPath(sandbox.ca_dir + "/ca.pem");
  auto ca = certs::CertificateAuthority::loadOrCreate(sandbox.ca_dir,
                                                      "sluice sandbox CA (" + sandbox.name + ")");
  if (!ca) {
    return Err{"sandbox '" + sandbox.name + "': " + ca.error()};
  }
  const bool created = !files.cert.has_value();
  runtime->ca_files = created ? caFilesIn(sandbox.ca_dir) : files;
  if (notices != nullptr) {
    if (created) {
      notices->push_back("sandbox '" + sandbox.name + "': created CA " + runtime->ca_pem_shown);
    } else if (same_dir) {
      notices->push_back("sandbox '" + sandbox.name + "': CA files in " +
                         certs::shownPath(sandbox.ca_dir) +
                         " replaced: loaded anew; connections made under the old CA drain");
    }
  }
  // Java's copy of the CA (certs/trust_store.h), written when missing or stale: a CA directory
  // from before sluice wrote one gets it too. Not fatal: the PEM is what every other client
  // reads, and the notice says what Java will not find.
  if (auto store = certs::writeJavaTrustStore(sandbox.ca_dir, ca.value().certificate()); !store) {
    if (notices != nullptr) {
      notices->push_back("sandbox '" + sandbox.name + "': no Java trust store: " + store.error());
    }
  } else if (store.value() && !created && notices != nullptr) {
    const std::string store_path = sandbox.ca_dir + "/" + std::string(certs::kTrustStoreFile);
    notices->push_back("sandbox '" + sandbox.name + "': wrote " + certs::shownPath(store_path) +
                       " (the CA as a Java trust store)");
  }
  // wget's and apt's copies of the CA's path (certs/client_configs.h): not fatal either.
  if (auto configs = certs::writeClientConfigs(sandbox.ca_dir, runtime->ca_pem_shown); !configs) {
    if (notices != nullptr) {
      notices->push_back("sandbox '" + sandbox.name + "': no wgetrc or apt.conf for its CA: " +
                         configs.error());
    }
  }
  runtime->ca = std::make_unique<certs::CertificateAuthority>(std::move(ca).value());
  runtime->leaves = std::make_unique<certs::LeafCache>(*runtime->ca);
  return runtime;
}

// The previous bucket when the sandbox's rate is unchanged (its tokens carry over), else a
// new one; null without a limit.
std::shared_ptr<limits::RequestRate> rateFor(const policy::Sandbox& sandbox,
                                             const SandboxView* before) {
  const policy::SandboxLimits& limits = sandbox.limits;
  if (!limits.requests_per_second) {
    return nullptr;
  }
  std::uint64_t burst = limits.request_burst.value_or(*limits.requests_per_second);
  if (before != nullptr && before->rate != nullptr &&
      before->sandbox->limits.requests_per_second == limits.requests_per_second &&
      before->sandbox->limits.request_burst == limits.request_burst) {
    return before->rate;
  }
  return std::make_shared<limits::RequestRate>(*limits.requests_per_second, burst);
}

std::shared_ptr<limits::RequestRate> dnsRateFor(const policy::Sandbox& sandbox,
                                                const SandboxView* before) {
  const auto& rate = sandbox.limits.dns_queries_per_second;
  if (!rate) {
    return nullptr;
  }
  if (before != nullptr && before->dns_rate != nullptr &&
      before->sandbox->limits.dns_queries_per_second == rate) {
    return before->dns_rate;
  }
  return std::make_shared<limits::RequestRate>(*rate, *rate);  // a second's worth at once
}

}  // namespace

const SandboxView* Generation::find(std::string_view name) const {
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : &sandboxes[it->second];
}

Result<std::shared_ptr<const Generation>, std::string> buildGeneration(
    std::shared_ptr<const policy::Config> config, SecretValues secrets,
    const Generation* previous, audit::AuditLog& audit, std::vector<std::string>* notices) {
  auto generation = std::make_shared<Generation>();
  generation->number = previous == nullptr ? 1 : previous->number + 1;
  generation->config = std::move(config);
  generation->secrets = std::make_shared<const SecretValues>(std::move(secrets));
  const policy::Config& c = *generation->config;

  // The same path is not enough: a bundle updated in place (a new internal root) is trusted
  // from the reload on, and the pool's connections verified under the old one are not reused.
  if (c.upstream.ca_file) {
    generation->upstream_trust_files.push_back(FileIdentity::ofPath(*c.upstream.ca_file));
  }
  for (const std::string& extra : c.upstream.extra_ca_files) {
    generation->upstream_trust_files.push_back(FileIdentity::ofPath(extra));
  }
  if (previous != nullptr && previous->config->upstream.ca_file == c.upstream.ca_file &&
      previous->config->upstream.extra_ca_files == c.upstream.extra_ca_files &&
      previous->upstream_trust_files == generation->upstream_trust_files) {
    generation->upstream_tls = previous->upstream_tls;
    generation->upstream_trust_id = previous->upstream_trust_id;
  } else {
    auto upstream = tls::makeUpstreamContext(c.upstream.ca_file, c.upstream.extra_ca_files);
    if (!upstream) {
      return Err{upstream.error()};
    }
    generation->upstream_tls = std::shared_ptr<SSL_CTX>(std::move(upstream).value());
    generation->upstream_trust_id = generation->number;
  }

  auto advisories = PolicyAdvisories::load(c);
  if (!advisories) {
    return Err{advisories.error()};
  }
  generation->advisories = std::move(advisories).value();
  if (notices != nullptr) {
    notices->insert(notices->end(), generation->advisories->summary().begin(),
                    generation->advisories->summary().end());
  }

  for (const policy::Sandbox& sandbox : c.sandboxes) {
    const SandboxView* before = findIn(previous, sandbox.name);
    auto runtime = runtimeFor(sandbox, before, notices);
    if (!runtime) {
      return Err{runtime.error()};
    }
    auto sink = audit.sink(sandbox.audit_path ? *sandbox.audit_path : c.audit.path);
    if (!sink) {
      return Err{"sandbox '" + sandbox.name + "': " + sink.error()};
    }
    auto& sinks = generation->audit_sinks;
    if (std::find(sinks.begin(), sinks.end(), sink.value()) == sinks.end()) {
      sinks.push_back(sink.value());
    }
    generation->sandboxes.push_back(SandboxView{
        &sandbox, std::move(runtime).value(), sink.value().get(), rateFor(sandbox, before),
        dnsRateFor(sandbox, before), generation->advisories->find(*sandbox.policy)});
  }
  for (std::size_t i = 0; i < generation->sandboxes.size(); ++i) {
    generation->by_name.emplace(generation->sandboxes[i].sandbox->name, i);
  }
  return std::shared_ptr<const Generation>(std::move(generation));
}

}  // namespace sluice::proxy
