// loadConfig(): documents, the root map, the global settings, and the final assembly. Policies
// and secrets are read in config_loader_rules.cc, sandboxes in config_loader_sandboxes.cc.
//
// Order of work: everything that other parts refer to is read first (secrets, then policies,
// then sandboxes, then the files of sandboxes_dir), so that a reference can be checked when it
// is read. What depends on several parts (overlapping endpoints, a sandbox's limits over
// limits.per_sandbox) is settled after all are read. Errors are sorted into file and document
// order at the end.

#include "policy/config_loader.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "policy/config_loader_parts.h"
#include "policy/config_scalars.h"
#include "policy/yaml_walker.h"

namespace sluice::policy {

std::string ConfigError::toString() const {
  if (line == 0) {
    return file + ": " + message;
  }
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

namespace loader {

std::size_t fileRank(const LoadState& state, const std::string& file) {
  return static_cast<std::size_t>(std::find(state.files.begin(), state.files.end(), file) -
                                  state.files.begin());
}

std::string resolvePath(std::string_view file, std::string_view path) {
  if (path.empty() || path.front() == '/') {
    return std::string(path);
  }
  const std::size_t slash = file.rfind('/');
  if (slash == std::string_view::npos) {
    return std::string(path);
  }
  // "./state/a" reads better as "dir/state/a" than "dir/./state/a"; ".." is left alone.
  while (path.size() >= 2 && path.substr(0, 2) == "./") {
    path.remove_prefix(2);
    while (!path.empty() && path.front() == '/') {
      path.remove_prefix(1);
    }
  }
  std::string dir(file.substr(0, slash + 1));  // keeps the '/': "/x.yaml" -> "/"
  if (path.empty() || path == ".") {
    if (dir.size() > 1) {
      dir.pop_back();
    }
    return dir;
  }
  return dir + std::string(path);
}

std::optional<std::string> readPath(YamlWalker& walker, const YamlValue& value, bool allow_stdout) {
  auto text = readString(walker, value);
  if (!text) {
    return std::nullopt;
  }
  if (text->empty()) {
    walker.error(value.mark, "expected a path, got an empty string");
    return std::nullopt;
  }
  if (text->find('\0') != std::string::npos) {
    walker.error(value.mark, quoteForMessage(*text) + ": a path cannot contain NUL");
    return std::nullopt;
  }
  // Nothing here expands "~"; joined to the file's directory it would name a directory "~".
  if (text->front() == '~') {
    walker.error(value.mark,
                 quoteForMessage(*text) + ": '~' is not expanded here; write the full path");
    return std::nullopt;
  }
  if (allow_stdout && *text == "-") {
    return text;
  }
  return resolvePath(walker.file(), *text);
}

std::optional<Endpoint> readEndpoint(YamlWalker& walker, const YamlValue& value, bool port_required,
                                     std::uint16_t default_port) {
  auto text = readString(walker, value);
  if (!text) {
    return std::nullopt;
  }
  std::optional<Endpoint> endpoint = Endpoint::parse(*text, port_required, default_port);
  if (endpoint && endpoint->port != 0) {
    return endpoint;
  }
  // "1.2.3.4:0" or "[::1]:0": say what is wrong with it. ("::1:0" is an IPv6 address.)
  const std::string_view view = *text;
  const std::string_view address = view.substr(0, view.size() >= 2 ? view.size() - 2 : 0);
  const bool port_zero = endpoint.has_value() ||
                         (view.size() > 2 && view.substr(view.size() - 2) == ":0" &&
                          (address.front() == '[' || address.find(':') == std::string_view::npos) &&
                          Endpoint::parse(address, false, 1));
  std::string message = quoteForMessage(*text);
  if (port_zero) {
    message += ": port 0 is not allowed here";
  } else if (!port_required) {
    message +=
        " is not an IP address with an optional port, e.g. 127.0.0.1, "
        "127.0.0.1:5353 or [::1]:53 (names are not allowed here)";
  } else if (Endpoint::parse(*text, false, 1)) {
    message += " needs a port, e.g. 127.0.0.1:3128 or [::1]:3128";
  } else {
    message +=
        " is not an IP address and port, e.g. 127.0.0.1:3128 or [::1]:3128 "
        "(names are not allowed here)";
  }
  walker.error(value.mark, message);
  return std::nullopt;
}

std::optional<std::string> readWord(YamlWalker& walker, const YamlValue& value,
                                    std::string_view what,
                                    std::initializer_list<std::string_view> words) {
  auto text = readString(walker, value);
  if (!text) {
    return std::nullopt;
  }
  std::string choices;
  std::size_t i = 0;
  for (std::string_view word : words) {
    if (*text == word) {
      return text;
    }
    choices += (i == 0 ? "" : (i + 1 == words.size() ? " or " : ", "));
    choices += word;
    ++i;
  }
  walker.error(value.mark,
               quoteForMessage(*text) + " is not " + std::string(what) + ": write " + choices);
  return std::nullopt;
}

std::string unknownName(std::string_view kind, std::string_view name,
                        const std::vector<std::string>& defined) {
  std::string message = "unknown " + std::string(kind) + " " + quoteForMessage(name);
  if (defined.empty()) {
    return message + " (none are defined)";
  }
  message += " (defined: ";
  for (std::size_t i = 0; i < defined.size(); ++i) {
    message += (i == 0 ? "" : ", ") + defined[i];
  }
  return message + ")";
}

std::optional<Duration> readPositiveDuration(YamlWalker& walker, const YamlValue& value) {
  auto duration = readDuration(walker, value);
  if (duration && duration->count() == 0) {
    walker.error(value.mark, "must be greater than 0");
    return std::nullopt;
  }
  return duration;
}

}  // namespace loader

namespace {

using loader::LoadState;
using loader::readPositiveDuration;

constexpr std::string_view kEmptyServers =
    "an empty list has no servers; remove the key to use /etc/resolv.conf";

// yaml-cpp reads a sentinel (0x04) past the end of the text, and an error there points one
// past the end: a message shows it as the end it is, and no error points outside the file.
constexpr char kYamlEndOfInput = '\x04';

// yaml-cpp's message, with a hint where the usual cause is known. A byte yaml-cpp quotes from
// the text is shown as \xNN when it is not printable ASCII (the message goes to a terminal).
std::string parserMessage(const YAML::Exception& e, std::string_view text) {
  std::string message;
  const std::string_view escape = YAML::ErrorMsg::INVALID_ESCAPE;
  if (e.msg == std::string(escape) + kYamlEndOfInput) {
    message = "the text ends inside a double-quoted string, after a backslash";
  } else {
    appendPrintable(message, e.msg);
  }
  if (e.msg == YAML::ErrorMsg::UNKNOWN_ANCHOR) {
    message += " (a host pattern starting with '*' must be quoted: \"*.example.com\")";
  } else if (!e.mark.is_null() && e.mark.line >= 0) {
    std::size_t start = 0;
    for (int line = 0; line < e.mark.line && start != std::string_view::npos; ++line) {
      const std::size_t newline = text.find('\n', start);
      start = newline == std::string_view::npos ? newline : newline + 1;
    }
    if (start != std::string_view::npos && start <= text.size()) {
      const std::string_view line = text.substr(start, text.find('\n', start) - start);
      if (line.find('\t') != std::string_view::npos) {
        message += " (tabs cannot indent YAML; use spaces)";
      }
    }
  }
  return message;
}

// `mark` moved into `text`: at most one past the end of its line, on a line that exists.
YAML::Mark withinText(YAML::Mark mark, std::string_view text) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) {
    return mark;
  }
  std::size_t start = 0;
  for (int line = 0; line < mark.line; ++line) {
    const std::size_t newline = text.find('\n', start);
    if (newline == std::string_view::npos) {
      mark.line = line;  // past the last line: its end
      mark.column = static_cast<int>(text.size() - start);
      return mark;
    }
    start = newline + 1;
  }
  const std::size_t end = std::min(text.find('\n', start), text.size());
  mark.column = std::min(mark.column, static_cast<int>(end - start));
  return mark;
}

// Where a later document starts: the nearest "---" (or "...") line at or above its first node.
YAML::Mark documentStart(std::string_view text, const YAML::Mark& first_node) {
  YAML::Mark found = first_node;
  int line = 0;
  for (std::size_t start = 0; start < text.size() && line <= first_node.line; ++line) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view content = text.substr(start, end - start);
    if (content.substr(0, 3) == "---" || content.substr(0, 3) == "...") {
      found = YAML::Mark();
      found.line = line;
    }
    start = end + 1;
  }
  return found;
}

