#include "policy/config_loader.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policy/host_name.h"
#include "tests/unit/policy/config_errors.h"

namespace sluice::policy {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

LoadOptions defaultOptions() { return test::defaultLoadOptions(); }
using test::errorsOf;

std::shared_ptr<const Config> load(const std::string& yaml,
                                   const LoadOptions& options = defaultOptions(),
                                   const std::string& file = "test.yaml") {
  ConfigResult result = loadConfig(ConfigText{file, yaml}, options);
  if (!result.ok()) {
    for (const ConfigError& e : result.error()) {
      ADD_FAILURE() << e.toString();
    }
    return nullptr;
  }
  return result.value();
}

std::string hostError(std::string_view pattern) {
  auto parsed = HostPattern::parse(pattern);
  EXPECT_FALSE(parsed.ok()) << pattern;
  return parsed.ok() ? std::string() : parsed.error();
}

struct Case {
  const char* name;
  std::string yaml;
  std::vector<std::string> errors;
};

void runCases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(errorsOf(c.yaml), ElementsAreArray(c.errors)) << c.yaml;
  }
}

// The smallest file that loads; rows below vary one thing of it.
const std::string kMinimal = R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
)";

TEST(ConfigError, ToString) {
  EXPECT_EQ((ConfigError{"a.yaml", 3, 7, "dns: x"}).toString(), "a.yaml:3:7: dns: x");
  EXPECT_EQ((ConfigError{"a.yaml", 0, 0, "cannot read"}).toString(), "a.yaml: cannot read");
}

TEST(LoadConfig, MinimalLoads) { ASSERT_NE(load(kMinimal), nullptr); }

TEST(LoadConfig, Documents) {
  runCases({
      {"empty file", "", {"test.yaml: empty config: expected 'version: 1' first"}},
      {"only comments",
       "# nothing here\n\n",
       {"test.yaml: empty config: expected 'version: 1' first"}},
      {"only a document marker", "---\n", {"test.yaml: empty config: expected 'version: 1' first"}},
      {"explicit null", "~\n", {"test.yaml: empty config: expected 'version: 1' first"}},
      {"root is a list", "- version: 1\n", {"test.yaml:1:1: expected a map, got a list"}},
      // yaml-cpp stops reading at a NUL: a rule's `paths:` after one would vanish unseen
      // (found by fuzz_config).
      {"NUL byte before a rule's paths",
       kMinimal + std::string("\0        paths: [/v1/public/]\n", 30),
       {"test.yaml:10:1: a NUL byte: YAML reading stops there and would ignore the rest"}},
      {"NUL byte inside a value",
       std::string("version: 1\nx: a\0b\n", 18),
       {"test.yaml:2:5: a NUL byte: YAML reading stops there and would ignore the rest"}},
      // yaml-cpp 0.7's LoadAll() never returns on these, allocating until memory runs out
      // (found by fuzz_config: a 128-byte file took 6.8 GB in 20 s).
      {"a stream that starts with a comma",
       ",\n",
       {"test.yaml:1:1: not YAML (a ',' or other flow indicator outside a flow collection?)"}},
      {"a comma after a comment, then a map",
       "# sandboxes\n  , a\nversion: 1\n",
       {"test.yaml:2:3: not YAML (a ',' or other flow indicator outside a flow collection?)"}},
      {"root is a scalar", "version 1\n", {"test.yaml:1:1: expected a map, got 'version 1'"}},
      {"two documents",
       kMinimal + "---\nversion: 1\n",
       {"test.yaml:10:1: a second YAML document: a config file holds exactly one"}},
      {"two documents, the second empty",
       kMinimal + "---\n",
       {"test.yaml:10:1: a second YAML document: a config file holds exactly one"}},
      {"three documents with explicit start",
       "---\n" + kMinimal + "--- \na: 1\n---\nb: 2\n",
       {"test.yaml:11:1: a second YAML document: a config file holds exactly one"}},
      {"tab indentation",
       "version: 1\npolicies:\n\tp: {}\n",
       {"test.yaml:3:3: illegal map value (tabs cannot indent YAML; use spaces)"}},
      {"tab before a nested key",
       "version: 1\npolicies:\n  p:\n  \trules: []\n",
       {"test.yaml:4:9: illegal map value (tabs cannot indent YAML; use spaces)"}},
      {"unclosed flow list",
       "version: 1\npolicies: {p: {rules: [}\n",
       {"test.yaml:2:24: illegal flow end"}},
      {"unquoted wildcard is an alias",
       R"(version: 1
policies:
  p:
    rules:
      - hosts:
          - *.wild.test
)",
       {"test.yaml:6:13: the referenced anchor is not defined (a host pattern starting with '*' "
        "must be quoted: \"*.example.com\")"}},
      {"unquoted wildcard in a flow list",
       R"(version: 1
policies:
  p:
    rules:
      - hosts: [example.com, *.wild.test]
)",
       {"test.yaml:5:30: the referenced anchor is not defined (a host pattern starting with '*' "
        "must be quoted: \"*.example.com\")"}},
  });
}

TEST(LoadConfig, Version) {
  runCases({
      {"missing",
       R"(sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:1:1: the file must start with 'version: 1'"}},
      {"not first",
       R"(sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
version: 1
policies:
  p:
    rules: []
)",
       {"test.yaml:1:1: the file must start with 'version: 1'"}},
      {"not first, other errors still reported",
       R"(# a comment first is fine
policies: {}
version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
)",
       {"test.yaml:2:1: the file must start with 'version: 1'",
        "test.yaml:7:13: sandboxes[0].policy: unknown policy 'p' (none are defined)"}},
      {"version 2 stops there",
       "version: 2\nfoo: bar\n",
       {"test.yaml:1:10: version: unsupported version 2: this sluice reads version 1"}},
      {"version 0",
       "version: 0\n",
       {"test.yaml:1:10: version: unsupported version 0: this sluice reads version 1"}},
      {"quoted",
       "version: \"1\"\n" + kMinimal.substr(11),
       {"test.yaml:1:10: version: expected a number, got the quoted string '1' (write it "
        "without quotes)"}},
      {"octal-looking",
       "version: 01\n" + kMinimal.substr(11),
       {"test.yaml:1:10: version: '01' is not a plain decimal number (a leading 0 or 0x would "
        "be read as octal or hex)"}},
      {"a float",
       "version: 1.0\n" + kMinimal.substr(11),
       {"test.yaml:1:10: version: '1.0' is not a plain decimal number"}},
      {"null",
       "version:\n" + kMinimal.substr(11),
       {"test.yaml:1:1: version: expected a number, got null"}},
      {"tagged",
       "version: !!int 1\n" + kMinimal.substr(11),
       {"test.yaml:1:10: version: expected a number, got '1' tagged 'tag:yaml.org,2002:int' "
        "(write it without a tag)"}},
  });
}

TEST(LoadConfig, DuplicateKeys) {
  runCases({
      {"at the root",
       kMinimal + "admin: {}\nadmin: {listen: 127.0.0.1:9901}\n",
       {"test.yaml:11:1: duplicate key 'admin' (first at line 10)"}},
      {"version twice",
       "version: 1\nversion: 2\n" + kMinimal.substr(11),
       {"test.yaml:2:1: duplicate key 'version' (first at line 1)"}},
      {"in a rule",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
        ports: [443]
        ports: [8443]
)",
       {"test.yaml:11:9: policies.p.rules[0]: duplicate key 'ports' (first at line 10)"}},
      {"in a flow map",
       R"(version: 1
sandboxes:
  - {name: a, listen: 127.0.0.1:3128, policy: p, name: b}
policies:
  p:
    rules: []
)",
       {"test.yaml:3:50: sandboxes[0]: duplicate key 'name' (first at line 3)"}},
      {"in a sandbox",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    listen: 0.0.0.0:3128
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:5:5: sandboxes[0]: duplicate key 'listen' (first at line 4)"}},
      {"a policy name",
       kMinimal + "  p:\n    rules: []\n",
       {"test.yaml:10:3: policies: duplicate key 'p' (first at line 7)"}},
      {"in an inject entry",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [api.example.com]
        inject:
          - header: x-api-key
            secret: s
            header: authorization
secrets:
  s:
    env: S
    placeholder: placeholder-1
)",
       {"test.yaml:13:13: policies.p.rules[0].inject[0]: duplicate key 'header' (first at "
        "line 11)"}},
      {"in a secret",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules: []
secrets:
  s:
    env: S
    placeholder: placeholder-1
    env: T
)",
       {"test.yaml:13:5: secrets.s: duplicate key 'env' (first at line 11)"}},
      {"in limits",
       kMinimal + "limits:\n  idle_timeout: 1s\n  idle_timeout: 2s\n",
       {"test.yaml:12:3: limits: duplicate key 'idle_timeout' (first at line 11)"}},
      {"quoted and plain spelling of one key",
       kMinimal + "dns:\n  timeout: 1s\n  \"timeout\": 2s\n",
       {"test.yaml:12:3: dns: duplicate key 'timeout' (first at line 11)"}},
  });
}

