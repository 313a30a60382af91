#include "certs/client_configs.h"

#include "certs/public_file.h"

namespace sluice::certs {

namespace {

constexpr std::size_t kMaxConfigBytes = 8 * 1024;

// `before` + the path + `after`, for a path both files can carry.
Result<std::string, std::string> naming(std::string_view before, std::string_view ca_pem,
                                        std::string_view after) {
  for (char c : ca_pem) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Err{"the CA path " + std::string(ca_pem) +
                 " has a quote, a backslash or a control character, which wgetrc and apt.conf "
                 "cannot carry"};
    }
  }
  return std::string(before) + std::string(ca_pem) + std::string(after);
}

}  // namespace

Result<std::string, std::string> wgetrcFor(std::string_view ca_pem) {
  return naming(
      "# written by sluice: wget trusts the sandbox's CA (WGETRC, from `sluice env`)\n"
      "ca_certificate = ",
      ca_pem, "\n");
}

Result<std::string, std::string> aptConfFor(std::string_view ca_pem) {
  return naming(
      "// written by sluice: apt's https method trusts the sandbox's CA (APT_CONFIG, from "
      "`sluice env`)\nAcquire::https::CaInfo \"",
      ca_pem, "\";\n");
}

Result<bool, std::string> writeClientConfigs(const std::string& dir, const std::string& ca_pem) {
  auto wgetrc = wgetrcFor(ca_pem);
  auto apt = aptConfFor(ca_pem);
  if (!wgetrc || !apt) {
    return Err{!wgetrc ? wgetrc.error() : apt.error()};
  }
  bool wrote = false;
  for (const auto& [name, bytes] : {std::pair{kWgetrcFile, &wgetrc.value()},
                                    std::pair{kAptConfFile, &apt.value()}}) {
    const std::string path = dir + "/" + std::string(name);
    if (auto existing = readSmallFile(path, kMaxConfigBytes);
        existing && existing.value() == *bytes) {
      continue;
    }
    if (auto written = replaceFile(dir, name, *bytes); !written) {
      return Err{std::move(written).error()};
    }
    wrote = true;
  }
  return wrote;
}

}  // namespace sluice::certs
