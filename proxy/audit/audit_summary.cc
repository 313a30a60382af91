#include "proxy/audit/audit_summary.h"

#include <algorithm>
#include <cstdio>

#include "base/json_reader.h"
#include "base/json_writer.h"
#include "proxy/audit/audit_sbom.h"

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

// `count` decimal digits at text[at...] into `value`; false if any is not a digit.
bool digits(std::string_view text, std::size_t at, std::size_t count, int& value) {
  if (at + count > text.size()) {
    return false;
  }
  value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') {
      return false;
    }
    value = value * 10 + (text[i] - '0');
  }
  return true;
}

}  // namespace

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

std::string countOf(std::uint64_t n, std::string_view noun) {
  std::string text = std::to_string(n) + ' ';
  text += noun;
  if (n != 1) {
    text += 's';
  }
  return text;
}

std::optional<TimeMs> parseTime(std::string_view text) {
  using namespace std::chrono;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!digits(text, 0, 4, y) || text.size() < 10 || text[4] != '-' || !digits(text, 5, 2, mo) ||
      text[7] != '-' || !digits(text, 8, 2, d)) {
    return std::nullopt;
  }
  const year_month_day date{year(y), month(static_cast<unsigned>(mo)),
                            day(static_cast<unsigned>(d))};
  if (!date.ok()) {
    return std::nullopt;
  }
  std::size_t at = 10;
  milliseconds fraction{0};
  if (at < text.size() && (text[at] == 'T' || text[at] == 't' || text[at] == ' ')) {
    if (!digits(text, at + 1, 2, h) || text.size() < at + 6 || text[at + 3] != ':' ||
        !digits(text, at + 4, 2, mi) || h > 23 || mi > 59) {
      return std::nullopt;
    }
    at += 6;
    if (at < text.size() && text[at] == ':') {
      if (!digits(text, at + 1, 2, sec) || sec > 60) {
        return std::nullopt;
      }
      at += 3;
      if (at < text.size() && text[at] == '.') {
        std::size_t end = ++at;
        int scale = 100;
        for (; end < text.size() && text[end] >= '0' && text[end] <= '9'; ++end, scale /= 10) {
          fraction += milliseconds((text[end] - '0') * scale);  // past ms: scale 0, ignored
        }
        if (end == at) {
          return std::nullopt;
        }
        at = end;
      }
    }
  }
  minutes offset{0};
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at > 10 && at < text.size() && (text[at] == '+' || text[at] == '-')) {
    int oh = 0, om = 0;
    if (!digits(text, at + 1, 2, oh) || text.size() < at + 6 || text[at + 3] != ':' ||
        !digits(text, at + 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = minutes((text[at] == '+' ? 1 : -1) * (oh * 60 + om));
    at += 6;
  }
  if (at != text.size()) {
    return std::nullopt;
  }
  return TimeMs(sys_days(date).time_since_epoch() + hours(h) + minutes(mi) + seconds(sec) +
                fraction - offset);
}

std::string canonicalTime(TimeMs at) {
  using namespace std::chrono;
  at = std::clamp(at, TimeMs(sys_days(year(0) / 1 / 1)),
                  TimeMs(sys_days(year(9999) / 12 / 31) + hours(24) - milliseconds(1)));
  const sys_days day_of = floor<days>(at);
  const year_month_day date(day_of);
  const hh_mm_ss time(at - day_of);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ",
                static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                static_cast<unsigned>(date.day()), static_cast<int>(time.hours().count()),
                static_cast<int>(time.minutes().count()), static_cast<int>(time.seconds().count()),
                static_cast<int>(time.subseconds().count()));
  return buf;
}

std::optional<std::string> sinceTimestamp(std::string_view when,
                                          std::chrono::system_clock::time_point now) {
  using namespace std::chrono;
  std::optional<TimeMs> from = parseTime(when);
  if (!from && when.size() >= 2 && when.size() <= 10) {
    const TimeMs now_ms = time_point_cast<milliseconds>(now);
    int n = 0;
    if (digits(when, 0, when.size() - 1, n)) {
      switch (when.back()) {
        case 's':
          from = now_ms - seconds(n);
          break;
        case 'm':
          from = now_ms - minutes(n);
          break;
        case 'h':
          from = now_ms - hours(n);
          break;
        case 'd':
          from = now_ms - hours(24) * n;
          break;
        default:
          break;
      }
    }
  }
  if (!from) {
    return std::nullopt;
  }
  return canonicalTime(*from);
}

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
  MinuteCounts& minute = timeline_[std::string(ts.substr(0, 16))];
  if (decision == "allow") {
    ++host.allowed;
    ++minute.allowed;
  } else if (decision == "report") {
    ++host.reported;
    ++minute.reported;
  } else {
    ++host.denied;
    ++minute.denied;
  }
  if (auto reason = record->string("reason")) {
    ++host.reasons[std::string(*reason)];
  }
  host.req_bytes += record->count("req_bytes").value_or(0);
  host.resp_bytes += record->count("resp_bytes").value_or(0);
  seen(host.first_seen, host.last_seen, ts);
  bool malformed = false;  // a `package` unread: the record still counts, as a request
  if (auto fetched = fetchedPackage(*record, &malformed)) {
    PackageSummary& package = s.packages[fetched->purl];
    if (package.fetches++ == 0) {
      package.ecosystem.assign(policy::toString(fetched->ecosystem));
      package.name = std::move(fetched->name);
      package.version = std::move(fetched->version);
    }
  }
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
                  "sandbox %s: %s (%llu allowed, %llu denied, %llu reported), %s up, "
                  "%s down, %s .. %s\n",
                  cell(sandbox, 64).c_str(), countOf(all.requests, "request").c_str(),
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
    if (!s.packages.empty()) {
      std::snprintf(buf, sizeof(buf), "  %-40s %-24s %8s  %s\n", "package", "version", "fetches",
                    "registry");
      out += buf;
      for (const auto& [purl, p] : s.packages) {
        std::snprintf(buf, sizeof(buf), "  %-40s %-24s %8llu  %s\n", cell(p.name, 40).c_str(),
                      cell(p.version, 24).c_str(), static_cast<unsigned long long>(p.fetches),
                      p.ecosystem.c_str());
        out += buf;
      }
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
  out += countOf(summary.records(), "record");
  if (summary.filtered() != 0) {
    out += ", " + std::to_string(summary.filtered()) + " left out by --since/--sandbox";
  }
  if (summary.skipped() != 0) {
    out += ", " + countOf(summary.skipped(), "line") + " skipped (not records)";
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
    json.key("packages").beginArray();
    for (const auto& [purl, p] : s.packages) {
      json.beginObject();
      json.field("ecosystem", p.ecosystem);
      json.field("name", p.name);
      json.field("version", p.version);
      json.field("purl", purl);
      json.field("fetches", static_cast<std::int64_t>(p.fetches));
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