TEST(LoadConfig, UnknownKeysAtEveryLevel) {
  runCases({
      {"everywhere at once",
       R"(version: 1
dns:
  server: [127.0.0.1]
upstream:
  cafile: /x
audit:
  hash: true
admin:
  port: 9901
limits:
  max_conns: 1
sandbox: []
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
    port: 1
policies:
  p:
    rule: []
    rules:
      - hosts: [api.example.com]
        host: evil.example
        inject:
          - header: x-api-key
            secret: s
            value: x
secrets:
  s:
    env: S
    placeholder: placeholder-1
    value: hunter2
)",
       {"test.yaml:3:3: dns: unknown key 'server' (expected one of: servers, timeout, max_ttl)",
        "test.yaml:5:3: upstream: unknown key 'cafile' (expected one of: ca_file, "
        "extra_ca_files, connect_timeout, max_idle, max_idle_per_sandbox)",
        "test.yaml:7:3: audit: unknown key 'hash' (expected one of: path, hash_bodies)",
        "test.yaml:9:3: admin: unknown key 'port' (expected one of: listen)",
        "test.yaml:11:3: limits: unknown key 'max_conns' (expected one of: max_connections, "
        "max_header_bytes, handshake_timeout, idle_timeout, shutdown_grace, per_sandbox)",
        "test.yaml:12:1: unknown key 'sandbox' (expected one of: version, dns, upstream, audit, "
        "admin, limits, sandboxes_dir, sandboxes, policies, secrets)",
        "test.yaml:17:5: sandboxes[0]: unknown key 'port' (expected one of: name, listen, "
        "transparent, dns_listen, ca, policy, mode, original_dst, refusal, audit, limits)",
        "test.yaml:20:5: policies.p: unknown key 'rule' (expected one of: rules, packages)",
        "test.yaml:23:9: policies.p.rules[0]: unknown key 'host' (expected one of: name, hosts, "
        "schemes, ports, methods, paths, ips, inject, websocket, registry)",
        "test.yaml:27:13: policies.p.rules[0].inject[0]: unknown key 'value' (expected one of: "
        "header, secret)",
        "test.yaml:32:5: secrets.s: unknown key 'value' (expected one of: env, file, "
        "placeholder)"}},
      {"a merge key is just an unknown key",
       R"(version: 1
base: &base {hosts: [example.com]}
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - <<: *base
)",
       {"test.yaml:2:1: unknown key 'base' (expected one of: version, dns, upstream, audit, "
        "admin, limits, sandboxes_dir, sandboxes, policies, secrets)",
        "test.yaml:10:9: policies.p.rules[0]: unknown key '<<' (expected one of: name, hosts, "
        "schemes, ports, methods, paths, ips, inject, websocket, registry)",
        "test.yaml:10:9: policies.p.rules[0]: missing required key 'hosts'"}},
      {"keys that are not strings",
       kMinimal + "? [a, b]\n: 1\n~: 2\n",
       {"test.yaml:10:3: map keys must be strings, got a list",
        "test.yaml:12:1: map keys must be strings, got null"}},
  });
}

TEST(LoadConfig, WrongTypes) {
  runCases({
      {"a string for a list",
       R"(version: 1
sandboxes: a
policies:
  p:
    rules:
      - hosts: example.com
        ports: 443
)",
       {"test.yaml:2:12: sandboxes: expected a list, got 'a' (write [a] for a list of one)",
        "test.yaml:6:16: policies.p.rules[0].hosts: expected a list, got 'example.com' (write "
        "[example.com] for a list of one)",
        "test.yaml:7:16: policies.p.rules[0].ports: expected a list, got '443' (write [443] for "
        "a list of one)"}},
      {"a map for a string",
       R"(version: 1
sandboxes:
  - name: {first: a}
    listen: [127.0.0.1:3128]
    policy:
      name: p
policies:
  p:
    rules: []
)",
       {"test.yaml:3:11: sandboxes[0].name: expected a string, got a map",
        "test.yaml:4:13: sandboxes[0].listen: expected a string, got a list",
        "test.yaml:6:7: sandboxes[0].policy: expected a string, got a map"}},
      {"null values",
       R"(version: 1
dns:
audit: ~
sandboxes:
  - name:
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
)",
       {"test.yaml:2:1: dns: expected a map, got null",
        "test.yaml:3:8: audit: expected a map, got null",
        "test.yaml:5:5: sandboxes[0].name: expected a string, got null",
        "test.yaml:10:5: policies.p.rules: expected a list, got null"}},
      {"a list for a map",
       kMinimal + "limits: [1]\nsecrets: []\n",
       {"test.yaml:10:9: limits: expected a map, got a list",
        "test.yaml:11:10: secrets: expected a map, got a list"}},
      {"a list of lists",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [[example.com]]
        ports: [[443]]
)",
       {"test.yaml:9:17: policies.p.rules[0].hosts[0]: expected a string, got a list",
        "test.yaml:10:17: policies.p.rules[0].ports[0]: expected a number, got a list"}},
      {"rules that are not maps",
       R"(version: 1
sandboxes:
  - a
  - name: b
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules: [example.com]
  q: [rules]
)",
       {"test.yaml:3:5: sandboxes[0]: expected a map, got 'a'",
        "test.yaml:9:13: policies.p.rules[0]: expected a map, got 'example.com'",
        "test.yaml:10:6: policies.q: expected a map, got a list"}},
  });
}

TEST(LoadConfig, Ports) {
  runCases({
      {"every way to misspell a port",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
        ports: [0443, 0x1bb, +443, 65536, 0, "443", 443, 443, 4.43e2, -1]
)",
       {"test.yaml:10:17: policies.p.rules[0].ports[0]: '0443' is not a plain decimal number (a "
        "leading 0 or 0x would be read as octal or hex)",
        "test.yaml:10:23: policies.p.rules[0].ports[1]: '0x1bb' is not a plain decimal number "
        "(a leading 0 or 0x would be read as octal or hex)",
        "test.yaml:10:30: policies.p.rules[0].ports[2]: '+443' is not a plain decimal number",
        "test.yaml:10:36: policies.p.rules[0].ports[3]: port 65536 is out of range 1-65535",
        "test.yaml:10:43: policies.p.rules[0].ports[4]: port 0 is out of range 1-65535",
        "test.yaml:10:46: policies.p.rules[0].ports[5]: expected a number, got the quoted "
        "string '443' (write it without quotes)",
        "test.yaml:10:58: policies.p.rules[0].ports[7]: duplicate port 443",
        "test.yaml:10:63: policies.p.rules[0].ports[8]: '4.43e2' is not a plain decimal number",
        "test.yaml:10:71: policies.p.rules[0].ports[9]: '-1' is not a plain decimal number"}},
      {"an empty list",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
        ports: []
        schemes: []
        methods: []
        paths: []
        ips: []
        inject: []
)",
       {"test.yaml:10:16: policies.p.rules[0].ports: an empty list allows nothing; remove the key "
        "for the default",
        "test.yaml:11:18: policies.p.rules[0].schemes: an empty list allows nothing; remove the "
        "key for the default",
        "test.yaml:12:18: policies.p.rules[0].methods: an empty list allows nothing; remove the "
        "key for the default",
        "test.yaml:13:16: policies.p.rules[0].paths: an empty list allows nothing; remove the key "
        "for the default",
        "test.yaml:14:14: policies.p.rules[0].ips: an empty list allows nothing; remove the key "
        "for the default",
        "test.yaml:15:17: policies.p.rules[0].inject: an empty list allows nothing; remove the "
        "key for the default"}},
  });
}

TEST(LoadConfig, RuleValues) {
  runCases({
      {"hosts",
       std::string(R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: ["*.com", "foo*.com", a..b, exa_mple.com, example.com, "", 127.1]
      - hosts: []
      - schemes: [https]
)"),
       {"test.yaml:9:17: policies.p.rules[0].hosts[0]: " + hostError("*.com"),
        "test.yaml:9:26: policies.p.rules[0].hosts[1]: " + hostError("foo*.com"),
        "test.yaml:9:38: policies.p.rules[0].hosts[2]: " + hostError("a..b"),
        "test.yaml:9:44: policies.p.rules[0].hosts[3]: " + hostError("exa_mple.com"),
        "test.yaml:9:71: policies.p.rules[0].hosts[5]: " + hostError(""),
        "test.yaml:9:75: policies.p.rules[0].hosts[6]: " + hostError("127.1"),
        "test.yaml:10:16: policies.p.rules[1].hosts: an empty list allows nothing; list at "
        "least one host",
        "test.yaml:11:9: policies.p.rules[2]: missing required key 'hosts'"}},
      {"schemes, methods and paths",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
        schemes: [https, HTTP, ftp, https]
        methods: [GET, get, "GE T"]
        paths: [/simple/, simple, /a/../b, /a//b, "/a?b", /a%41, /.]
)",
       {"test.yaml:10:26: policies.p.rules[0].schemes[1]: 'HTTP' is not a scheme: write https "
        "or http",
        "test.yaml:10:32: policies.p.rules[0].schemes[2]: 'ftp' is not a scheme: write https or "
        "http",
        "test.yaml:10:37: policies.p.rules[0].schemes[3]: duplicate scheme 'https'",
        "test.yaml:11:24: policies.p.rules[0].methods[1]: 'get': methods are case-sensitive; "
        "write GET",
        "test.yaml:11:29: policies.p.rules[0].methods[2]: 'GE T' is not an HTTP method",
        "test.yaml:12:27: policies.p.rules[0].paths[1]: 'simple': path prefixes start with '/' "
        "and contain no '?', '#', escape but %2f, dot segments or empty segments",
        "test.yaml:12:35: policies.p.rules[0].paths[2]: '/a/../b': path prefixes start with '/' "
        "and contain no '?', '#', escape but %2f, dot segments or empty segments",
        "test.yaml:12:44: policies.p.rules[0].paths[3]: '/a//b': path prefixes start with '/' "
        "and contain no '?', '#', escape but %2f, dot segments or empty segments",
        "test.yaml:12:51: policies.p.rules[0].paths[4]: '/a?b': path prefixes start with '/' "
        "and contain no '?', '#', escape but %2f, dot segments or empty segments",
        "test.yaml:12:59: policies.p.rules[0].paths[5]: '/a%41': path prefixes start with '/' "
        "and contain no '?', '#', escape but %2f, dot segments or empty segments",
        "test.yaml:12:66: policies.p.rules[0].paths[6]: '/.': path prefixes start with '/' and "
        "contain no '?', '#', escape but %2f, dot segments or empty segments"}},
      {"ips",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
        ips: [10.0.0.1/8, 10.0.0.0/33, not-an-ip, "fd00::1/8", 10.0.0.0/8, 010.0.0.0/8]
)",
       {"test.yaml:10:15: policies.p.rules[0].ips[0]: 10.0.0.1/8 has host bits set: did you "
        "mean 10.0.0.0/8?",
        "test.yaml:10:27: policies.p.rules[0].ips[1]: '10.0.0.0/33' has a bad prefix length: "
        "0-32 for IPv4 and 0-128 for IPv6, in plain decimal",
        "test.yaml:10:40: policies.p.rules[0].ips[2]: 'not-an-ip' is not an IP address or CIDR "
        "block, e.g. 151.101.0.0/16 or 2a04:4e42::/32",
        "test.yaml:10:51: policies.p.rules[0].ips[3]: fd00::1/8 has host bits set: did you "
        "mean fd00::/8?",
        "test.yaml:10:76: policies.p.rules[0].ips[5]: '010.0.0.0/8' is not an IP address or "
        "CIDR block, e.g. 151.101.0.0/16 or 2a04:4e42::/32"}},
      {"rule names",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - name: pypi
        hosts: [pypi.org]
      - name: pypi
        hosts: [files.pythonhosted.org]
      - name: rule-4
        hosts: [a.example]
      - hosts: [b.example]
      - name: ""
        hosts: [c.example]
)",
       {"test.yaml:11:15: policies.p.rules[1].name: duplicate rule name 'pypi' (first at line "
        "9)",
        "test.yaml:15:9: policies.p.rules[3]: the default name 'rule-4' is taken by the rule at "
        "line 13; give this rule a name",
        "test.yaml:16:15: policies.p.rules[4].name: '' is not a valid rule name: use 1 to 64 "
        "printable characters"}},
  });
}

