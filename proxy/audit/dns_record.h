#pragma once
// The records the sandbox's resolver (`dns_listen`) writes into the sandbox's audit log
// (docs/audit.md#dns-records): names it refused (and in report mode answered), one record per
// distinct (name, qtype, answer) per interval with the number of queries it stands for, so a
// sandbox trying `<secret>.attacker.example` is on record and a flood of one name stays one line.
//
//   {"ts":...,"sandbox":"agent-1","kind":"dns","client":"10.200.0.2:40112",
//    "name":"c2VjcmV0.attacker.example","qtype":"A","answer":"nxdomain","count":3,"chain":...}
//
// `name` is the QNAME as the sandbox sent it, in the text dns_message.h writes (odd bytes as
// "\DDD"), JSON-escaped: every name of the wire's 255 bytes fits whole.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "policy/ip_address.h"

namespace sluice::proxy::audit {

namespace dns_field {
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kQtype = "qtype";
inline constexpr std::string_view kAnswer = "answer";
inline constexpr std::string_view kCount = "count";
}  // namespace dns_field

// What the sandbox was told. Refusals are NxDomain (the policy) and Refused (over
// dns_queries_per_second); Answered (sluice's own address) and NoData are written in report
// mode only.
enum class DnsAnswer : std::uint8_t { NxDomain, Refused, NoData, Answered };
std::string_view toString(DnsAnswer a);  // "nxdomain", "refused", "nodata", "answered"

// "A", "AAAA", "HTTPS", ...; a type without a mnemonic here as RFC 3597 writes it: "TYPE65280".
std::string qtypeName(std::uint16_t qtype);

// A QNAME's text (4 bytes per wire byte at worst, "\DDD") with its backslashes escaped: the
// longest name fits.
inline constexpr std::size_t kMaxDnsNameBytes = 2048;

struct DnsRecord {
  std::chrono::system_clock::time_point ts;  // the first query it stands for
  std::string_view sandbox;
  policy::Endpoint client;  // who asked first
  std::string_view name;
  std::uint16_t qtype = 0;
  DnsAnswer answer = DnsAnswer::NxDomain;
  std::uint64_t count = 1;  // queries it stands for
};

// Appends the record's JSON, from '{' up to (not including) the `,"chain"` member.
void appendDnsRecordBody(std::string& out, const DnsRecord& record);

}  // namespace sluice::proxy::audit
