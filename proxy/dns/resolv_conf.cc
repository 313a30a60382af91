#include "proxy/dns/resolv_conf.h"

#include <fstream>
#include <optional>
#include <sstream>

namespace sluice::proxy::dns {
namespace {

constexpr std::string_view kKeyword = "nameserver";
constexpr std::uint16_t kDnsPort = 53;

bool isBlank(char c) { return c == ' ' || c == '\t'; }

std::optional<policy::Endpoint> parseLine(std::string_view line) {
  // glibc's res_init matches the keyword at column 0 followed by a blank; so do we, so that the
  // gateway and the host's own resolver agree on what the file says.
  if (line.size() <= kKeyword.size() || line.substr(0, kKeyword.size()) != kKeyword ||
      !isBlank(line[kKeyword.size()])) {
    return std::nullopt;
  }
  std::size_t begin = kKeyword.size();
  while (begin < line.size() && isBlank(line[begin])) {
    ++begin;
  }
  std::size_t end = begin;
  while (end < line.size() && !isBlank(line[end])) {
    ++end;
  }
  std::string_view address = line.substr(begin, end - begin);
  if (address.find('%') != std::string_view::npos) {
    return std::nullopt;  // zone index: link-local server, not expressible to c-ares
  }
  auto ip = policy::IpAddress::parse(address);
  if (!ip) {
    return std::nullopt;
  }
  return policy::Endpoint{*ip, kDnsPort};
}

}  // namespace

std::vector<policy::Endpoint> parseResolvConf(std::string_view text) {
  std::vector<policy::Endpoint> servers;
  while (!text.empty() && servers.size() < kMaxResolvConfServers) {
    std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (auto server = parseLine(line)) {
      servers.push_back(*server);
    }
  }
  return servers;
}

std::vector<policy::Endpoint> readResolvConf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parseResolvConf(text.str());
}

}  // namespace sluice::proxy::dns