TEST(LoadConfig, Settings) {
  runCases({
      {"bad durations",
       kMinimal + R"(dns:
  timeout: 2
  max_ttl: 2h
upstream:
  connect_timeout: -1s
limits:
  handshake_timeout: 1.5s
  idle_timeout: 0s
  shutdown_grace: [1s]
)",
       {"test.yaml:11:12: dns.timeout: '2' needs a unit: ms, s or m",
        "test.yaml:12:12: dns.max_ttl: '2h' is not a duration: write a whole number and ms, s "
        "or m, e.g. 500ms, 2s or 1m",
        "test.yaml:14:20: upstream.connect_timeout: '-1s' is not a duration: write a whole "
        "number and ms, s or m, e.g. 500ms, 2s or 1m",
        "test.yaml:16:22: limits.handshake_timeout: '1.5s' is not a duration: write a whole "
        "number and ms, s or m, e.g. 500ms, 2s or 1m",
        "test.yaml:17:17: limits.idle_timeout: must be greater than 0",
        "test.yaml:18:19: limits.shutdown_grace: expected a duration, got a list"}},
      {"zero where zero is fine",
       kMinimal + "dns:\n  max_ttl: 0s\nlimits:\n  shutdown_grace: 0ms\n",
       {}},
      {"bad sizes and counts",
       kMinimal + R"(limits:
  max_connections: 0
  max_header_bytes: 64kb
---
)",
       {"test.yaml:11:20: limits.max_connections: must be at least 1",
        "test.yaml:12:21: limits.max_header_bytes: '64kb' is not a size: write a whole number "
        "of bytes, or one with KiB, MiB or GiB, e.g. 65536 or 64KiB",
        "test.yaml:13:1: a second YAML document: a config file holds exactly one"}},
      {"idle upstream bounds",
       kMinimal + R"(upstream:
  max_idle: -1
  max_idle_per_sandbox: 0x10
)",
       {"test.yaml:11:13: upstream.max_idle: '-1' is not a plain decimal number",
        "test.yaml:12:25: upstream.max_idle_per_sandbox: '0x10' is not a plain decimal number "
        "(a leading 0 or 0x would be read as octal or hex)"}},
      {"idle upstream bounds too large",
       kMinimal + "upstream:\n  max_idle: 16777217\n  max_idle_per_sandbox: \"8\"\n",
       {"test.yaml:11:13: upstream.max_idle: must be at most 16777216",
        "test.yaml:12:25: upstream.max_idle_per_sandbox: expected a number, got the quoted "
        "string '8' (write it without quotes)"}},
      {"idle upstream bounds of zero: keep none",
       kMinimal + "upstream:\n  max_idle: 0\n  max_idle_per_sandbox: 0\n",
       {}},
      {"header size limits",
       kMinimal + "limits:\n  max_header_bytes: 1023\n",
       {"test.yaml:11:21: limits.max_header_bytes: must be between 1KiB and 16MiB"}},
      {"header size too large",
       kMinimal + "limits:\n  max_header_bytes: 17MiB\n",
       {"test.yaml:11:21: limits.max_header_bytes: must be between 1KiB and 16MiB"}},
      {"header size at the limits", kMinimal + "limits:\n  max_header_bytes: 1KiB\n", {}},
      {"max connections quoted",
       kMinimal + "limits:\n  max_connections: '10'\n",
       {"test.yaml:11:20: limits.max_connections: expected a number, got the quoted string '10' "
        "(write it without quotes)"}},
      {"booleans",
       kMinimal + "audit:\n  hash_bodies: yes\n",
       {"test.yaml:11:16: audit.hash_bodies: yes/no/on/off are not booleans here; write true "
        "or false"}},
      {"boolean off",
       kMinimal + "audit:\n  hash_bodies: off\n",
       {"test.yaml:11:16: audit.hash_bodies: yes/no/on/off are not booleans here; write true "
        "or false"}},
      {"boolean quoted",
       kMinimal + "audit:\n  hash_bodies: \"true\"\n",
       {"test.yaml:11:16: audit.hash_bodies: expected true or false, got the quoted string "
        "'true' (write it without quotes)"}},
      {"boolean capitalised",
       kMinimal + "audit:\n  hash_bodies: True\n",
       {"test.yaml:11:16: audit.hash_bodies: 'True': write true or false in lower case"}},
      {"boolean number",
       kMinimal + "audit:\n  hash_bodies: 1\n",
       {"test.yaml:11:16: audit.hash_bodies: expected true or false, got '1'"}},
      {"paths",
       kMinimal + "audit:\n  path: \"\"\nupstream:\n  ca_file: ~/ca.pem\n",
       {"test.yaml:11:9: audit.path: expected a path, got an empty string",
        "test.yaml:13:12: upstream.ca_file: '~/ca.pem': '~' is not expanded here; write the "
        "full path"}},
      {"dns servers",
       kMinimal + R"(dns:
  servers: [8.8.8.8, dns.google, "[::1]:5353", 1.1.1.1:0, "[fe80::1%eth0]"]
)",
       {"test.yaml:11:22: dns.servers[1]: 'dns.google' is not an IP address with an optional "
        "port, e.g. 127.0.0.1, 127.0.0.1:5353 or [::1]:53 (names are not allowed here)",
        "test.yaml:11:48: dns.servers[3]: '1.1.1.1:0': port 0 is not allowed here",
        "test.yaml:11:59: dns.servers[4]: '[fe80::1%eth0]' is not an IP address with an "
        "optional port, e.g. 127.0.0.1, 127.0.0.1:5353 or [::1]:53 (names are not allowed "
        "here)"}},
      {"dns servers empty",
       kMinimal + "dns:\n  servers: []\n",
       {"test.yaml:11:12: dns.servers: an empty list has no servers; remove the key to use "
        "/etc/resolv.conf"}},
  });
}

TEST(LoadConfig, Sandboxes) {
  runCases({
      {"bad endpoints",
       R"(version: 1
sandboxes:
  - name: a
    listen: localhost:3128
    transparent: 10.200.0.1
    dns_listen: "[::1]"
    policy: p
  - name: b
    listen: 127.0.0.1:0
    dns_listen: "[::1]:0"
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:4:13: sandboxes[0].listen: 'localhost:3128' is not an IP address and port, "
        "e.g. 127.0.0.1:3128 or [::1]:3128 (names are not allowed here)",
        "test.yaml:5:18: sandboxes[0].transparent: '10.200.0.1' needs a port, e.g. "
        "127.0.0.1:3128 or [::1]:3128",
        "test.yaml:6:17: sandboxes[0].dns_listen: '[::1]' needs a port, e.g. 127.0.0.1:3128 or "
        "[::1]:3128",
        "test.yaml:9:13: sandboxes[1].listen: '127.0.0.1:0': port 0 is not allowed here",
        "test.yaml:10:17: sandboxes[1].dns_listen: '[::1]:0': port 0 is not allowed here"}},
      {"names, modes and required keys",
       R"(version: 1
sandboxes:
  - name: Agent_1
    listen: 127.0.0.1:3128
    policy: p
    mode: Enforce
  - name: ..
    dns_listen: 10.0.0.1:53
    original_dst: ignore
  - listen: 127.0.0.1:3130
    transparent: 10.0.0.1:3129
    policy: p
    original_dst: drop
policies:
  p:
    rules: []
)",
       {"test.yaml:3:11: sandboxes[0].name: 'Agent_1' is not a valid name: use 1 to 64 of a-z, "
        "0-9, '.', '_' and '-'",
        "test.yaml:6:11: sandboxes[0].mode: 'Enforce' is not a mode: write enforce or report",
        "test.yaml:7:5: sandboxes[1]: a sandbox needs 'listen', 'transparent' or both",
        "test.yaml:7:5: sandboxes[1]: missing required key 'policy'",
        "test.yaml:7:11: sandboxes[1].name: '..' is not a valid name: it names a directory",
        "test.yaml:9:5: sandboxes[1].original_dst: applies only to a sandbox with 'transparent'",
        "test.yaml:10:5: sandboxes[2]: missing required key 'name'",
        "test.yaml:13:19: sandboxes[2].original_dst: 'drop' is not an original_dst setting: "
        "write ignore or require_match"}},
      {"a refusal setting",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
    refusal: In_Band
policies:
  p:
    rules: []
)",
       {"test.yaml:6:14: sandboxes[0].refusal: 'In_Band' is not a refusal setting: write in_band "
        "or at_connect"}},
      {"duplicate names",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
  - name: a
    listen: 127.0.0.1:3129
    policy: p
  - name: a
    listen: 127.0.0.1:3130
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:6:11: sandboxes[1].name: duplicate sandbox name 'a' (first at test.yaml:3)",
        "test.yaml:9:11: sandboxes[2].name: duplicate sandbox name 'a' (first at test.yaml:3)"}},
      {"unknown policy, reported once",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: mirror
  - name: b
    listen: 127.0.0.1:3129
    policy: Mirrors
policies:
  mirrors:
    rules: []
  llm:
    rules: []
)",
       {"test.yaml:5:13: sandboxes[0].policy: unknown policy 'mirror' (defined: mirrors, llm)",
        "test.yaml:8:13: sandboxes[1].policy: unknown policy 'Mirrors' (defined: mirrors, llm)"}},
      {"no policies section",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
)",
       {"test.yaml:5:13: sandboxes[0].policy: unknown policy 'p' (none are defined)"}},
      {"an unreadable policies section does not cascade",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies: [p]
)",
       {"test.yaml:6:11: policies: expected a map, got a list"}},
      {"a broken policy is still defined",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
        ports: [0]
)",
       {"test.yaml:10:17: policies.p.rules[0].ports[0]: port 0 is out of range 1-65535"}},
      {"policy and secret names",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: My Policy
policies:
  My Policy:
    rules: []
secrets:
  API_KEY:
    env: KEY
    placeholder: placeholder-1
)",
       {"test.yaml:7:3: policies: 'My Policy' is not a valid name: use 1 to 64 of a-z, 0-9, "
        "'.', '_' and '-'",
        "test.yaml:10:3: secrets: 'API_KEY' is not a valid name: use 1 to 64 of a-z, 0-9, '.', "
        "'_' and '-'"}},
      {"dns_listen without transparent is fine",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    dns_listen: 127.0.0.1:5353
    policy: p
policies:
  p:
    rules: []
)",
       {}},
      {"no sandboxes at all",
       "version: 1\npolicies: {}\n",
       {"test.yaml:1:1: no sandboxes: add one under 'sandboxes' or set 'sandboxes_dir'"}},
      {"an empty sandboxes list",
       "version: 1\nsandboxes: []\npolicies: {}\n",
       {"test.yaml:2:12: sandboxes: no sandboxes: add one under 'sandboxes' or set "
        "'sandboxes_dir'"}},
  });
}