// Where a second document of `text` begins, if it has one. yaml-cpp 0.7's LoadAll() never
// returns on some malformed streams (one that starts with ','): Parser::HandleNextDocument()
// reports a document it cannot read as read, again and again, and LoadAll() collects an empty
// node each time until memory runs out (yaml-cpp issue 1040, fixed after the 0.7.0 Debian 12
// ships). A config needs its first document and whether there is another, so the parser is
// asked for two, never more.
std::optional<YAML::Mark> secondDocument(const std::string& text) {
  struct FirstMark : YAML::EventHandler {
    void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { first(mark); }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { first(mark); }
    void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  const std::string&) override {
      first(mark);
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
      first(mark);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
      first(mark);
    }
    void OnMapEnd() override {}
    void first(const YAML::Mark& mark) {
      if (!node) {
        node = mark;
      }
    }
    std::optional<YAML::Mark> start;
    std::optional<YAML::Mark> node;
  };
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  FirstMark skipped;
  if (!parser.HandleNextDocument(skipped)) {
    return std::nullopt;
  }
  FirstMark next;
  if (!parser.HandleNextDocument(next)) {
    return std::nullopt;
  }
  return next.node ? next.node : next.start;
}

// The one document of `in`; nullopt, with the errors reported, when there is none or yaml-cpp
// cannot read it. A second document is an error but the first is still checked.
std::optional<YAML::Node> loadDocument(const ConfigText& in, std::string_view empty_message,
                                       std::vector<ConfigError>& errors) {
  // yaml-cpp takes a NUL for the end of the input: whatever follows (a rule's `paths`, say)
  // would be dropped without a word.
  if (const std::size_t nul = in.text.find('\0'); nul != std::string::npos) {
    const std::size_t line_start = in.text.rfind('\n', nul) + 1;  // npos + 1 == 0
    YAML::Mark mark;
    mark.line = static_cast<int>(std::count(in.text.begin(), in.text.begin() + nul, '\n'));
    mark.column = static_cast<int>(nul - line_start);
    errors.push_back(makeConfigError(
        in.file, mark, "", "a NUL byte: YAML reading stops there and would ignore the rest"));
    return std::nullopt;
  }
  YAML::Node document;
  std::optional<YAML::Mark> second;
  try {
    document = YAML::Load(in.text);
    second = secondDocument(in.text);
  } catch (const YAML::Exception& e) {
    errors.push_back(
        makeConfigError(in.file, withinText(e.mark, in.text), "", parserMessage(e, in.text)));
    return std::nullopt;
  }
  if (second && document.IsNull()) {
    // No first document, yet "another" one: yaml-cpp read nothing there (the stream the
    // endless loop above comes from).
    errors.push_back(makeConfigError(in.file, *second, "",
                                     "not YAML (a ',' or other flow indicator outside "
                                     "a flow collection?)"));
    return std::nullopt;
  }
  if (second) {
    errors.push_back(makeConfigError(in.file, documentStart(in.text, *second), "",
                                     "a second YAML document: a config file holds exactly one"));
  }
  if (document.IsNull()) {
    errors.push_back(ConfigError{in.file, 0, 0, std::string(empty_message)});
    return std::nullopt;
  }
  return document;
}

