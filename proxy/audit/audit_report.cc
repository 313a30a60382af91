#include "proxy/audit/audit_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>


namespace sluice::proxy::audit {

namespace {

constexpr const char* kAllowColour = "#2e7d32";
constexpr const char* kDenyColour = "#c62828";
constexpr const char* kReportColour = "#f9a825";

// At most this many bars in the timeline: minutes are merged into wider buckets beyond it.
constexpr std::size_t kMaxBars = 120;
constexpr std::size_t kTopHosts = 10;

std::string number(std::uint64_t n) { return std::to_string(n); }

struct HostRow {
  std::string sandbox;
  std::string host;
  const HostSummary* summary;
};

// <text> at (x, y) with `attributes`, its content from a log (escaped).
void svgText(std::string& out, double x, double y, std::string_view attributes,
             std::string_view text) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "<text x=\"%.1f\" y=\"%.1f\"", x, y);
  out += buf;
  if (!attributes.empty()) {
    out += ' ';
    out += attributes;
  }
  out += '>';
  appendHtmlText(out, text);
  out += "</text>";
}

void svgRect(std::string& out, double x, double y, double width, double height,
             const char* colour) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x,
                y, width, height, colour);
  out += buf;
}

// "2026-12-03T06:00", the minute a bar starts at.
std::string minuteText(std::chrono::sys_time<std::chrono::minutes> at) {
  return canonicalTime(at).substr(0, 16);
}

struct Bar {
  std::chrono::sys_time<std::chrono::minutes> from;
  MinuteCounts counts;
};

// The timeline's bars: from the first minute with records to the last, quiet minutes included
// (a gap in the traffic is a gap in the chart), merged into at most kMaxBars bars of equal
// width. Minutes whose ts is no time (an edited line) are counted in `undated`.
std::vector<Bar> timelineBars(const Summary& summary, std::chrono::minutes& per_bar,
                              MinuteCounts& undated) {
  using namespace std::chrono;
  std::vector<std::pair<sys_time<minutes>, const MinuteCounts*>> dated;
  for (const auto& [minute, counts] : summary.timeline()) {
    if (auto at = parseTime(minute)) {
      dated.emplace_back(floor<minutes>(*at), &counts);
    } else {
      undated.allowed += counts.allowed;
      undated.denied += counts.denied;
      undated.reported += counts.reported;
    }
  }
  if (dated.empty()) {
    return {};
  }
  std::sort(dated.begin(), dated.end());
  const auto first = dated.front().first;
  const auto span = duration_cast<minutes>(dated.back().first - first).count() + 1;
  per_bar = minutes((span + static_cast<long>(kMaxBars) - 1) / static_cast<long>(kMaxBars));
  std::vector<Bar> bars(static_cast<std::size_t>((span + per_bar.count() - 1) / per_bar.count()));
  for (std::size_t i = 0; i < bars.size(); ++i) {
    bars[i].from = first + per_bar * static_cast<long>(i);
  }
  for (const auto& [at, counts] : dated) {
    Bar& bar = bars[static_cast<std::size_t>((at - first) / per_bar)];
    bar.counts.allowed += counts->allowed;
    bar.counts.denied += counts->denied;
    bar.counts.reported += counts->reported;
  }
  return bars;
}