TEST(LoadConfig, EndpointOverlaps) {
  runCases({
      {"two sandboxes on one address",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
  - name: b
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:7:13: sandboxes[1].listen: 127.0.0.1:3128 is already used by sandbox 'a' "
        "(listen)"}},
      {"a wildcard takes the port on every address",
       R"(version: 1
sandboxes:
  - name: a
    listen: 0.0.0.0:3128
    policy: p
  - name: b
    listen: 127.0.0.1:3128
    transparent: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:7:13: sandboxes[1].listen: 127.0.0.1:3128 overlaps 0.0.0.0:3128, used by "
        "sandbox 'a' (listen)",
        "test.yaml:8:18: sandboxes[1].transparent: 127.0.0.1:3128 overlaps 0.0.0.0:3128, used "
        "by sandbox 'a' (listen)"}},
      {"the later one is reported, in document order",
       R"(version: 1
admin:
  listen: 127.0.0.1:9901
sandboxes:
  - name: a
    listen: 127.0.0.1:9901
    transparent: 10.200.0.1:3129
    dns_listen: 10.200.0.1:3129
    policy: p
policies:
  p:
    rules: []
)",
       {"test.yaml:6:13: sandboxes[0].listen: 127.0.0.1:9901 is already used by admin.listen",
        "test.yaml:8:17: sandboxes[0].dns_listen: 10.200.0.1:3129 is already used by sandbox "
        "'a' (transparent)"}},
      {"admin after the sandboxes",
       kMinimal + "admin:\n  listen: 0.0.0.0:3128\n",
       {"test.yaml:11:11: admin.listen: 0.0.0.0:3128 overlaps 127.0.0.1:3128, used by sandbox "
        "'a' (listen)"}},
      {"different ports and addresses are fine",
       R"(version: 1
admin:
  listen: 127.0.0.1:9901
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    transparent: 10.200.0.1:3129
    dns_listen: 10.200.0.1:53
    policy: p
  - name: b
    listen: 127.0.0.2:3128
    transparent: 10.200.1.1:3129
    dns_listen: 10.200.1.1:53
    policy: p
policies:
  p:
    rules: []
)",
       {}},
  });
}

TEST(LoadConfig, Secrets) {
  runCases({
      {"inject and secrets",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [api.example.com]
        inject:
          - header: x-api-key
            secret: anthropic
          - header: X-Api-Key
            secret: openai
          - header: host
            secret: both
          - header: "bad header"
          - secret: nothing
      - hosts: [plain.example.com]
        schemes: [https, http]
        inject:
          - header: authorization
            secret: both
secrets:
  both:
    env: A
    file: /run/a
    placeholder: placeholder-both
  none:
    placeholder: placeholder-none
  short:
    env: 1A
    placeholder: "short"
  dup:
    file: dup.key
    placeholder: placeholder-both
  spaced:
    env: B
    placeholder: "has a space"
)",
       {"test.yaml:12:21: policies.p.rules[0].inject[0].secret: unknown secret 'anthropic' "
        "(defined: both, none, short, dup, spaced)",
        "test.yaml:13:21: policies.p.rules[0].inject[1].header: 'x-api-key' is injected twice "
        "by this rule",
        "test.yaml:14:21: policies.p.rules[0].inject[1].secret: unknown secret 'openai' "
        "(defined: both, none, short, dup, spaced)",
        "test.yaml:15:21: policies.p.rules[0].inject[2].header: 'host' cannot be injected: "
        "sluice writes or removes it itself",
        "test.yaml:17:13: policies.p.rules[0].inject[3]: missing required key 'secret'",
        "test.yaml:17:21: policies.p.rules[0].inject[3].header: 'bad header' is not a header "
        "name (letters, digits and !#$%&'*+-.^_`|~ only)",
        "test.yaml:18:13: policies.p.rules[0].inject[4]: missing required key 'header'",
        "test.yaml:18:21: policies.p.rules[0].inject[4].secret: unknown secret 'nothing' "
        "(defined: both, none, short, dup, spaced)",
        "test.yaml:21:9: policies.p.rules[1]: inject would send the secret over plain http; "
        "remove http from schemes",
        "test.yaml:26:5: secrets.both: a secret needs exactly one of 'env' or 'file'",
        "test.yaml:30:5: secrets.none: a secret needs exactly one of 'env' or 'file'",
        "test.yaml:32:10: secrets.short.env: '1A' is not an environment variable name",
        "test.yaml:33:18: secrets.short.placeholder: 'short' is not a usable placeholder: use "
        "at least 8 printable ASCII characters and no spaces",
        "test.yaml:36:18: secrets.dup.placeholder: placeholder 'placeholder-both' is already "
        "used by secret 'both'",
        "test.yaml:39:18: secrets.spaced.placeholder: 'has a space' is not a usable "
        "placeholder: use at least 8 printable ASCII characters and no spaces"}},
      {"a missing placeholder, an unreadable secrets section",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [api.example.com]
        inject:
          - {header: x-api-key, secret: anthropic}
secrets: anthropic
)",
       {"test.yaml:12:10: secrets: expected a map, got 'anthropic'"}},
      {"a secret without placeholder",
       kMinimal + "secrets:\n  s:\n    env: S\n",
       {"test.yaml:12:5: secrets.s: missing required key 'placeholder'"}},
      {"inject without secrets",
       R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [api.example.com]
        inject:
          - {header: x-api-key, secret: anthropic}
)",
       {"test.yaml:11:41: policies.p.rules[0].inject[0].secret: unknown secret 'anthropic' "
        "(none are defined)"}},
  });
}

TEST(LoadConfig, AllErrorsInDocumentOrder) {
  const std::string yaml = R"(version: 1
limits:
  max_connections: 010
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: q
  - name: b
    listen: 127.0.0.1:3128
    policy: p
    colour: blue
policies:
  p:
    rules:
      - hosts: ["*.com"]
        ports: [0x1bb]
        methods: [get]
audit:
  hash_bodies: on
)";
  EXPECT_THAT(
      errorsOf(yaml),
      ElementsAre(
          "test.yaml:3:20: limits.max_connections: '010' is not a plain decimal number (a leading "
          "0 or 0x would be read as octal or hex)",
          "test.yaml:7:13: sandboxes[0].policy: unknown policy 'q' (defined: p)",
          "test.yaml:9:13: sandboxes[1].listen: 127.0.0.1:3128 is already used by sandbox 'a' "
          "(listen)",
          "test.yaml:11:5: sandboxes[1]: unknown key 'colour' (expected one of: name, listen, "
          "transparent, dns_listen, ca, policy, mode, original_dst, refusal, audit, limits)",
          "test.yaml:15:17: policies.p.rules[0].hosts[0]: " + hostError("*.com"),
          "test.yaml:16:17: policies.p.rules[0].ports[0]: '0x1bb' is not a plain decimal number "
          "(a leading 0 or 0x would be read as octal or hex)",
          "test.yaml:17:19: policies.p.rules[0].methods[0]: 'get': methods are case-sensitive; "
          "write GET",
          "test.yaml:19:16: audit.hash_bodies: yes/no/on/off are not booleans here; write true "
          "or false"));
}

TEST(LoadConfig, ErrorsUseTheFileName) {
  EXPECT_THAT(errorsOf("version: 2\n", defaultOptions(), "/etc/sluice/sluice.yaml"),
              ElementsAre("/etc/sluice/sluice.yaml:1:10: version: unsupported version 2: this "
                          "sluice reads version 1"));
}

// ---------------------------------------------------------------------------------------------
// sandboxes_dir

const std::string kWithDir = R"(version: 1
sandboxes_dir: sandboxes.d
policies:
  p:
    rules:
      - hosts: [example.com]
)";

LoadOptions dirOptions(std::vector<ConfigText> files, std::vector<std::string>* asked = nullptr) {
  LoadOptions options = defaultOptions();
  options.read_sandbox_dir =
      [files, asked](const std::string& dir) -> Result<std::vector<ConfigText>, std::string> {
    if (asked != nullptr) {
      asked->push_back(dir);
    }
    return files;
  };
  return options;
}

