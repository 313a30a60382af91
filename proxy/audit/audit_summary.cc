#include "proxy/audit/audit_summary.h"

#include <algorithm>
#include <cstdio>

#include "base/json_reader.h"
#include "base/json_writer.h"

namespace sluice::proxy::audit {

namespace {

void seen(std::string& first, std::string& last, std::string_view ts) {
  if (ts.empty()) {
    return;
  }
  if (first.empty() || ts < first) {
    first.assign(ts);
  }
  if (ts > last) {
    last.assign(ts);
  }
}

// "1.2 MiB": what a column of bytes says.
std::string humanBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return buf;
}

// A cell of the table: what a log holds (anything: a sandbox's bytes, an edited line), made
// printable and cut to `width`. Every text the table shows from a log goes through here, times
// included: a `ts` is whatever the line says.
std::string cell(std::string_view text, std::size_t width) {
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (out.size() > width) {
    out.resize(width - 3);
    out += "...";
  }
  return out;
}

std::string counts(const std::map<std::string, std::uint64_t>& by) {
  std::vector<std::pair<std::string, std::uint64_t>> sorted(by.begin(), by.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, n] : sorted) {
    out += (out.empty() ? "" : ", ") + name + " " + std::to_string(n);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string hostOfRecord(std::string_view url, std::optional<std::string_view> sni,
                         std::optional<std::string_view> host) {
  if (std::size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    std::string_view rest = url.substr(scheme + 3);
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (!authority.empty()) {
      return std::string(authority);
    }
  }
  if (sni && !sni->empty()) {
    return std::string(*sni);
  }
  if (host && !host->empty()) {
    return std::string(*host);
  }
  return "-";
}

void Summary::add(std::string_view line) {
  auto record = JsonObjectLine::parse(line);
  std::optional<std::string_view> sandbox = record ? record->string("sandbox") : std::nullopt;
  std::optional<std::string_view> kind = record ? record->string("kind") : std::nullopt;
  if (!sandbox || (kind && *kind != "http" && *kind != "dns")) {
    ++skipped_;
    return;
  }
  const std::string_view ts = record->string("ts").value_or("");
  if ((!filter_.sandbox.empty() && *sandbox != filter_.sandbox) ||
      (!filter_.since.empty() && ts < filter_.since)) {
    ++filtered_;
    return;
  }
  ++records_;
  SandboxSummary& s = sandboxes_[std::string(*sandbox)];
  if (kind && *kind == "dns") {
    NameSummary& name = s.names[std::string(record->string("name").value_or("-"))];
    const std::uint64_t n = record->count("count").value_or(1);
    name.queries += n;
    name.answers[std::string(record->string("answer").value_or("-"))] += n;
    seen(name.first_seen, name.last_seen, ts);
    return;
  }
  HostSummary& host = s.hosts[hostOfRecord(record->string("url").value_or(""),
                                           record->string("sni"), record->string("host"))];
  ++host.requests;
  const std::string_view decision = record->string("decision").value_or("");
  if (decision == "allow") {
    ++host.allowed;
  } else if (decision == "report") {
    ++host.reported;
  } else {
    ++host.denied;
  }
  if (auto reason = record->string("reason")) {
    ++host.reasons[std::string(*reason)];
  }
  host.req_bytes += record->count("req_bytes").value_or(0);
  host.resp_bytes += record->count("resp_bytes").value_or(0);
  seen(host.first_seen, host.last_seen, ts);
}

std::string summaryTable(const Summary& summary) {
  std::string out;
  char buf[512];
  for (const auto& [sandbox, s] : summary.sandboxes()) {
    HostSummary all;
    for (const auto& [name, h] : s.hosts) {
      all.requests += h.requests;
      all.allowed += h.allowed;
      all.denied += h.denied;
      all.reported += h.reported;
      all.req_bytes += h.req_bytes;
      all.resp_bytes += h.resp_bytes;
      seen(all.first_seen, all.last_seen, h.first_seen);
      seen(all.first_seen, all.last_seen, h.last_seen);
    }
    std::snprintf(buf, sizeof(buf),
                  "sandbox %s: %llu requests (%llu allowed, %llu denied, %llu reported), %s up, "
                  "%s down, %s .. %s\n",
                  cell(sandbox, 64).c_str(), static_cast<unsigned long long>(all.requests),
                  static_cast<unsigned long long>(all.allowed),
                  static_cast<unsigned long long>(all.denied),
                  static_cast<unsigned long long>(all.reported), humanBytes(all.req_bytes).c_str(),
                  humanBytes(all.resp_bytes).c_str(),
                  all.first_seen.empty() ? "-" : cell(all.first_seen, 32).c_str(),
                  all.last_seen.empty() ? "-" : cell(all.last_seen, 32).c_str());
    out += buf;
    // Hosts by requests, the busiest first.
    std::vector<const std::pair<const std::string, HostSummary>*> hosts;
    for (const auto& entry : s.hosts) {
      hosts.push_back(&entry);
    }
    std::stable_sort(hosts.begin(), hosts.end(), [](const auto* a, const auto* b) {
      return a->second.requests > b->second.requests;
    });
    if (!hosts.empty()) {
      std::snprintf(buf, sizeof(buf), "  %-40s %8s %8s %8s %8s %10s %10s  %-24s  %s\n", "host",
                    "requests", "allowed", "denied", "reported", "up", "down", "last seen",
                    "refused for");
      out += buf;
    }
    for (const auto* entry : hosts) {
      const HostSummary& h = entry->second;
      std::snprintf(buf, sizeof(buf), "  %-40s %8llu %8llu %8llu %8llu %10s %10s  %-24s  ",
                    cell(entry->first, 40).c_str(), static_cast<unsigned long long>(h.requests),
                    static_cast<unsigned long long>(h.allowed),
                    static_cast<unsigned long long>(h.denied),
                    static_cast<unsigned long long>(h.reported), humanBytes(h.req_bytes).c_str(),
                    humanBytes(h.resp_bytes).c_str(), cell(h.last_seen, 32).c_str());
      out += buf;
      out += cell(counts(h.reasons), 200);
      out += '\n';
    }
    if (!s.names.empty()) {
      std::snprintf(buf, sizeof(buf), "  %-40s %8s  %-24s  %s\n", "DNS name", "queries",
                    "last seen", "answers");
      out += buf;
      for (const auto& [name, n] : s.names) {
        std::snprintf(buf, sizeof(buf), "  %-40s %8llu  %-24s  ", cell(name, 40).c_str(),
                      static_cast<unsigned long long>(n.queries), cell(n.last_seen, 32).c_str());
        out += buf;
        out += cell(counts(n.answers), 200);
        out += '\n';
      }
    }
    out += '\n';
  }
  std::snprintf(buf, sizeof(buf), "%llu records",
                static_cast<unsigned long long>(summary.records()));
  out += buf;
  if (summary.filtered() != 0) {
    out += ", " + std::to_string(summary.filtered()) + " left out by --since/--sandbox";
  }
  if (summary.skipped() != 0) {
    out += ", " + std::to_string(summary.skipped()) + " lines that are not records skipped";
  }
  out += '\n';
  return out;
}

namespace {

void countsObject(JsonWriter& json, std::string_view name,
                  const std::map<std::string, std::uint64_t>& by) {
  json.key(name).beginObject();
  for (const auto& [key, n] : by) {
    json.field(key, static_cast<std::int64_t>(n));
  }
  json.endObject();
}

}  // namespace

std::string summaryJson(const Summary& summary) {
  std::string out;
  JsonWriter json(out);
  json.beginObject();
  json.field("records", static_cast<std::int64_t>(summary.records()));
  json.field("skipped", static_cast<std::int64_t>(summary.skipped()));
  json.field("filtered", static_cast<std::int64_t>(summary.filtered()));
  json.key("sandboxes").beginArray();
  for (const auto& [sandbox, s] : summary.sandboxes()) {
    json.beginObject();
    json.field("sandbox", sandbox);
    json.key("hosts").beginArray();
    for (const auto& [name, h] : s.hosts) {
      json.beginObject();
      json.field("host", name);
      json.field("requests", static_cast<std::int64_t>(h.requests));
      json.field("allowed", static_cast<std::int64_t>(h.allowed));
      json.field("denied", static_cast<std::int64_t>(h.denied));
      json.field("reported", static_cast<std::int64_t>(h.reported));
      countsObject(json, "reasons", h.reasons);
      json.field("req_bytes", static_cast<std::int64_t>(h.req_bytes));
      json.field("resp_bytes", static_cast<std::int64_t>(h.resp_bytes));
      json.field("first_seen", h.first_seen);
      json.field("last_seen", h.last_seen);
      json.endObject();
    }
    json.endArray();
    json.key("dns").beginArray();
    for (const auto& [name, n] : s.names) {
      json.beginObject();
      json.field("name", name);
      json.field("queries", static_cast<std::int64_t>(n.queries));
      countsObject(json, "answers", n.answers);
      json.field("first_seen", n.first_seen);
      json.field("last_seen", n.last_seen);
      json.endObject();
    }
    json.endArray();
    json.endObject();
  }
  json.endArray();
  json.endObject();
  out += '\n';
  return out;
}

}  // namespace sluice::proxy::audit
