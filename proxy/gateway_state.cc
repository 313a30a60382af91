#include "proxy/gateway_state.h"

#include <sys/stat.h>

namespace sluice::proxy {

Result<std::unique_ptr<GatewayState>, std::string> GatewayState::build(
    std::shared_ptr<const policy::Config> config, SecretValues secrets,
    std::vector<std::string>* notices) {
  auto state = std::make_unique<GatewayState>();
  state->config = std::move(config);
  state->secrets = std::move(secrets);

  auto audit = audit::AuditLog::open(*state->config);
  if (!audit) {
    return Err{audit.error()};
  }
  state->audit = std::move(audit).value();

  state->sandbox_tls = tls::makeServerContext();
  if (!state->sandbox_tls) {
    return Err{std::string("cannot create the sandbox-facing TLS context")};
  }
  auto upstream = tls::makeUpstreamContext(state->config->upstream.ca_file);
  if (!upstream) {
    return Err{"upstream.ca_file: " + upstream.error()};
  }
  state->upstream_tls = std::move(upstream).value();

  for (const policy::Sandbox& sandbox : state->config->sandboxes) {
    auto runtime = std::make_unique<SandboxRuntime>();
    runtime->sandbox = &sandbox;
    struct stat st {};
    bool existed = ::stat((sandbox.ca_dir + "/ca.pem").c_str(), &st) == 0;
    auto ca = certs::CertificateAuthority::loadOrCreate(sandbox.ca_dir,
                                                        "sluice sandbox CA (" + sandbox.name + ")");
    if (!ca) {
      return Err{"sandbox '" + sandbox.name + "': " + ca.error()};
    }
    if (!existed && notices != nullptr) {
      notices->push_back("sandbox '" + sandbox.name + "': created CA " + sandbox.ca_dir +
                         "/ca.pem");
    }
    runtime->ca = std::make_unique<certs::CertificateAuthority>(std::move(ca).value());
    runtime->leaves = std::make_unique<certs::LeafCache>(*runtime->ca);
    runtime->audit = state->audit->sinkFor(sandbox.name);
    state->sandboxes.push_back(std::move(runtime));
  }
  return state;
}

}  // namespace sluice::proxy