TEST(SandboxesDir, LoadsEachFileAsOneSandbox) {
  std::vector<std::string> asked;
  auto config = load(kWithDir,
                     dirOptions({{"/etc/sluice/sandboxes.d/a.yaml",
                                  "name: a\nlisten: 127.0.0.1:3128\npolicy: p\nca: ./ca/a\n"},
                                 {"/etc/sluice/sandboxes.d/b.yaml",
                                  "name: b\ntransparent: 10.0.0.1:3129\npolicy: p\n"
                                  "audit: ../audit/b.jsonl\n"}},
                                &asked),
                     "/etc/sluice/sluice.yaml");
  ASSERT_NE(config, nullptr);
  EXPECT_THAT(asked, ElementsAre("/etc/sluice/sandboxes.d"));
  ASSERT_TRUE(config->sandboxes_dir.has_value());
  EXPECT_EQ(*config->sandboxes_dir, "/etc/sluice/sandboxes.d");
  ASSERT_EQ(config->sandboxes.size(), 2u);
  const Sandbox& a = config->sandboxes[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.source_file, "/etc/sluice/sandboxes.d/a.yaml");
  EXPECT_EQ(a.ca_dir, "/etc/sluice/sandboxes.d/ca/a");
  const Sandbox& b = config->sandboxes[1];
  EXPECT_EQ(b.ca_dir, "/var/lib/sluice/b");
  ASSERT_TRUE(b.audit_path.has_value());
  EXPECT_EQ(*b.audit_path, "/etc/sluice/sandboxes.d/../audit/b.jsonl");
  EXPECT_EQ(a.policy.get(), b.policy.get());
  EXPECT_EQ(a.own_endpoints.get(), b.own_endpoints.get());
  EXPECT_EQ(a.own_endpoints->size(), 2u);
}

TEST(SandboxesDir, ZeroFilesIsFine) {
  auto config = load(kWithDir, dirOptions({}));
  ASSERT_NE(config, nullptr);
  EXPECT_TRUE(config->sandboxes.empty());
}

TEST(SandboxesDir, SandboxesFromBothPlaces) {
  auto config =
      load(kMinimal + "sandboxes_dir: /srv/sb\n",
           dirOptions({{"/srv/sb/b.yaml", "name: b\nlisten: 127.0.0.1:3129\npolicy: p\n"}}));
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->sandboxes.size(), 2u);
  EXPECT_EQ(config->sandboxes[0].name, "a");
  EXPECT_EQ(config->sandboxes[1].name, "b");
  EXPECT_EQ(*config->sandboxes_dir, "/srv/sb");
}

TEST(SandboxesDir, ErrorsNameTheSandboxFile) {
  const auto errors = errorsOf(
      kWithDir + "sandboxes:\n  - name: a\n    listen: 127.0.0.1:3128\n    policy: p\n",
      dirOptions({
          {"sb/a.yaml", "name: a\nlisten: 127.0.0.1:3129\npolicy: p\n"},
          {"sb/b.yaml", "# b\nname: b\nlisten: 127.0.0.1:3128\npolicy: nope\nversion: 1\n"},
          {"sb/c.yaml", ""},
          {"sb/d.yaml", "- name: d\n"},
          {"sb/e.yaml", "name: e\nlisten: 127.0.0.1:3130\npolicy: p\n---\n"},
          {"sb/f.yaml", "name: f\n\tlisten: 127.0.0.1:3131\n"},
          {"sb/g.yaml", "name: g\nlisten: 127.0.0.1:3132\npolicy: p\nca: x\nca: y\n"},
      }));
  EXPECT_THAT(
      errors,
      ElementsAre(
          "sb/a.yaml:1:7: name: duplicate sandbox name 'a' (first at test.yaml:8)",
          "sb/b.yaml:3:9: listen: 127.0.0.1:3128 is already used by sandbox 'a' (listen)",
          "sb/b.yaml:4:9: policy: unknown policy 'nope' (defined: p)",
          "sb/b.yaml:5:1: unknown key 'version' (expected one of: name, listen, transparent, "
          "dns_listen, ca, policy, mode, original_dst, refusal, audit, limits)",
          "sb/c.yaml: empty sandbox file: expected the keys of one sandbox",
          "sb/d.yaml:1:1: expected a map, got a list",
          "sb/e.yaml:4:1: a second YAML document: a config file holds exactly one",
          "sb/f.yaml:2:1: illegal tab when looking for indentation (tabs cannot indent YAML; use "
          "spaces)",
          "sb/g.yaml:5:1: duplicate key 'ca' (first at line 4)"));
}

TEST(SandboxesDir, FailingCallback) {
  LoadOptions options = defaultOptions();
  options.read_sandbox_dir =
      [](const std::string& dir) -> Result<std::vector<ConfigText>, std::string> {
    return Err{std::string("cannot open " + dir + ": No such file or directory")};
  };
  EXPECT_THAT(errorsOf(kWithDir, options, "conf/sluice.yaml"),
              ElementsAre("conf/sluice.yaml:2:16: sandboxes_dir: cannot open conf/sandboxes.d: No "
                          "such file or directory"));
}

TEST(SandboxesDir, WithoutCallback) {
  EXPECT_THAT(errorsOf(kWithDir),
              ElementsAre("test.yaml:2:16: sandboxes_dir: sandboxes_dir is not supported here"));
}

TEST(SandboxesDir, BadValue) {
  EXPECT_THAT(errorsOf("version: 1\nsandboxes_dir: [a]\n", dirOptions({})),
              ElementsAre("test.yaml:2:16: sandboxes_dir: expected a string, got a list"));
}

// ---------------------------------------------------------------------------------------------
// What a good file turns into

TEST(LoadConfig, DefaultsApplied) {
  auto config = load(kMinimal, defaultOptions(), "test.yaml");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->source_file, "test.yaml");
  EXPECT_TRUE(config->dns.servers.empty());
  EXPECT_EQ(config->dns.timeout, milliseconds(2000));
  EXPECT_EQ(config->dns.max_ttl, milliseconds(300000));
  EXPECT_FALSE(config->upstream.ca_file.has_value());
  EXPECT_EQ(config->upstream.connect_timeout, milliseconds(5000));
  EXPECT_EQ(config->upstream.max_idle, 4096u);
  EXPECT_EQ(config->upstream.max_idle_per_sandbox, 128u);
  EXPECT_EQ(config->audit.path, "-");
  EXPECT_FALSE(config->audit.hash_bodies);
  EXPECT_FALSE(config->admin.listen.has_value());
  EXPECT_EQ(config->limits.max_connections, 10000u);
  EXPECT_EQ(config->limits.max_header_bytes, 65536u);
  EXPECT_EQ(config->limits.handshake_timeout, milliseconds(10000));
  EXPECT_EQ(config->limits.idle_timeout, milliseconds(60000));
  EXPECT_EQ(config->limits.shutdown_grace, milliseconds(10000));
  EXPECT_FALSE(config->sandboxes_dir.has_value());
  EXPECT_TRUE(config->secrets.empty());

  ASSERT_EQ(config->sandboxes.size(), 1u);
  const Sandbox& a = config->sandboxes[0];
  EXPECT_EQ(a.name, "a");
  ASSERT_TRUE(a.listen.has_value());
  EXPECT_EQ(a.listen->toString(), "127.0.0.1:3128");
  EXPECT_FALSE(a.transparent.has_value());
  EXPECT_FALSE(a.dns_listen.has_value());
  EXPECT_EQ(a.ca_dir, "/var/lib/sluice/a");
  EXPECT_EQ(a.mode, SandboxMode::Enforce);
  EXPECT_EQ(a.original_dst, OriginalDst::Ignore);
  EXPECT_FALSE(a.audit_path.has_value());
  EXPECT_EQ(a.source_file, "test.yaml");
  ASSERT_NE(a.own_endpoints, nullptr);
  EXPECT_THAT(*a.own_endpoints, ElementsAre(*a.listen));

  ASSERT_EQ(config->policies.size(), 1u);
  const Policy& p = *config->policies[0];
  EXPECT_EQ(a.policy.get(), &p);
  EXPECT_EQ(p.name, "p");
  ASSERT_EQ(p.rules.size(), 1u);
  const Rule& rule = p.rules[0];
  EXPECT_EQ(rule.name, "rule-1");
  ASSERT_EQ(rule.hosts.size(), 1u);
  EXPECT_EQ(rule.hosts[0].text(), "example.com");
  EXPECT_TRUE(rule.allowsScheme(Scheme::Https));
  EXPECT_FALSE(rule.allowsScheme(Scheme::Http));
  EXPECT_TRUE(rule.ports.empty());
  EXPECT_TRUE(rule.methods.empty());
  EXPECT_TRUE(rule.paths.empty());
  EXPECT_TRUE(rule.ips.empty());
  EXPECT_TRUE(rule.inject.empty());

  EXPECT_EQ(config->findSandbox("a"), &a);
  EXPECT_EQ(config->findSandbox("b"), nullptr);
  EXPECT_EQ(config->findPolicy("p"), &p);
  EXPECT_EQ(config->findPolicy("a"), nullptr);
  EXPECT_EQ(config->findSecret("p"), nullptr);
}

TEST(LoadConfig, RuleIndexIsBuilt) {
  auto config = load(R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [example.com]
      - hosts: ["*.example.org", example.com]
)");
  ASSERT_NE(config, nullptr);
  const Policy& p = *config->policies[0];
  auto host = canonicalizeHost("example.com");
  ASSERT_TRUE(host.ok());
  std::uint32_t out[4] = {};
  ASSERT_EQ(p.index.matching(host.value(), out, 4), 2u);
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], 1u);
  auto sub = canonicalizeHost("a.example.org");
  ASSERT_TRUE(sub.ok());
  ASSERT_EQ(p.index.matching(sub.value(), out, 4), 1u);
  EXPECT_EQ(out[0], 1u);
}

TEST(LoadConfig, EmptyRulesDenyEverything) {
  auto config = load(
      "version: 1\nsandboxes: [{name: a, listen: 127.0.0.1:3128, policy: p}]\n"
      "policies: {p: {rules: []}}\n");
  ASSERT_NE(config, nullptr);
  EXPECT_TRUE(config->policies[0]->rules.empty());
}

