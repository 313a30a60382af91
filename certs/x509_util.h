#pragma once
// Small X.509 building blocks shared by the CA (ca.cc), leaf minting (leaf_cache.cc) and the
// TLS layer that verifies upstream names (proxy/tls/). OpenSSL only; no state.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <openssl/x509.h>

namespace sluice::certs {

// Serial numbers are drawn at random with this many bits: positive, non-zero and at most 20
// octets once DER-encoded (RFC 5280 4.1.2.2), and unpredictable (CA/B Forum BR 7.1: at least
// 64 random bits).
inline constexpr int kSerialBits = 159;

// Gives `cert` a fresh random serial of kSerialBits bits, never zero. On false the reason is
// on the thread's OpenSSL error queue for the caller to drain.
[[nodiscard]] bool setRandomSerial(X509* cert);

// What a certificate may name, and how a TLS client must check it.
enum class HostKind : std::uint8_t {
  DnsName,  // SAN dNSName; SNI; X509_VERIFY_PARAM_set1_host
  Ipv4,     // SAN iPAddress (4 octets); no SNI (RFC 6066 §3); X509_VERIFY_PARAM_set1_ip_asc
  Ipv6,     // SAN iPAddress (16 octets); likewise
};

// Classifies `host` if it is in the canonical form policy/host_name produces, and refuses
// everything else (nullopt). Defence in depth: callers have already canonicalised, so a
// refusal here means a bug upstream, and the text never reaches a SAN, an SNI or a verifier
// (docs/threat-model.md#tls-parser-disagreement: NUL, '*', spaces, upper case, trailing dots are
// all refused).
//   DnsName: lower-case LDH labels of 1-63 characters, no hyphen at either end of a label,
//            at most 253 characters, no trailing dot, and a last label that is not all digits
//            (such a name would be read as an IPv4 address by some library).
//   Ipv4:    a dotted quad without leading zeros ("10.0.0.1", never "010.0.0.1").
//   Ipv6:    RFC 5952 text without brackets or zone ("2001:db8::1", "::ffff:1.2.3.4"), as
//            base/ip_text.h writes it (and so policy::IpAddress::format).
std::optional<HostKind> certificateHostKind(std::string_view host);

}  // namespace sluice::certs