void readDns(YamlWalker& walker, const YamlValue& value, DnsSettings& dns) {
  MapReader map(walker, value, {"servers", "timeout", "max_ttl"});
  map.read("servers", [&](const YamlValue& v) {
    auto servers = readList<Endpoint>(walker, v, kEmptyServers, [&](const YamlValue& item) {
      return loader::readEndpoint(walker, item, false, 53);
    });
    if (servers) {
      dns.servers = std::move(*servers);
    }
  });
  map.read("timeout", [&](const YamlValue& v) {
    dns.timeout = readPositiveDuration(walker, v).value_or(dns.timeout);
  });
  map.read("max_ttl", [&](const YamlValue& v) {
    dns.max_ttl = readDuration(walker, v).value_or(dns.max_ttl);
  });
}

void readAudit(YamlWalker& walker, const YamlValue& value, AuditSettings& audit) {
  MapReader map(walker, value, {"path", "hash_bodies"});
  map.read("path", [&](const YamlValue& v) {
    audit.path = loader::readPath(walker, v, /*allow_stdout=*/true).value_or(audit.path);
  });
  map.read("hash_bodies", [&](const YamlValue& v) {
    audit.hash_bodies = readBool(walker, v).value_or(audit.hash_bodies);
  });
}

void readAdmin(YamlWalker& walker, const YamlValue& value, LoadState& state) {
  MapReader map(walker, value, {"listen"});
  map.read("listen", [&](const YamlValue& v) {
    state.config.admin.listen = loader::readEndpoint(walker, v, true);
    if (state.config.admin.listen) {
      state.endpoints.push_back(loader::EndpointUse{*state.config.admin.listen, "admin.listen",
                                                    walker.file(), v.mark, walker.path()});
    }
  });
}