TEST(LoadConfig, RelativePathsFollowTheirFile) {
  const std::string yaml = R"(version: 1
upstream:
  ca_file: certs/ca.pem
audit:
  path: ./audit/all.jsonl
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    ca: ./state/a
    audit: "-"
    policy: p
  - name: b
    listen: 127.0.0.1:3129
    ca: /abs/b
    audit: ../b.jsonl
    policy: p
policies:
  p:
    rules: []
secrets:
  s:
    file: secrets/s.txt
    placeholder: placeholder-s
)";
  auto nested = load(yaml, defaultOptions(), "/etc/sluice/sluice.yaml");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(*nested->upstream.ca_file, "/etc/sluice/certs/ca.pem");
  EXPECT_EQ(nested->audit.path, "/etc/sluice/audit/all.jsonl");
  EXPECT_EQ(nested->sandboxes[0].ca_dir, "/etc/sluice/state/a");
  EXPECT_EQ(*nested->sandboxes[0].audit_path, "-");
  EXPECT_EQ(nested->sandboxes[1].ca_dir, "/abs/b");
  EXPECT_EQ(*nested->sandboxes[1].audit_path, "/etc/sluice/../b.jsonl");
  ASSERT_EQ(nested->secrets.size(), 1u);
  EXPECT_EQ(nested->secrets[0].source, Secret::Source::File);
  EXPECT_EQ(nested->secrets[0].source_value, "/etc/sluice/secrets/s.txt");

  auto relative = load(yaml, defaultOptions(), "conf/sluice.yaml");
  ASSERT_NE(relative, nullptr);
  EXPECT_EQ(*relative->upstream.ca_file, "conf/certs/ca.pem");
  EXPECT_EQ(relative->sandboxes[0].ca_dir, "conf/state/a");

  auto bare = load(yaml, defaultOptions(), "sluice.yaml");
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(*bare->upstream.ca_file, "certs/ca.pem");
  EXPECT_EQ(bare->audit.path, "./audit/all.jsonl");
  EXPECT_EQ(bare->sandboxes[0].ca_dir, "./state/a");

  auto root = load(yaml, defaultOptions(), "/sluice.yaml");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(*root->upstream.ca_file, "/certs/ca.pem");
}

TEST(LoadConfig, SharedOwnEndpoints) {
  auto config = load(R"(version: 1
admin:
  listen: 127.0.0.1:9901
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    transparent: 10.200.0.1:3129
    dns_listen: 10.200.0.1:53
    policy: p
  - name: b
    dns_listen: "[fd00::1]:53"
    transparent: "[fd00::1]:3129"
    policy: p
policies:
  p:
    rules: []
)");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->sandboxes.size(), 2u);
  const auto& own = config->sandboxes[0].own_endpoints;
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own.get(), config->sandboxes[1].own_endpoints.get());
  std::vector<std::string> texts;
  for (const Endpoint& e : *own) {
    texts.push_back(e.toString());
  }
  EXPECT_THAT(texts, ElementsAre("127.0.0.1:9901", "127.0.0.1:3128", "10.200.0.1:3129",
                                 "10.200.0.1:53", "[fd00::1]:53", "[fd00::1]:3129"));
  EXPECT_FALSE(config->sandboxes[1].listen.has_value());
  EXPECT_EQ(config->admin.listen->toString(), "127.0.0.1:9901");
}

TEST(LoadConfig, IdleUpstreamBounds) {
  auto config = load(kMinimal + "upstream:\n  max_idle: 100\n  max_idle_per_sandbox: 8\n",
                     defaultOptions(), "test.yaml");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->upstream.max_idle, 100u);
  EXPECT_EQ(config->upstream.max_idle_per_sandbox, 8u);
  auto none = load(kMinimal + "upstream:\n  max_idle: 0\n", defaultOptions(), "test.yaml");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->upstream.max_idle, 0u);
  EXPECT_EQ(none->upstream.max_idle_per_sandbox, 128u);
}

// upstream.extra_ca_files: trusted beside ca_file (or the default), each path relative to its
// file like ca_file; an empty list and a path listed twice are mistakes.
TEST(LoadConfig, ExtraUpstreamCaFiles) {
  auto config = load(kMinimal + "upstream:\n  extra_ca_files: [certs/private.pem, /etc/b.pem]\n",
                     defaultOptions(), "/etc/sluice/sluice.yaml");
  ASSERT_NE(config, nullptr);
  EXPECT_FALSE(config->upstream.ca_file.has_value());
  EXPECT_EQ(config->upstream.extra_ca_files,
            (std::vector<std::string>{"/etc/sluice/certs/private.pem", "/etc/b.pem"}));
  EXPECT_TRUE(load(kMinimal, defaultOptions(), "test.yaml")->upstream.extra_ca_files.empty());
  EXPECT_THAT(errorsOf(kMinimal + "upstream:\n  extra_ca_files: []\n"),
              ElementsAre(::testing::HasSubstr(
                  "upstream.extra_ca_files: an empty list: leave the key out")));
  EXPECT_THAT(errorsOf(kMinimal + "upstream:\n  extra_ca_files: [/a.pem, /b.pem, /a.pem]\n"),
              ElementsAre(::testing::HasSubstr(
                  "upstream.extra_ca_files[2]: '/a.pem' is listed twice")));
  EXPECT_THAT(errorsOf(kMinimal + "upstream:\n  extra_ca_files: /a.pem\n"),
              ElementsAre(::testing::HasSubstr("upstream.extra_ca_files: expected a list")));
}

// The example of docs/configuration.md ("The file"), as printed there, with its relative paths
// and sandboxes_dir given a callback.
const std::string kSpecExample = R"(version: 1
dns:
  servers: ["127.0.0.1:5353"]   # default: nameservers of the gateway host's /etc/resolv.conf
  timeout: 2s
  max_ttl: 300s                 # answers are cached for min(TTL, max_ttl)
upstream:
  ca_file: /etc/ssl/certs/ca-certificates.crt   # default: OpenSSL's default verify paths
  connect_timeout: 5s
audit:
  path: "-"                     # "-" = stdout; otherwise a file opened for append
  hash_bodies: true             # sha256 of request and response bodies in each record
admin:
  listen: 127.0.0.1:9901        # optional: GET /metrics (Prometheus text) and /healthz
limits:
  max_connections: 10000
  max_header_bytes: 64KiB
  handshake_timeout: 10s
  idle_timeout: 60s
  shutdown_grace: 10s
sandboxes_dir: /etc/sluice/sandboxes.d   # optional: one YAML file per sandbox, same keys as
                                # an entry of `sandboxes`; files come and go with reloads
sandboxes:
  - name: agent-1               # [a-z0-9._-]+, unique
    listen: 127.0.0.1:3128      # explicit proxy: CONNECT and absolute-form http://
                                # (a sandbox needs `listen`, `transparent`, or both)
    transparent: 10.200.0.1:3129    # optional: redirected TCP (nftables/iptables REDIRECT)
    dns_listen: 10.200.0.1:53       # optional: the sandbox's resolver
    ca: ./state/agent-1         # ca.pem + ca.key; created on first start if missing
    policy: mirrors
    mode: enforce               # enforce | report (log would-deny as "report", forward anyway;
                                # the address checks still hold in report mode)
    original_dst: ignore        # transparent only: ignore | require_match
    audit: ./audit/agent-1.jsonl    # optional per-sandbox audit path
policies:
  mirrors:
    rules:
      - name: pypi
        hosts: [pypi.org, files.pythonhosted.org]
        schemes: [https]        # default [https]; http allows plain-HTTP forwarding
        ports: [443]            # default: 443 for https, 80 for http
        methods: [GET, HEAD]    # default: any
        paths: [/simple/, /packages/]   # prefixes; default: any
        ips: [151.101.0.0/16]   # optional: every address used must lie inside
      - name: llm
        hosts: [api.anthropic.com]
        methods: [POST]
        inject:                 # credential brokering
          - header: x-api-key
            secret: anthropic
secrets:
  anthropic:
    env: ANTHROPIC_API_KEY      # or file: /run/secrets/anthropic; read by sluice, never by the box
    placeholder: sk-sluice-anthropic   # what the sandbox holds instead
)";

TEST(LoadConfig, SpecExample) {
  std::vector<std::string> asked;
  auto config = load(kSpecExample, dirOptions({}, &asked), "/etc/sluice/sluice.yaml");
  ASSERT_NE(config, nullptr);
  EXPECT_THAT(asked, ElementsAre("/etc/sluice/sandboxes.d"));
  ASSERT_EQ(config->dns.servers.size(), 1u);
  EXPECT_EQ(config->dns.servers[0].toString(), "127.0.0.1:5353");
  EXPECT_EQ(config->dns.timeout, milliseconds(2000));
  EXPECT_EQ(config->dns.max_ttl, milliseconds(300000));
  EXPECT_EQ(*config->upstream.ca_file, "/etc/ssl/certs/ca-certificates.crt");
  EXPECT_EQ(config->audit.path, "-");
  EXPECT_TRUE(config->audit.hash_bodies);
  EXPECT_EQ(config->admin.listen->toString(), "127.0.0.1:9901");
  EXPECT_EQ(config->limits.max_header_bytes, 65536u);

  ASSERT_EQ(config->sandboxes.size(), 1u);
  const Sandbox& s = config->sandboxes[0];
  EXPECT_EQ(s.name, "agent-1");
  EXPECT_EQ(s.transparent->toString(), "10.200.0.1:3129");
  EXPECT_EQ(s.dns_listen->toString(), "10.200.0.1:53");
  EXPECT_EQ(s.ca_dir, "/etc/sluice/state/agent-1");
  EXPECT_EQ(*s.audit_path, "/etc/sluice/audit/agent-1.jsonl");
  EXPECT_EQ(s.policy->name, "mirrors");
  EXPECT_EQ(s.own_endpoints->size(), 4u);

  const Policy& p = *s.policy;
  ASSERT_EQ(p.rules.size(), 2u);
  const Rule& pypi = p.rules[0];
  EXPECT_EQ(pypi.name, "pypi");
  EXPECT_EQ(pypi.hosts.size(), 2u);
  EXPECT_THAT(pypi.ports, ElementsAre(443));
  EXPECT_THAT(pypi.methods, ElementsAre("GET", "HEAD"));
  EXPECT_THAT(pypi.paths, ElementsAre("/simple/", "/packages/"));
  ASSERT_EQ(pypi.ips.size(), 1u);
  EXPECT_EQ(pypi.ips[0].toString(), "151.101.0.0/16");
  const Rule& llm = p.rules[1];
  EXPECT_EQ(llm.name, "llm");
  ASSERT_EQ(llm.inject.size(), 1u);
  EXPECT_EQ(llm.inject[0].header, "x-api-key");
  EXPECT_EQ(llm.inject[0].secret, "anthropic");

  const Secret* secret = config->findSecret("anthropic");
  ASSERT_NE(secret, nullptr);
  EXPECT_EQ(secret->source, Secret::Source::Env);
  EXPECT_EQ(secret->source_value, "ANTHROPIC_API_KEY");
  EXPECT_EQ(secret->placeholder, "sk-sluice-anthropic");
}

