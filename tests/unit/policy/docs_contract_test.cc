// docs/ kept honest against the code it describes: every key the config loader accepts has its
// row (type, default, constraints) in docs/configuration.md under its own section; every reason
// of policy/reason.h has its row in docs/wire.md#denials with the status and Proxy-Status token
// the one table gives it, and a row of that table no reason answers to says it is not
// implemented yet; and the header table of docs/wire.md names exactly what
// policy/request_header.h drops. A key, reason or header added to the code without its
// documentation fails here, and so does documentation of one that is not there.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "policy/config_loader.h"
#include "policy/reason.h"
#include "policy/request_header.h"
#include "tests/support/markdown.h"
#include "tests/unit/policy/request_header_cases.h"

namespace sluice::policy {
namespace {

using test_support::codeSpans;
using test_support::docsPage;
using test_support::docsSection;
using test_support::tableRows;

constexpr std::string_view kUnknownKey = "zz_not_a_key";

// The keys the loader accepts in one map: the list its "unknown key" error gives for a key it
// does not know, planted in that map by `yaml`.
std::vector<std::string> acceptedKeys(const std::string& yaml) {
  LoadOptions options;
  options.default_ca_base = "/var/lib/sluice";
  ConfigResult result = loadConfig(ConfigText{"docs.yaml", yaml}, options);
  const std::string marker = "unknown key '" + std::string(kUnknownKey) + "' (expected one of: ";
  std::vector<std::string> keys;
  if (result.ok()) {
    ADD_FAILURE() << "loaded without the planted key's error:\n" << yaml;
    return keys;
  }
  for (const ConfigError& error : result.error()) {
    std::size_t at = error.message.find(marker);
    if (at == std::string::npos) {
      continue;
    }
    std::string_view list = std::string_view(error.message).substr(at + marker.size());
    list = list.substr(0, list.rfind(')'));
    while (!list.empty()) {
      std::size_t comma = list.find(", ");
      keys.emplace_back(list.substr(0, comma));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 2);
    }
    return keys;
  }
  ADD_FAILURE() << "no unknown-key error for:\n" << yaml;
  return keys;
}

// The first cells of the table rows under `heading` that are one code span: the keys it lists.
std::set<std::string> documentedKeys(const std::string& page, std::string_view heading) {
  std::set<std::string> keys;
  for (const auto& row : tableRows(docsSection(page, heading))) {
    if (!row.empty() && row[0].size() > 2 && row[0].front() == '`' && row[0].back() == '`') {
      keys.insert(row[0].substr(1, row[0].size() - 2));
    }
  }
  return keys;
}

constexpr std::string_view kSandbox =
    "version: 1\nsandboxes:\n  - name: a\n    listen: 127.0.0.1:3128\n    policy: p\n";
constexpr std::string_view kPolicy = "policies:\n  p:\n    rules:\n      - hosts: [example.com]\n";
constexpr std::string_view kSecret =
    "secrets:\n  s:\n    env: SLUICE_DOCS_TEST\n    placeholder: sk-sluice-docs-test\n";

// A minimal file with `extra` at the end of the sandbox's map, of the policy's map, of its
// rule's map, or at the top level.
std::string sandboxWith(std::string_view extra) {
  return std::string(kSandbox) + std::string(extra) + std::string(kPolicy);
}
std::string policyWith(std::string_view extra) {
  return std::string(kSandbox) + "policies:\n  p:\n" + std::string(extra) + "    rules: []\n";
}
std::string ruleWith(std::string_view extra) {
  return std::string(kSandbox) + std::string(kPolicy) + std::string(extra) + std::string(kSecret);
}
std::string topLevel(std::string_view extra) {
  return std::string(kSandbox) + std::string(kPolicy) + std::string(extra);
}

struct ConfigMap {
  const char* where;    // the key path, for messages
  std::string yaml;     // a file with kUnknownKey planted in that map
  const char* heading;  // where docs/configuration.md lists its keys
};

TEST(DocsConfiguration, EveryKeyTheLoaderAcceptsHasItsRowInItsSection) {
  const std::string page = docsPage("configuration.md");
  ASSERT_FALSE(page.empty()) << "docs/configuration.md cannot be read";
  const std::string key(kUnknownKey);
  const ConfigMap maps[] = {
      {"(top level)", topLevel(key + ": 1\n"), "## Top-level keys"},
      {"dns", topLevel("dns:\n  " + key + ": 1\n"), "## dns"},
      {"upstream", topLevel("upstream:\n  " + key + ": 1\n"), "## upstream"},
      {"audit", topLevel("audit:\n  " + key + ": 1\n"), "## audit"},
      {"admin", topLevel("admin:\n  " + key + ": 1\n"), "## admin"},
      {"limits", topLevel("limits:\n  " + key + ": 1\n"), "## limits"},
      {"limits.per_sandbox", topLevel("limits:\n  per_sandbox:\n    " + key + ": 1\n"),
       "### limits.per_sandbox, and a sandbox's `limits`"},
      {"sandboxes[0]", sandboxWith("    " + key + ": 1\n"), "## sandboxes"},
      {"sandboxes[0].limits", sandboxWith("    limits:\n      " + key + ": 1\n"),
       "### limits.per_sandbox, and a sandbox's `limits`"},
      {"policies.p", policyWith("    " + key + ": 1\n"), "## policies and rules"},
      {"policies.p.rules[0]", ruleWith("        " + key + ": 1\n"), "## policies and rules"},
      {"policies.p.rules[0].inject[0]",
       ruleWith("        inject:\n          - header: x-api-key\n            secret: s\n"
                "            " +
                key + ": 1\n"),
       "### inject"},
      {"policies.p.packages",
       std::string(kSandbox) + "policies:\n  p:\n    packages:\n      " + key +
           ": 1\n    rules:\n      - hosts: [registry.npmjs.org]\n        registry: npm\n",
       "### packages"},
      {"policies.p.rules[0].registry",
       ruleWith("        registry:\n          ecosystem: npm\n          " + key + ": 1\n"),
       "### registry"},
      {"secrets.s",
       topLevel("secrets:\n  s:\n    env: SLUICE_DOCS_TEST\n"
                "    placeholder: sk-sluice-docs-test\n    " +
                key + ": 1\n"),
       "## secrets"},
  };
  for (const ConfigMap& map : maps) {
    SCOPED_TRACE(map.where);
    const std::vector<std::string> accepted = acceptedKeys(map.yaml);
    EXPECT_FALSE(accepted.empty());
    const std::set<std::string> documented = documentedKeys(page, map.heading);
    EXPECT_FALSE(documented.empty()) << "no table of keys under '" << map.heading << "'";
    for (const std::string& accepted_key : accepted) {
      EXPECT_TRUE(documented.contains(accepted_key))
          << "the loader accepts '" << accepted_key << "' in " << map.where
          << ", but docs/configuration.md has no row for it under '" << map.heading << "'";
    }
  }
}

// A row of docs/wire.md's denials table: reason, status, Proxy-Status error, when.
struct DenialRow {
  std::string token;
  std::string status;
  std::string proxy_status;
  std::string when;
};

std::vector<DenialRow> denialRows() {
  std::vector<DenialRow> rows;
  for (const auto& cells : tableRows(docsSection(docsPage("wire.md"), "## Denials"))) {
    if (cells.size() == 4 && cells[0].size() > 2 && cells[0].front() == '`') {
      auto unquote = [](const std::string& cell) {
        return cell.size() > 2 && cell.front() == '`' && cell.back() == '`'
                   ? cell.substr(1, cell.size() - 2)
                   : cell;
      };
      rows.push_back({unquote(cells[0]), cells[1], unquote(cells[2]), cells[3]});
    }
  }
  return rows;
}

TEST(DocsWire, EveryReasonHasItsRowWithTheStatusAndProxyStatusOfTheTable) {
  const std::vector<DenialRow> rows = denialRows();
  ASSERT_FALSE(rows.empty()) << "docs/wire.md has no denials table under '## Denials'";
  for (int i = 1; i < kReasonCount; ++i) {
    const ReasonInfo& info = reasonInfo(static_cast<Reason>(i));
    SCOPED_TRACE(std::string(info.token));
    const DenialRow* found = nullptr;
    for (const DenialRow& row : rows) {
      if (row.token == info.token) {
        found = &row;
      }
    }
    ASSERT_NE(found, nullptr) << "docs/wire.md#denials has no row for '" << info.token << "'";
    EXPECT_EQ(found->status,
              info.http_status == 0 ? std::string("none") : std::to_string(info.http_status));
    EXPECT_EQ(found->proxy_status, info.proxy_status);
    EXPECT_EQ(found->when.find("Not yet implemented"), std::string::npos)
        << "the reason exists, but docs/wire.md says it is not implemented";
  }
}

TEST(DocsWire, ADenialRowNoReasonAnswersToIsMarkedNotYetImplemented) {
  for (const DenialRow& row : denialRows()) {
    if (!reasonFromToken(row.token)) {
      EXPECT_NE(row.when.find("Not yet implemented"), std::string::npos)
          << "docs/wire.md#denials lists '" << row.token
          << "', which policy/reason.h does not have, as if sluice sent it";
    }
  }
}

// The names in the "fields" column of docs/wire.md's header table; a name ending in '*' is a
// prefix.
std::vector<std::string> documentedDroppedHeaders() {
  std::vector<std::string> names;
  const std::string section =
      docsSection(docsPage("wire.md"), "### Headers the origin never gets from the sandbox");
  for (const auto& cells : tableRows(section)) {
    if (cells.size() == 3 && cells[0] != "group" && !cells[0].starts_with('-')) {
      for (std::string& span : codeSpans(cells[1])) {
        names.push_back(std::move(span));
      }
    }
  }
  return names;
}

bool coveredBy(std::string_view name, const std::string& documented) {
  std::string_view stem(documented);
  const bool prefix = stem.ends_with('*');
  if (prefix) {
    stem.remove_suffix(1);
    if (name.size() < stem.size()) {
      return false;
    }
    name = name.substr(0, stem.size());
  }
  return sameRequestHeaderName(name, stem);
}

TEST(DocsWire, EveryHeaderTheTableDocumentsIsDropped) {
  const std::vector<std::string> documented = documentedDroppedHeaders();
  ASSERT_FALSE(documented.empty()) << "docs/wire.md has no header table";
  for (const std::string& name : documented) {
    const std::string example =
        name.ends_with('*') ? name.substr(0, name.size() - 1) + "Any" : name;
    EXPECT_FALSE(isEndToEndRequestHeader(example))
        << "docs/wire.md says '" << name << "' never reaches the origin, but it is forwarded";
  }
}

TEST(DocsWire, EveryHeaderTheCodeDropsIsInTheTable) {
  const std::vector<std::string> documented = documentedDroppedHeaders();
  for (const auto& row : request_header_cases::kFamily) {
    bool found = false;
    for (const std::string& name : documented) {
      found = found || coveredBy(row.name, name);
    }
    EXPECT_TRUE(found) << "'" << row.name << "' is dropped (" << toString(row.cls)
                       << "), but docs/wire.md's header table does not name it";
  }
}

}  // namespace
}  // namespace sluice::policy