void readLimits(YamlWalker& walker, const YamlValue& value, LoadState& state) {
  Limits& limits = state.config.limits;
  MapReader map(walker, value,
                {"max_connections", "max_header_bytes", "handshake_timeout", "idle_timeout",
                 "shutdown_grace", "per_sandbox"});
  map.read("max_connections", [&](const YamlValue& v) {
    auto n = readInteger(walker, v);
    if (n && *n == 0) {
      walker.error(v.mark, "must be at least 1");
    } else if (n) {
      limits.max_connections = *n;
    }
  });
  map.read("max_header_bytes", [&](const YamlValue& v) {
    constexpr std::uint64_t kMin = 1024;
    constexpr std::uint64_t kMax = 16 * 1024 * 1024;
    auto n = readSize(walker, v);
    if (n && (*n < kMin || *n > kMax)) {
      walker.error(v.mark, "must be between 1KiB and 16MiB");
    } else if (n) {
      limits.max_header_bytes = *n;
    }
  });
  map.read("handshake_timeout", [&](const YamlValue& v) {
    limits.handshake_timeout = readPositiveDuration(walker, v).value_or(limits.handshake_timeout);
  });
  map.read("idle_timeout", [&](const YamlValue& v) {
    limits.idle_timeout = readPositiveDuration(walker, v).value_or(limits.idle_timeout);
  });
  map.read("shutdown_grace", [&](const YamlValue& v) {
    limits.shutdown_grace = readDuration(walker, v).value_or(limits.shutdown_grace);
  });
  map.read("per_sandbox", [&](const YamlValue& v) {
    loader::readSandboxLimits(walker, v, state.per_sandbox_limits);
    limits.per_sandbox = state.per_sandbox_limits.values;
  });
}

// One file of sandboxes_dir: its root map is one sandbox entry.
void readSandboxFile(const ConfigText& file, LoadState& state) {
  state.files.push_back(file.file);
  auto root =
      loadDocument(file, "empty sandbox file: expected the keys of one sandbox", state.errors);
  if (!root) {
    return;
  }
  YamlWalker walker(file.file, &state.errors);
  try {
    loader::readSandbox(walker, YamlValue{*root, root->Mark()}, state);
  } catch (const YAML::Exception& e) {
    walker.error(e.mark, e.msg);
  }
}

void readSandboxDir(YamlWalker& walker, const YamlValue& value, LoadState& state) {
  auto dir = loader::readPath(walker, value);
  if (!dir) {
    return;
  }
  state.config.sandboxes_dir = *dir;
  if (!state.options.read_sandbox_dir) {
    walker.error(value.mark, "sandboxes_dir is not supported here");
    return;
  }
  auto files = state.options.read_sandbox_dir(*dir);
  if (!files) {
    walker.error(value.mark, files.error());
    return;
  }
  for (const ConfigText& file : files.value()) {
    readSandboxFile(file, state);
  }
}

constexpr std::string_view kNoSandboxes =
    "no sandboxes: add one under 'sandboxes' or set 'sandboxes_dir'";

void readSandboxList(YamlWalker& walker, const YamlValue& value, LoadState& state, bool has_dir) {
  if (!checkSequence(walker, value)) {
    return;
  }
  if (value.node.size() == 0 && !has_dir) {
    walker.error(value.mark, kNoSandboxes);
  }
  std::size_t index = 0;
  for (auto it = value.node.begin(); it != value.node.end(); ++it, ++index) {
    const YAML::Node item = *it;
    YamlWalker::Scope scope(walker, index);
    loader::readSandbox(walker, YamlValue{item, item.Mark()}, state);
  }
}