// One-character edits of that example either load or yields positioned errors; none
// crashes or throws (the ASan build runs this too).
TEST(LoadConfig, SurvivesEditsOfTheSpecExample) {
  const int lines = static_cast<int>(std::count(kSpecExample.begin(), kSpecExample.end(), '\n'));
  const std::string inserts[] = {"\t", ":", "*", "[", "&", "-", "\"", "#", "0", "\n"};
  LoadOptions options =
      dirOptions({{"sb/x.yaml", "name: x\nlisten: 127.0.0.1:1\npolicy: mirrors\n"}});
  std::size_t loaded = 0;
  std::size_t failed = 0;
  auto check = [&](const std::string& text) {
    ConfigResult result = loadConfig(ConfigText{"test.yaml", text}, options);
    if (result.ok()) {
      ++loaded;
      return;
    }
    ++failed;
    ASSERT_FALSE(result.error().empty());
    for (const ConfigError& e : result.error()) {
      EXPECT_FALSE(e.message.empty()) << text;
      EXPECT_GE(e.line, 0) << e.toString();
      EXPECT_LE(e.line, lines + 2) << e.toString() << "\n" << text;
      EXPECT_GE(e.column, 0) << e.toString();
    }
  };
  // Each position loses its character once and gets one of the inserts (cycling): every
  // insert still lands in every kind of place, at a sixth of the cost of all of them.
  for (std::size_t i = 0; i < kSpecExample.size(); ++i) {
    std::string removed = kSpecExample;
    removed.erase(i, 1);
    check(removed);
    std::string added = kSpecExample;
    added.insert(i, inserts[i % std::size(inserts)]);
    check(added);
  }
  EXPECT_GT(loaded, 0u);
  EXPECT_GT(failed, 0u);
}

TEST(LoadConfig, InjectNeedsHttpsOnly) {
  EXPECT_THAT(errorsOf(R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [api.example.com]
        schemes: [http]
        inject:
          - header: X-Api-Key
            secret: k
secrets:
  k:
    env: K
    placeholder: placeholder-k
)"),
              ElementsAre("test.yaml:11:9: policies.p.rules[0]: inject would send the secret over "
                          "plain http; remove http from schemes"));
}

// The headers the head writer drops from the sandbox's request are the headers no rule may
// inject (one table, policy/request_header.h): hop-by-hop, Proxy-*, and the family that claims
// another host, path, scheme, port, method or client.
TEST(LoadConfig, InjectNeverIntoAHeaderTheWriterDrops) {
  auto withHeader = [](std::string_view header) {
    return std::string(R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [api.example.com]
        inject:
          - header: )") +
           std::string(header) + R"(
            secret: k
secrets:
  k:
    env: K
    placeholder: placeholder-k
)";
  };
  for (std::string_view header :
       {"host", "Content-Length", "connection", "http2-settings", "proxy", "Proxy-Authorization",
        "proxy-foo", "X-Forwarded-Host", "x_forwarded_host", "forwarded", "x-original-url",
        "X-Rewrite-URL", "x-http-method-override", "x-forwarded-proto", "x-real-ip",
        "x-forwarded-client-cert", "x-envoy-internal", "x-middleware-subrequest"}) {
    std::string lower(header);
    for (char& c : lower) {
      c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    EXPECT_THAT(errorsOf(withHeader(header)),
                ElementsAre("test.yaml:11:21: policies.p.rules[0].inject[0].header: '" + lower +
                            "' cannot be injected: sluice writes or removes it itself"))
        << header;
  }
  for (std::string_view header : {"authorization", "X-Api-Key", "cookie", "x-goog-api-key",
                                  "cf-access-client-secret", "x-forwardedhost"}) {
    EXPECT_THAT(errorsOf(withHeader(header)), ElementsAre()) << header;
  }
}

TEST(LoadConfig, ParsedRuleValues) {
  auto config = load(R"(version: 1
sandboxes:
  - name: a
    transparent: 10.0.0.1:3129
    original_dst: require_match
    mode: report
    policy: p
policies:
  p:
    rules:
      - name: both
        hosts: ["*.Example.COM", "10.0.0.1", "[2001:db8::1]"]
        schemes: [http, https]
        ports: [80, 443, 8080]
        ips: [10.0.0.0/8, "fd00::/8"]
      - hosts: [api.example.com]
        inject:
          - header: X-Api-Key
            secret: k
secrets:
  k:
    env: K
    placeholder: placeholder-k
)");
  ASSERT_NE(config, nullptr);
  const Sandbox& s = config->sandboxes[0];
  EXPECT_EQ(s.mode, SandboxMode::Report);
  EXPECT_EQ(s.original_dst, OriginalDst::RequireMatch);
  const Rule& rule = s.policy->rules[0];
  std::vector<std::string> hosts;
  for (const HostPattern& h : rule.hosts) {
    hosts.push_back(h.text());
  }
  EXPECT_THAT(hosts, ElementsAre("*.example.com", "10.0.0.1", "2001:db8::1"));
  EXPECT_TRUE(rule.allowsScheme(Scheme::Http));
  EXPECT_TRUE(rule.allowsScheme(Scheme::Https));
  EXPECT_THAT(rule.ports, ElementsAre(80, 443, 8080));
  ASSERT_EQ(rule.ips.size(), 2u);
  EXPECT_EQ(rule.ips[1].toString(), "fd00::/8");
  const Rule& second = s.policy->rules[1];
  EXPECT_EQ(second.name, "rule-2");
  EXPECT_EQ(second.inject[0].header, "x-api-key");
}

// ---------------------------------------------------------------------------------------------
// Per-sandbox limits: limits.per_sandbox, overridden key by key by a sandbox's own `limits`

