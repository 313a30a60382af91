#include "certs/x509_util.h"

#include <cstddef>
#include <memory>
#include <span>

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/ip_text.h"
#include "certs/openssl_ptr.h"

namespace sluice::certs {

namespace {

constexpr std::size_t kMaxNameLength = 253;
constexpr std::size_t kMaxLabelLength = 63;

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLowerAlnum(char c) { return isDigit(c) || (c >= 'a' && c <= 'z'); }
bool isLowerHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f'); }

// Parses with OpenSSL's own parser (the one X509_VERIFY_PARAM_set1_ip_asc uses, so the
// verifier and this check agree on the octets) and accepts the text only when it is the
// canonical spelling of what was parsed: "010.0.0.1", "+1.2.3.4", "::FFFF:..." all fail.
bool isCanonicalIp(std::string_view host, int expected_length) {
  if (host.empty() || host.size() > kMaxIpTextLength) {
    return false;
  }
  char text[kMaxIpTextLength + 1] = {};
  host.copy(text, host.size());  // NUL-terminated; `host` holds no NUL (checked by callers)
  // A parse failure may queue errors that are no failure of ours: drop exactly those.
  ERR_set_mark();
  Asn1OctetStringPtr octets(a2i_IPADDRESS(text));
  ERR_pop_to_mark();
  if (!octets || ASN1_STRING_length(octets.get()) != expected_length) {
    return false;
  }
  // The one canonical spelling (base/ip_text.h), the one policy::IpAddress writes too.
  char canonical[kMaxIpTextLength + 1];
  const std::size_t length = writeIpText(
      std::span<const std::uint8_t>(ASN1_STRING_get0_data(octets.get()),
                                    static_cast<std::size_t>(expected_length)),
      canonical);
  return std::string_view(canonical, length) == host;
}

bool isCanonicalDnsName(std::string_view host) {
  if (host.empty() || host.size() > kMaxNameLength) {
    return false;
  }
  std::size_t label_start = 0;
  bool label_all_digits = true;
  for (std::size_t i = 0; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      std::size_t length = i - label_start;
      if (length == 0 || length > kMaxLabelLength || host[label_start] == '-' ||
          host[i - 1] == '-') {
        return false;  // empty label (also a trailing dot), too long, or hyphen at an edge
      }
      if (i == host.size() && label_all_digits) {
        return false;  // numeric last label: an IPv4 spelling to some parser, never a name
      }
      label_start = i + 1;
      label_all_digits = true;
      continue;
    }
    char c = host[i];
    if (!isLowerAlnum(c) && c != '-') {
      return false;
    }
    label_all_digits = label_all_digits && isDigit(c);
  }
  return true;
}

}  // namespace

bool setRandomSerial(X509* cert) {
  BignumPtr serial(BN_new());
  if (!serial) {
    return false;
  }
  do {
    if (BN_rand(serial.get(), kSerialBits, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1) {
      return false;
    }
  } while (BN_is_zero(serial.get()));
  return BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) != nullptr;
}

std::optional<HostKind> certificateHostKind(std::string_view host) {
  // Only IPv6 text has a colon, and only IPv4 text is digits and dots alone (names with an
  // all-digit last label are refused below), so exactly one branch ever applies.
  if (host.find(':') != std::string_view::npos) {
    for (char c : host) {
      if (!isLowerHex(c) && c != ':' && c != '.') {
        return std::nullopt;
      }
    }
    return isCanonicalIp(host, 16) ? std::optional(HostKind::Ipv6) : std::nullopt;
  }
  bool digits_and_dots = !host.empty();
  for (char c : host) {
    digits_and_dots = digits_and_dots && (isDigit(c) || c == '.');
  }
  if (digits_and_dots) {
    return isCanonicalIp(host, 4) ? std::optional(HostKind::Ipv4) : std::nullopt;
  }
  return isCanonicalDnsName(host) ? std::optional(HostKind::DnsName) : std::nullopt;
}

}  // namespace sluice::certs