void readRoot(YamlWalker& walker, const YAML::Node& root, LoadState& state) {
  const YamlValue value{root, root.Mark()};
  // The version first, before anything else is judged: another version's keys would only add
  // noise to the one error that matters.
  const bool versioned = root.IsMap() && root.begin() != root.end() &&
                         root.begin()->first.IsScalar() &&
                         root.begin()->first.Scalar() == "version";
  if (versioned) {
    const YAML::Node key = root.begin()->first;
    const YAML::Node version_node = root.begin()->second;
    YamlWalker::Scope scope(walker, "version");
    const YAML::Mark mark = version_node.IsNull() ? key.Mark() : version_node.Mark();
    auto version = readInteger(walker, YamlValue{version_node, mark});
    if (version && *version != 1) {
      walker.error(mark, "unsupported version " + std::to_string(*version) +
                             ": this sluice reads version 1");
      return;
    }
  }
  MapReader map(walker, value,
                {"version", "dns", "upstream", "audit", "admin", "limits", "sandboxes_dir",
                 "sandboxes", "policies", "secrets"});
  if (!map.isMap()) {
    return;
  }
  if (!versioned) {
    walker.error(value.mark, "the file must start with 'version: 1'");
  }
  map.read("secrets", [&](const YamlValue& v) { loader::readSecrets(walker, v, state); });
  map.read("policies", [&](const YamlValue& v) { loader::readPolicies(walker, v, state); });
  map.read("dns", [&](const YamlValue& v) { readDns(walker, v, state.config.dns); });
  map.read("upstream", [&](const YamlValue& v) {
    loader::readUpstream(walker, v, state.config.upstream);
  });
  map.read("audit", [&](const YamlValue& v) { readAudit(walker, v, state.config.audit); });
  map.read("admin", [&](const YamlValue& v) { readAdmin(walker, v, state); });
  map.read("limits", [&](const YamlValue& v) { readLimits(walker, v, state); });
  const bool has_dir = map.find("sandboxes_dir") != nullptr;
  const bool has_list = map.read(
      "sandboxes", [&](const YamlValue& v) { readSandboxList(walker, v, state, has_dir); });
  if (!has_list && !has_dir) {
    walker.error(value.mark, kNoSandboxes);
  }
  map.read("sandboxes_dir", [&](const YamlValue& v) { readSandboxDir(walker, v, state); });
}

// File order (the main file, then sandboxes_dir's in the order given), then line and column;
// stable, so errors at one position keep the order they were found in.
void sortErrors(LoadState& state) {
  auto rank = [&](const std::string& file) { return loader::fileRank(state, file); };
  std::stable_sort(state.errors.begin(), state.errors.end(),
                   [&](const ConfigError& a, const ConfigError& b) {
                     const auto ra = rank(a.file);
                     const auto rb = rank(b.file);
                     if (ra != rb) {
                       return ra < rb;
                     }
                     if (a.line != b.line) {
                       return a.line < b.line;
                     }
                     return a.column < b.column;
                   });
}

}  // namespace

ConfigResult loadConfig(const ConfigText& main, const LoadOptions& options) {
  LoadState state(options);
  state.files.push_back(main.file);
  state.config.source_file = main.file;
  if (auto root = loadDocument(main, "empty config: expected 'version: 1' first", state.errors)) {
    YamlWalker walker(main.file, &state.errors);
    try {
      readRoot(walker, *root, state);
    } catch (const YAML::Exception& e) {  // not expected from a parsed tree; never fail open
      walker.error(e.mark, e.msg);
    }
  }
  loader::checkEndpointOverlaps(state);
  // Last: the top-level `limits` may come after `sandboxes`, and sandboxes_dir's files after
  // both, so a sandbox's effective limits are known only now.
  loader::resolveSandboxLimits(state);
  if (!state.errors.empty()) {
    sortErrors(state);
    return Err{std::move(state.errors)};
  }

  auto own = std::make_shared<std::vector<Endpoint>>();
  for (const loader::EndpointUse& use : state.endpoints) {
    own->push_back(use.endpoint);
  }
  std::shared_ptr<const std::vector<Endpoint>> own_endpoints = std::move(own);
  for (Sandbox& sandbox : state.config.sandboxes) {
    sandbox.own_endpoints = own_endpoints;
  }
  for (const std::shared_ptr<Policy>& policy : state.policies) {
    policy->index.build(policy->rules);
    state.config.policies.push_back(policy);
  }
  return std::shared_ptr<const Config>(std::make_shared<Config>(std::move(state.config)));
}

}  // namespace sluice::policy
