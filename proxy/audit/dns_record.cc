#include "proxy/audit/dns_record.h"

#include "base/json_writer.h"
#include "proxy/audit/audit_record.h"

namespace sluice::proxy::audit {

std::string_view toString(DnsAnswer a) {
  switch (a) {
    case DnsAnswer::NxDomain:
      return "nxdomain";
    case DnsAnswer::Refused:
      return "refused";
    case DnsAnswer::NoData:
      return "nodata";
    case DnsAnswer::Answered:
      return "answered";
  }
  return "nxdomain";
}

std::string qtypeName(std::uint16_t qtype) {
  // The types a sandbox's software asks for, and those an exfiltration tool picks for their room.
  struct Named {
    std::uint16_t type;
    std::string_view name;
  };
  static constexpr Named kNames[] = {
      {1, "A"},      {2, "NS"},     {5, "CNAME"},   {6, "SOA"},   {10, "NULL"},
      {12, "PTR"},   {15, "MX"},    {16, "TXT"},    {28, "AAAA"}, {33, "SRV"},
      {35, "NAPTR"}, {43, "DS"},    {48, "DNSKEY"}, {64, "SVCB"}, {65, "HTTPS"},
      {99, "SPF"},   {252, "AXFR"}, {255, "ANY"},   {257, "CAA"},
  };
  for (const Named& named : kNames) {
    if (named.type == qtype) {
      return std::string(named.name);
    }
  }
  return "TYPE" + std::to_string(qtype);
}

void appendDnsRecordBody(std::string& out, const DnsRecord& r) {
  JsonWriter json(out);
  json.beginObject();
  json.key(field::kTs);
  out += '"';
  appendTimestamp(out, r.ts);
  out += '"';
  json.afterValue();
  json.field(field::kSandbox, r.sandbox);
  json.field(field::kKind, "dns");
  char buf[64];
  json.field(field::kClient, formatEndpoint(r.client, buf));
  json.key(dns_field::kName);
  appendCappedString(out, r.name, kMaxDnsNameBytes);  // (every QNAME fits: never cut)
  json.afterValue();
  json.field(dns_field::kQtype, qtypeName(r.qtype));
  json.field(dns_field::kAnswer, toString(r.answer));
  json.field(dns_field::kCount, static_cast<std::int64_t>(r.count));
}

}  // namespace sluice::proxy::audit
