#pragma once
// The DNS queries of one sandbox waiting to become records (docs/audit.md#dns-records): one entry
// per distinct (name, qtype, answer), counting the queries it stands for, written out as one
// record each when the interval ends (the owner's timer) or when the table is full. So a flood of
// one name is one line per interval; the queries refused for the sandbox's rate are one entry
// whatever their names (the first name and type stand for them); and a flood of distinct names
// (an exfiltration tool's) is a record per name only as fast as dns_queries_per_second lets
// the names be asked, in memory at most kMaxEntries.
//
// Not thread-safe: the sandboxes' resolvers all run on one loop (worker 0), and so does this.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/string_map.h"
#include "policy/ip_address.h"
#include "proxy/audit/dns_record.h"

namespace sluice::proxy::audit {

class DnsQueryLog {
 public:
  static constexpr std::size_t kMaxEntries = 1024;

  // Counts one query. True when the table is full: write it out now.
  bool note(std::string_view name, std::uint16_t qtype, DnsAnswer answer,
            const policy::Endpoint& client, std::chrono::system_clock::time_point now);
  // Each entry as one record, in the order first seen, then none.
  void drain(std::string_view sandbox, const std::function<void(const DnsRecord&)>& write);
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    std::uint16_t qtype = 0;
    DnsAnswer answer = DnsAnswer::NxDomain;
    policy::Endpoint client;
    std::chrono::system_clock::time_point first;
    std::uint64_t count = 0;
  };
  // The key: the name, then qtype and answer in 3 bytes (a name holds no byte it could be
  // confused with: parseQuery writes odd bytes as "\DDD").
  void makeKey(std::string_view name, std::uint16_t qtype, DnsAnswer answer);

  std::vector<Entry> entries_;
  StringMap<std::size_t> index_;
  std::string key_;  // reused
};

}  // namespace sluice::proxy::audit