void timelineSvg(std::string& out, const Summary& summary) {
  std::chrono::minutes per_bar{1};
  MinuteCounts undated;
  const std::vector<Bar> bars = timelineBars(summary, per_bar, undated);
  if (bars.empty()) {
    out += "<p class=\"empty\">No dated requests.</p>\n";
  } else {
    std::uint64_t highest = 1;
    for (const Bar& bar : bars) {
      highest = std::max(highest, bar.counts.allowed + bar.counts.denied + bar.counts.reported);
    }
    const double width = 960, height = 240, left = 50, bottom = 30;
    // Bars at most 40 px wide: a log of a few minutes is a few bars, not one wall.
    const double bar_width = std::min(40.0, (width - left) / static_cast<double>(bars.size()));
    const double scale = (height - bottom - 10) / static_cast<double>(highest);
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" role=\"img\" aria-label=\"requests over time\" "
                  "data-minutes-per-bar=\"%lld\">\n",
                  width, height, static_cast<long long>(per_bar.count()));
    out += buf;
    svgText(out, 4, 16, "class=\"axis\"", number(highest));
    svgText(out, 4, height - bottom, "class=\"axis\"", "0");
    out += '\n';
    double x = left;
    for (const Bar& bar : bars) {
      const std::string from = minuteText(bar.from);
      out += "<g class=\"bar\" data-from=\"" + from + "\" data-allowed=\"" +
             number(bar.counts.allowed) + "\" data-denied=\"" + number(bar.counts.denied) +
             "\" data-reported=\"" + number(bar.counts.reported) + "\"><title>" + from + ": " +
             number(bar.counts.allowed) + " allowed, " + number(bar.counts.denied) +
             " denied, " + number(bar.counts.reported) + " reported</title>";
      double y = height - bottom;
      const std::pair<std::uint64_t, const char*> parts[] = {{bar.counts.allowed, kAllowColour},
                                                              {bar.counts.reported, kReportColour},
                                                              {bar.counts.denied, kDenyColour}};
      for (const auto& [n, colour] : parts) {
        if (n != 0) {
          const double h = static_cast<double>(n) * scale;
          y -= h;
          svgRect(out, x, y, std::max(bar_width - 1, 1.0), h, colour);
        }
      }
      out += "</g>\n";
      x += bar_width;
    }
    svgText(out, left, height - 8, "class=\"axis\"", minuteText(bars.front().from));
    if (bars.size() > 1) {  // the last minute, under the end of the last bar, clear of the first
      svgText(out, std::max(x, left + 240), height - 8, "class=\"axis\" text-anchor=\"end\"",
              minuteText(bars.back().from + per_bar - std::chrono::minutes(1)));
    }
    out += "\n</svg>\n";
  }
  const std::uint64_t no_time = undated.allowed + undated.denied + undated.reported;
  if (no_time != 0) {
    out += "<p class=\"meta\" id=\"undated\" data-allowed=\"" + number(undated.allowed) +
           "\" data-denied=\"" + number(undated.denied) + "\" data-reported=\"" +
           number(undated.reported) + "\">" + countOf(no_time, "request") +
           " whose ts is no time not in the timeline.</p>\n";
  }
}

// Horizontal bars: the top hosts by `value`, labelled with `label`.
template <typename Value, typename Label>
void topHostsSvg(std::string& out, std::string_view id, std::vector<HostRow> rows, Value value,
                 Label label, const char* colour) {
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const HostRow& a, const HostRow& b) { return value(a) > value(b); });
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const HostRow& r) { return value(r) == 0; }),
             rows.end());
  if (rows.size() > kTopHosts) {
    rows.resize(kTopHosts);
  }
  if (rows.empty()) {
    out += "<p class=\"empty\">None.</p>\n";
    return;
  }
  const int row_height = 24, width = 960, label_width = 360;
  const std::uint64_t highest = std::max<std::uint64_t>(value(rows.front()), 1);
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "<svg id=\"%.*s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                "height=\"%zu\">\n",
                static_cast<int>(id.size()), id.data(), width, rows.size() * row_height + 4);
  out += buf;
  int y = 0;
  for (const HostRow& row : rows) {
    const double w = static_cast<double>(value(row)) / static_cast<double>(highest) *
                     (width - label_width - 220);
    out += "<g class=\"host\" data-sandbox=\"";
    appendHtmlText(out, row.sandbox);
    out += "\" data-host=\"";
    appendHtmlText(out, row.host);
    out += "\" data-value=\"" + number(value(row)) + "\">";
    std::string name = row.sandbox + " / " + row.host;
    if (name.size() > 48) {
      name = name.substr(0, 45) + "...";
    }
    svgText(out, label_width - 8, y + 16, "text-anchor=\"end\"", name);
    svgRect(out, label_width, y + 4, std::max(w, 1.0), row_height - 6, colour);
    svgText(out, label_width + std::max(w, 1.0) + 6, y + 16, "", label(row));
    out += "</g>\n";
    y += row_height;
  }
  out += "</svg>\n";
}

