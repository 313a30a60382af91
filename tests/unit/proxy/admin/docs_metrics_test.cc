// docs/metrics.md kept honest against what /metrics serves: every family renderPrometheus()
// writes has its row in "The series", with its type, every label its samples carry, and every
// value of a label whose values are a fixed vocabulary; and every row names a family that is
// served. A series added to the code without its documentation fails here.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/admin/metrics.h"
#include "tests/support/markdown.h"

namespace sluice::proxy::admin {
namespace {

using test_support::codeSpans;
using test_support::docsPage;
using test_support::docsSection;
using test_support::tableRows;

// Labels whose values are names from the configuration, paths, versions or the reasons of
// docs/wire.md#denials (checked there), or histogram buckets: not listed value by value.
const std::set<std::string> kOpenLabels = {"sandbox", "path", "version", "reason", "le"};

struct Family {
  std::string type;
  std::map<std::string, std::set<std::string>> labels;  // label -> values seen
};

// What a scrape serves with every kind of series present: one sandbox that counted a request
// and every resolver answer, and one audit file.
std::map<std::string, Family> servedFamilies() {
  GatewayMetrics gateway;
  SandboxMetrics sandbox;
  sandbox.countRequest("allow", policy::Reason::None);
  sandbox.countRequest("deny", policy::Reason::NotAllowedHost);
  sandbox.countRequest("report", policy::Reason::NotAllowedPath);
  sandbox.countResolverAnswer(ResolverAnswer::Allowed);
  sandbox.countResolverAnswer(ResolverAnswer::NxDomain);
  sandbox.countResolverAnswer(ResolverAnswer::Refused);
  const SandboxSample sandboxes[] = {{"a", &sandbox, 1}};
  const AuditSample audits[] = {{"/var/log/sluice/a.jsonl", true, 1, 100, 1, 1}};
  const std::string text = renderPrometheus(gateway, sandboxes, "v", audits);

  std::map<std::string, Family> families;
  std::string current;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end;
    std::string_view line = std::string_view(text).substr(at, end - at);
    at = end + 1;
    if (line.starts_with("# TYPE ")) {
      line.remove_prefix(7);
      current = std::string(line.substr(0, line.find(' ')));
      families[current].type = std::string(line.substr(line.find(' ') + 1));
      continue;
    }
    if (line.empty() || line.starts_with('#')) {
      continue;
    }
    std::size_t open = line.find('{');
    if (open == std::string_view::npos) {
      continue;
    }
    std::string_view labels = line.substr(open + 1, line.find('}') - open - 1);
    while (!labels.empty()) {
      std::size_t eq = labels.find("=\"");
      std::size_t close = labels.find('"', eq + 2);
      families[current].labels[std::string(labels.substr(0, eq))].insert(
          std::string(labels.substr(eq + 2, close - eq - 2)));
      labels = close + 1 < labels.size() ? labels.substr(close + 2) : std::string_view();
    }
  }
  return families;
}

// The rows of docs/metrics.md's series table: name -> {type, labels cell, description cell}.
std::map<std::string, std::vector<std::string>> documentedSeries() {
  std::map<std::string, std::vector<std::string>> rows;
  for (auto& cells : tableRows(docsSection(docsPage("metrics.md"), "## The series"))) {
    if (cells.size() == 4 && cells[0].size() > 2 && cells[0].front() == '`') {
      rows[cells[0].substr(1, cells[0].size() - 2)] = {cells[1], cells[2], cells[3]};
    }
  }
  return rows;
}

TEST(DocsMetrics, EveryServedFamilyHasItsRowWithItsTypeLabelsAndValues) {
  const auto documented = documentedSeries();
  ASSERT_FALSE(documented.empty()) << "docs/metrics.md has no table under '## The series'";
  for (const auto& [name, family] : servedFamilies()) {
    SCOPED_TRACE(name);
    auto row = documented.find(name);
    ASSERT_TRUE(row != documented.end())
        << "/metrics serves " << name << ", but docs/metrics.md has no row for it";
    EXPECT_EQ(row->second[0], family.type);
    const std::vector<std::string> labels = codeSpans(row->second[1]);
    const std::vector<std::string> said = codeSpans(row->second[2]);
    for (const auto& [label, values] : family.labels) {
      if (label == "le") {
        continue;
      }
      EXPECT_NE(std::find(labels.begin(), labels.end(), label), labels.end())
          << "label '" << label << "' is not in the row's labels";
      if (kOpenLabels.contains(label)) {
        continue;
      }
      for (const std::string& value : values) {
        EXPECT_NE(std::find(said.begin(), said.end(), value), said.end())
            << "value '" << value << "' of label '" << label << "' is not in the row";
      }
    }
  }
}

TEST(DocsMetrics, EveryDocumentedSeriesIsServed) {
  const auto served = servedFamilies();
  for (const auto& [name, row] : documentedSeries()) {
    EXPECT_TRUE(served.contains(name))
        << "docs/metrics.md lists " << name << ", which /metrics does not serve";
  }
}

}  // namespace
}  // namespace sluice::proxy::admin
