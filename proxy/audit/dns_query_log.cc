#include "proxy/audit/dns_query_log.h"

namespace sluice::proxy::audit {

void DnsQueryLog::makeKey(std::string_view name, std::uint16_t qtype, DnsAnswer answer) {
  key_.assign(name);
  key_ += '\0';
  key_ += static_cast<char>(qtype >> 8);
  key_ += static_cast<char>(qtype & 0xff);
  key_ += static_cast<char>(answer);
}

bool DnsQueryLog::note(std::string_view name, std::uint16_t qtype, DnsAnswer answer,
                       const policy::Endpoint& client, std::chrono::system_clock::time_point now) {
  // Queries refused for the rate are one entry whatever their names: a sandbox over its rate
  // cannot turn that flood into a record per name.
  if (answer == DnsAnswer::Refused) {
    makeKey("", 0, answer);
  } else {
    makeKey(name, qtype, answer);
  }
  if (auto it = index_.find(std::string_view(key_)); it != index_.end()) {
    ++entries_[it->second].count;
    return false;
  }
  index_.emplace(key_, entries_.size());
  entries_.push_back(Entry{std::string(name), qtype, answer, client, now, 1});
  return entries_.size() >= kMaxEntries;
}

void DnsQueryLog::drain(std::string_view sandbox,
                        const std::function<void(const DnsRecord&)>& write) {
  for (const Entry& entry : entries_) {
    DnsRecord record;
    record.ts = entry.first;
    record.sandbox = sandbox;
    record.client = entry.client;
    record.name = entry.name;
    record.qtype = entry.qtype;
    record.answer = entry.answer;
    record.count = entry.count;
    write(record);
  }
  entries_.clear();
  index_.clear();
}

}  // namespace sluice::proxy::audit