void sandboxTables(std::string& out, const Summary& summary) {
  for (const auto& [sandbox, s] : summary.sandboxes()) {
    out += "<section class=\"sandbox\" data-sandbox=\"";
    appendHtmlText(out, sandbox);
    out += "\"><h2>Sandbox ";
    appendHtmlText(out, sandbox);
    out += "</h2>\n<table class=\"hosts\"><thead><tr><th>host</th><th>requests</th>"
           "<th>allowed</th><th>denied</th><th>reported</th><th>up</th><th>down</th>"
           "<th>first seen</th><th>last seen</th><th>refused for</th></tr></thead><tbody>\n";
    for (const auto& [host, h] : s.hosts) {
      out += "<tr data-host=\"";
      appendHtmlText(out, host);
      out += "\" data-requests=\"" + number(h.requests) + "\" data-allowed=\"" +
             number(h.allowed) + "\" data-denied=\"" + number(h.denied) + "\" data-reported=\"" +
             number(h.reported) + "\" data-req-bytes=\"" + number(h.req_bytes) +
             "\" data-resp-bytes=\"" + number(h.resp_bytes) + "\"><td>";
      appendHtmlText(out, host);
      out += "</td><td>" + number(h.requests) + "</td><td>" + number(h.allowed) + "</td><td>" +
             number(h.denied) + "</td><td>" + number(h.reported) + "</td><td>" +
             humanBytes(h.req_bytes) + "</td><td>" + humanBytes(h.resp_bytes) + "</td><td>";
      appendHtmlText(out, h.first_seen);
      out += "</td><td>";
      appendHtmlText(out, h.last_seen);
      out += "</td><td>";
      bool first = true;
      for (const auto& [reason, n] : h.reasons) {
        out += first ? "" : ", ";
        first = false;
        appendHtmlText(out, reason);
        out += " " + number(n);
      }
      out += "</td></tr>\n";
    }
    out += "</tbody></table>\n";
    if (!s.names.empty()) {
      out += "<h3>DNS names refused</h3>\n<table class=\"dns\"><thead><tr><th>name</th>"
             "<th>queries</th><th>answers</th><th>first seen</th><th>last seen</th></tr>"
             "</thead><tbody>\n";
      for (const auto& [name, n] : s.names) {
        out += "<tr data-name=\"";
        appendHtmlText(out, name);
        out += "\" data-queries=\"" + number(n.queries) + "\"><td>";
        appendHtmlText(out, name);
        out += "</td><td>" + number(n.queries) + "</td><td>";
        bool first = true;
        for (const auto& [answer, count] : n.answers) {
          out += first ? "" : ", ";
          first = false;
          appendHtmlText(out, answer);
          out += " " + number(count);
        }
        out += "</td><td>";
        appendHtmlText(out, n.first_seen);
        out += "</td><td>";
        appendHtmlText(out, n.last_seen);
        out += "</td></tr>\n";
      }
      out += "</tbody></table>\n";
    }
    out += "</section>\n";
  }
}

}  // namespace

void appendHtmlText(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: {
        const unsigned char u = static_cast<unsigned char>(c);
        out += (u < 0x20 || u == 0x7f) ? '?' : c;
      }
    }
  }
}

std::string summaryReport(const Summary& summary, const std::vector<std::string>& sources) {
  std::string out;
  out += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<title>sluice audit report</title>\n<style>\n"
         "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#212121}"
         "h1{font-size:22px}h2{font-size:18px;margin-top:28px}"
         "table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 8px;white-space:nowrap;border-bottom:"
         "1px solid #ddd;text-align:right}th:first-child,td:first-child{text-align:left}"
         "td:last-child{text-align:left}.meta,.axis{color:#616161;font-size:12px}"
         ".legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}"
         "svg text{font:12px system-ui,sans-serif}\n</style></head>\n<body>\n"
         "<h1>sluice audit report</h1>\n<p class=\"meta\" id=\"meta\" data-records=\"" +
         number(summary.records()) + "\" data-skipped=\"" + number(summary.skipped()) +
         "\" data-filtered=\"" + number(summary.filtered()) + "\">" + countOf(summary.records(), "record") + " from ";
  for (std::size_t i = 0; i < sources.size(); ++i) {
    out += i == 0 ? "" : ", ";
    appendHtmlText(out, sources[i]);
  }
  if (summary.skipped() != 0) {
    out += "; " + countOf(summary.skipped(), "line") + " skipped (not records)";
  }
  out += ".</p>\n<h2>Requests over time</h2>\n<p class=\"legend\"><span style=\"background:";
  out += std::string(kAllowColour) + "\"></span>allowed<span style=\"background:" +
         kDenyColour + "\"></span>denied<span style=\"background:" + kReportColour +
         "\"></span>reported</p>\n";
  timelineSvg(out, summary);
  std::vector<HostRow> rows;
  for (const auto& [sandbox, s] : summary.sandboxes()) {
    for (const auto& [host, h] : s.hosts) {
      rows.push_back({sandbox, host, &h});
    }
  }
  out += "<h2>Top hosts by bytes</h2>\n";
  topHostsSvg(
      out, "top-bytes", rows,
      [](const HostRow& r) { return r.summary->req_bytes + r.summary->resp_bytes; },
      [](const HostRow& r) {
        return humanBytes(r.summary->resp_bytes) + " down, " + humanBytes(r.summary->req_bytes) +
               " up";
      },
      kAllowColour);
  out += "<h2>Top hosts by denials</h2>\n";
  topHostsSvg(
      out, "top-denials", rows, [](const HostRow& r) { return r.summary->denied; },
      [](const HostRow& r) { return number(r.summary->denied) + " denied"; }, kDenyColour);
  sandboxTables(out, summary);
  out += "</body></html>\n";
  return out;
}

}  // namespace sluice::proxy::audit