std::string show(const SandboxLimits& l) {
  auto one = [](const std::optional<std::uint64_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  return "max_connections=" + one(l.max_connections) +
         " requests_per_second=" + one(l.requests_per_second) +
         " request_burst=" + one(l.request_burst);
}

// Two sandboxes; `a_limits` and `b_limits` are indented map bodies (or "") of each one's
// `limits`, `tail` goes after everything else (so the top-level `limits` comes last).
std::string twoSandboxes(const std::string& head, const std::string& a_limits,
                         const std::string& b_limits, const std::string& tail = "") {
  auto limits = [](const std::string& body) {
    return body.empty() ? std::string() : "    limits:\n" + body;
  };
  return "version: 1\n" + head +
         "sandboxes:\n"
         "  - name: a\n"
         "    listen: 127.0.0.1:3128\n"
         "    policy: p\n" +
         limits(a_limits) +
         "  - name: b\n"
         "    listen: 127.0.0.1:3129\n"
         "    policy: p\n" +
         limits(b_limits) +
         "policies:\n"
         "  p:\n"
         "    rules:\n"
         "      - hosts: [example.com]\n" +
         tail;
}

struct LimitsCase {
  const char* name;
  std::string yaml;
  std::vector<ConfigText> dir_files;   // sandboxes_dir, when the yaml names one
  std::string per_sandbox;             // show(Limits::per_sandbox)
  std::vector<std::string> effective;  // show(Sandbox::limits), one per sandbox
};

TEST(SandboxLimits, EffectiveValues) {
  const std::string kNone = "max_connections=- requests_per_second=- request_burst=-";
  const std::string kDefaults =
      "limits:\n  per_sandbox:\n    max_connections: 50\n    requests_per_second: 20\n"
      "    request_burst: 40\n";
  const std::vector<LimitsCase> cases = {
      {"no limits: unlimited", twoSandboxes("", "", ""), {}, kNone, {kNone, kNone}},
      {"defaults for every sandbox, written before the sandboxes",
       twoSandboxes(kDefaults, "", ""),
       {},
       "max_connections=50 requests_per_second=20 request_burst=40",
       {"max_connections=50 requests_per_second=20 request_burst=40",
        "max_connections=50 requests_per_second=20 request_burst=40"}},
      {"defaults written after the sandboxes",
       twoSandboxes("", "", "", kDefaults),
       {},
       "max_connections=50 requests_per_second=20 request_burst=40",
       {"max_connections=50 requests_per_second=20 request_burst=40",
        "max_connections=50 requests_per_second=20 request_burst=40"}},
      {"the burst defaults to the rate, and is stored resolved",
       twoSandboxes("limits:\n  per_sandbox:\n    requests_per_second: 20\n", "", ""),
       {},
       "max_connections=- requests_per_second=20 request_burst=-",
       {"max_connections=- requests_per_second=20 request_burst=20",
        "max_connections=- requests_per_second=20 request_burst=20"}},
      {"a sandbox overrides key by key",
       twoSandboxes("", "      requests_per_second: 5\n",
                    "      max_connections: 2\n      request_burst: 1\n", kDefaults),
       {},
       "max_connections=50 requests_per_second=20 request_burst=40",
       {"max_connections=50 requests_per_second=5 request_burst=40",
        "max_connections=2 requests_per_second=20 request_burst=1"}},
      {"a sandbox's own rate without any burst",
       twoSandboxes("limits:\n  per_sandbox:\n    max_connections: 50\n",
                    "      requests_per_second: 7\n", ""),
       {},
       "max_connections=50 requests_per_second=- request_burst=-",
       {"max_connections=50 requests_per_second=7 request_burst=7",
        "max_connections=50 requests_per_second=- request_burst=-"}},
      {"a default burst for the sandboxes that set their own rate",
       twoSandboxes("limits:\n  per_sandbox:\n    request_burst: 5\n",
                    "      requests_per_second: 10\n", "      requests_per_second: 1\n"),
       {},
       "max_connections=- requests_per_second=- request_burst=5",
       {"max_connections=- requests_per_second=10 request_burst=5",
        "max_connections=- requests_per_second=1 request_burst=5"}},
      {"limits without per_sandbox",
       twoSandboxes("limits:\n  max_connections: 5\n", "", ""),
       {},
       kNone,
       {kNone, kNone}},
      {"the largest rate",
       twoSandboxes("", "      requests_per_second: 1000000000\n", ""),
       {},
       kNone,
       {"max_connections=- requests_per_second=1000000000 request_burst=1000000000", kNone}},
      {"a sandboxes_dir file overrides the defaults",
       "version: 1\nsandboxes_dir: /srv/sb\nlimits:\n  per_sandbox:\n"
       "    requests_per_second: 100\n    max_connections: 10\n"
       "policies:\n  p:\n    rules:\n      - hosts: [example.com]\n",
       {{"/srv/sb/a.yaml", "name: a\nlisten: 127.0.0.1:3128\npolicy: p\n"},
        {"/srv/sb/b.yaml",
         "name: b\nlisten: 127.0.0.1:3129\npolicy: p\nlimits:\n  requests_per_second: 1\n"
         "  max_connections: 2\n"}},
       "max_connections=10 requests_per_second=100 request_burst=-",
       {"max_connections=10 requests_per_second=100 request_burst=100",
        "max_connections=2 requests_per_second=1 request_burst=1"}},
  };
  for (const LimitsCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto config = load(c.yaml, dirOptions(c.dir_files));
    ASSERT_NE(config, nullptr) << c.yaml;
    EXPECT_EQ(show(config->limits.per_sandbox), c.per_sandbox);
    std::vector<std::string> effective;
    for (const Sandbox& sandbox : config->sandboxes) {
      effective.push_back(show(sandbox.limits));
    }
    EXPECT_THAT(effective, ElementsAreArray(c.effective));
  }
}

TEST(SandboxLimits, Errors) {
  runCases({
      {"unknown key in the defaults",
       kMinimal + "limits:\n  per_sandbox:\n    max_conns: 1\n",
       {"test.yaml:12:5: limits.per_sandbox: unknown key 'max_conns' (expected one of: "
        "max_connections, requests_per_second, request_burst, "
        "dns_queries_per_second, max_streams)"}},
      {"unknown key in a sandbox",
       twoSandboxes("", "      burst: 1\n", ""),
       {"test.yaml:7:7: sandboxes[0].limits: unknown key 'burst' (expected one of: "
        "max_connections, requests_per_second, request_burst, "
        "dns_queries_per_second, max_streams)"}},
      {"zero, everywhere",
       twoSandboxes("limits:\n  per_sandbox:\n    max_connections: 0\n",
                    "      requests_per_second: 0\n      request_burst: 0\n", ""),
       {"test.yaml:4:22: limits.per_sandbox.max_connections: must be at least 1 (leave the key "
        "out for no limit)",
        "test.yaml:10:28: sandboxes[0].limits.requests_per_second: must be at least 1 (leave "
        "the key out for no limit)",
        "test.yaml:11:22: sandboxes[0].limits.request_burst: must be at least 1 (leave the key "
        "out for no limit)"}},
      {"a rate faster than one a nanosecond",
       kMinimal + "limits:\n  per_sandbox:\n    requests_per_second: 1000000001\n",
       {"test.yaml:12:26: limits.per_sandbox.requests_per_second: must be at most 1000000000"}},
      {"not plain decimal numbers",
       twoSandboxes("", "      max_connections: 010\n", "      requests_per_second: '5'\n"),
       {"test.yaml:7:24: sandboxes[0].limits.max_connections: '010' is not a plain decimal "
        "number (a leading 0 or 0x would be read as octal or hex)",
        "test.yaml:12:28: sandboxes[1].limits.requests_per_second: expected a number, got the "
        "quoted string '5' (write it without quotes)"}},
      {"not a map",
       twoSandboxes("limits:\n  per_sandbox: 5\n", "      - 1\n", ""),
       {"test.yaml:3:16: limits.per_sandbox: expected a map, got '5'",
        "test.yaml:9:7: sandboxes[0].limits: expected a map, got a list"}},
      {"duplicate key",
       twoSandboxes("", "      max_connections: 1\n      max_connections: 2\n", ""),
       {"test.yaml:8:7: sandboxes[0].limits: duplicate key 'max_connections' (first at line 7)"}},
      {"a sandbox's burst without any rate",
       twoSandboxes("", "", "      request_burst: 5\n"),
       {"test.yaml:10:22: sandboxes[1].limits.request_burst: a burst needs a rate: set "
        "requests_per_second here or in limits.per_sandbox"}},
      {"a default burst left without a rate: once, naming the first such sandbox",
       twoSandboxes("", "      requests_per_second: 5\n", "",
                    "limits:\n  per_sandbox:\n    request_burst: 5\n"),
       {"test.yaml:17:20: limits.per_sandbox.request_burst: a burst needs a rate: sandbox 'b' "
        "has none; set limits.per_sandbox.requests_per_second or the sandbox's own"}},
      {"a default burst, no rate anywhere",
       twoSandboxes("limits:\n  per_sandbox:\n    request_burst: 5\n", "", ""),
       {"test.yaml:4:20: limits.per_sandbox.request_burst: a burst needs a rate: sandbox 'a' "
        "has none; set limits.per_sandbox.requests_per_second or the sandbox's own"}},
      {"the burst errors take their place in document order",
       twoSandboxes("", "      request_burst: 5\n", "      max_connections: 1\n    colour: blue\n"),
       {"test.yaml:7:22: sandboxes[0].limits.request_burst: a burst needs a rate: set "
        "requests_per_second here or in limits.per_sandbox",
        "test.yaml:13:5: sandboxes[1]: unknown key 'colour' (expected one of: name, listen, "
        "transparent, dns_listen, ca, policy, mode, original_dst, refusal, audit, limits)"}},
  });
}

TEST(SandboxLimits, DnsQueryRate) {
  auto config = load(twoSandboxes("limits:\n  per_sandbox:\n    dns_queries_per_second: 40\n",
                                  "      dns_queries_per_second: 3\n", ""));
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->limits.per_sandbox.dns_queries_per_second, 40u);
  EXPECT_EQ(config->sandboxes[0].limits.dns_queries_per_second, 3u);
  EXPECT_EQ(config->sandboxes[1].limits.dns_queries_per_second, 40u);
  EXPECT_EQ(config->sandboxes[1].limits.requests_per_second, std::nullopt);
  EXPECT_THAT(errorsOf(twoSandboxes("", "      dns_queries_per_second: 0\n", "")),
              ElementsAre("test.yaml:7:31: sandboxes[0].limits.dns_queries_per_second: must be "
                          "at least 1 (leave the key out for no limit)"));
}

// max_streams: a sandbox's HTTP/2 streams per connection (its SETTINGS_MAX_CONCURRENT_STREAMS),
// 1 to 100; left out in both, sluice's own 100.
TEST(SandboxLimits, MaxStreams) {
  auto config = load(twoSandboxes("limits:\n  per_sandbox:\n    max_streams: 20\n",
                                  "      max_streams: 1\n", ""));
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->limits.per_sandbox.max_streams, 20u);
  EXPECT_EQ(config->sandboxes[0].limits.max_streams, 1u);
  EXPECT_EQ(config->sandboxes[1].limits.max_streams, 20u);
  auto unset = load(twoSandboxes("", "      max_streams: 100\n", ""));
  ASSERT_NE(unset, nullptr);
  EXPECT_EQ(unset->sandboxes[0].limits.max_streams, 100u);
  EXPECT_EQ(unset->sandboxes[1].limits.max_streams, std::nullopt);
  EXPECT_THAT(errorsOf(twoSandboxes("", "      max_streams: 0\n", "      max_streams: 101\n")),
              ElementsAre("test.yaml:7:20: sandboxes[0].limits.max_streams: must be at least 1 "
                          "(leave the key out for 100)",
                          "test.yaml:12:20: sandboxes[1].limits.max_streams: must be at most 100"));
}

TEST(SandboxLimits, ErrorsInASandboxesDirFile) {
  const auto errors =
      errorsOf(kWithDir + "limits:\n  per_sandbox:\n    max_connections: 3\n",
               dirOptions({
                   {"sb/a.yaml",
                    "name: a\nlisten: 127.0.0.1:3128\npolicy: p\nlimits:\n  request_burst: 2\n"},
                   {"sb/b.yaml",
                    "name: b\nlisten: 127.0.0.1:3129\npolicy: p\nlimits:\n  max_connections: 0\n"
                    "  rate: 1\n"},
                   {"sb/c.yaml", "name: c\nlisten: 127.0.0.1:3130\npolicy: p\nlimits: []\n"},
               }));
  EXPECT_THAT(errors,
              ElementsAre("sb/a.yaml:5:18: limits.request_burst: a burst needs a rate: set "
                          "requests_per_second here or in limits.per_sandbox",
                          "sb/b.yaml:5:20: limits.max_connections: must be at least 1 (leave the "
                          "key out for no limit)",
                          "sb/b.yaml:6:3: limits: unknown key 'rate' (expected one of: "
                          "max_connections, requests_per_second, request_burst, "
                          "dns_queries_per_second, max_streams)",
                          "sb/c.yaml:4:9: limits: expected a map, got a list"));
}

TEST(ConfigModel, ToStrings) {
  EXPECT_EQ(toString(Scheme::Https), "https");
  EXPECT_EQ(toString(Scheme::Http), "http");
  EXPECT_EQ(toString(SandboxMode::Enforce), "enforce");
  EXPECT_EQ(toString(SandboxMode::Report), "report");
  EXPECT_EQ(toString(OriginalDst::Ignore), "ignore");
  EXPECT_EQ(toString(OriginalDst::RequireMatch), "require_match");
}

}  // namespace
}  // namespace sluice::policy
