#include "proxy/dns/answer_reader.h"

#include <ares.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>

namespace sluice::proxy::dns {

DnsError dnsErrorFromAresStatus(int status) {
  switch (status) {
    case ARES_ENOTFOUND:
      return DnsError::NotFound;
    case ARES_ENODATA:
      return DnsError::NoAddresses;
    case ARES_ETIMEOUT:
      return DnsError::Timeout;
    // c-ares 1.18 skips a server that answers REFUSED (or SERVFAIL, NOTIMP) and, when none is
    // left, reports the query's initial status ARES_ECONNREFUSED, as for an unreachable one.
    case ARES_ECONNREFUSED:
    case ARES_EREFUSED:
    case ARES_ESERVFAIL:
      return DnsError::Refused;
    case ARES_EDESTRUCTION:
    case ARES_ECANCELLED:
      return DnsError::Cancelled;
    default:
      return DnsError::Failed;
  }
}

FamilyAnswer readAReply(const unsigned char* abuf, int alen) {
  FamilyAnswer out;
  std::array<ares_addrttl, Answer::kMaxAddresses> ttls{};
  int count = static_cast<int>(ttls.size());
  const int rc = ares_parse_a_reply(abuf, alen, nullptr, ttls.data(), &count);
  if (rc != ARES_SUCCESS) {
    out.error = dnsErrorFromAresStatus(rc);
    return out;
  }
  for (int i = 0; i < count; ++i) {
    const ares_addrttl& r = ttls[static_cast<std::size_t>(i)];
    out.records.emplace_back(policy::IpAddress::fromV4(ntohl(r.ipaddr.s_addr)), r.ttl);
  }
  return out;
}

FamilyAnswer readAaaaReply(const unsigned char* abuf, int alen) {
  FamilyAnswer out;
  std::array<ares_addr6ttl, Answer::kMaxAddresses> ttls{};
  int count = static_cast<int>(ttls.size());
  const int rc = ares_parse_aaaa_reply(abuf, alen, nullptr, ttls.data(), &count);
  if (rc != ARES_SUCCESS) {
    out.error = dnsErrorFromAresStatus(rc);
    return out;
  }
  for (int i = 0; i < count; ++i) {
    const ares_addr6ttl& r = ttls[static_cast<std::size_t>(i)];
    std::array<std::uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), r.ip6addr._S6_un._S6_u8, bytes.size());
    out.records.emplace_back(policy::IpAddress::fromV6(bytes), r.ttl);
  }
  return out;
}

JoinedAnswer joinFamilies(const FamilyAnswer& a, const FamilyAnswer& aaaa,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::milliseconds max_ttl) {
  std::vector<policy::IpAddress> addresses;
  int ttl = INT_MAX;
  for (const FamilyAnswer* family : {&a, &aaaa}) {
    for (const auto& [address, record_ttl] : family->records) {
      if (addresses.size() == Answer::kMaxAddresses) {
        break;
      }
      ttl = std::min(ttl, std::max(record_ttl, 0));
      if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
        addresses.push_back(address);
      }
    }
  }

  if (!addresses.empty()) {
    const auto lifetime = std::min<std::chrono::milliseconds>(std::chrono::seconds(ttl), max_ttl);
    auto answer = std::make_shared<Answer>();
    answer->addresses = std::move(addresses);
    answer->expires = now + lifetime;
    return {LookupResult(std::shared_ptr<const Answer>(std::move(answer))), now + lifetime};
  }
  // Neither family has an address. A hard error in either wins over a negative answer, so
  // that a half-known name is never negatively cached.
  for (DnsError hard : {DnsError::Timeout, DnsError::Refused, DnsError::Failed}) {
    if (a.error == hard || aaaa.error == hard) {
      return {LookupResult(Err{hard}), std::nullopt};
    }
  }
  const DnsError error = a.error == DnsError::NotFound || aaaa.error == DnsError::NotFound
                             ? DnsError::NotFound  // RFC 8020: NXDOMAIN means no records at all
                             : DnsError::NoAddresses;
  return {LookupResult(Err{error}), now + std::min(kMaxNegativeAnswerTtl, max_ttl)};
}

}  // namespace sluice::proxy::dns
