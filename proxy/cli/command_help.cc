#include "proxy/cli/command_help.h"

#include <cstdlib>

namespace sluice::cli {

namespace {

constexpr FlagSpec kRunFlags[] = {
    {"config", "c", false, true, "FILE",
     "The configuration (docs/configuration.md). Without it, the built-in default: the "
     "package-mirror policy of examples/package-mirrors.yaml."},
};

constexpr FlagSpec kCheckFlags[] = {
    {"config", "c", false, true, "FILE", "The configuration to check (required)."},
};

constexpr FlagSpec kExplainFlags[] = {
    {"config", "c", false, true, "FILE", "The configuration (required)."},
    {"sandbox", "", false, true, "NAME", "The sandbox asking (required)."},
    {"url", "", false, true, "URL",
     "An absolute http:// or https:// URL (required); another scheme is not_allowed_scheme."},
    {"method", "", false, true, "M", "The request's method; default GET."},
    {"sni", "", false, true, "NAME",
     "https only: the SNI of the ClientHello; default the URL's host. --sni= (empty) is a "
     "ClientHello without SNI."},
    {"ip", "", true, true, "ADDR",
     "An address the resolver might answer for the host (repeatable). Without --ip or "
     "--resolve no address is checked."},
    {"resolve", "", false, false, "",
     "Ask the configured resolver, as run would (never /etc/hosts), and check what it "
     "answers; only a name the policy allows is looked up. Exclusive with --ip."},
};

constexpr FlagSpec kCaInitFlags[] = {
    {"dir", "", false, true, "DIR",
     "Where to write ca.key and ca.pem (created, mode 0700, if missing; required)."},
};

constexpr FlagSpec kEnvFlags[] = {
    {"config", "c", false, true, "FILE", "The configuration (required)."},
    {"sandbox", "", false, true, "NAME", "The sandbox the lines are for (required)."},
};

constexpr FlagSpec kSummaryFlags[] = {
    {"json", "", false, false, "", "One JSON object instead of the table, for scripts."},
    {"since", "", false, true, "WHEN",
     "Only records from then on: a time in RFC 3339, UTC unless it carries an offset "
     "(2026-12-03, 2026-12-03T06:00, 2026-12-03T07:00:00+01:00), or a span back from now "
     "(90s, 30m, 2h, 7d)."},
    {"sandbox", "", false, true, "NAME", "Only that sandbox's records."},
};

constexpr FlagSpec kReportFlags[] = {
    {"output", "o", false, true, "OUT.html", "Where to write the page (required)."},
    {"since", "", false, true, "WHEN", "As for audit summary."},
    {"sandbox", "", false, true, "NAME", "Only that sandbox's records."},
};

constexpr FlagSpec kSbomFlags[] = {
    {"output", "o", false, true, "FILE",
     "Where to write the SBOM (written whole to a temporary file, then renamed over FILE); "
     "default standard output."},
    {"sandbox", "", false, true, "NAME", "Only the files that sandbox fetched."},
};

constexpr FlagSpec kHelpFlags[] = {
    {"man", "", false, false, "", "The manual page sluice(1), in roff, on standard output."},
};

constexpr CommandHelp kCommands[] = {
    {"run", "[-c FILE]", "run the gateway",
     "Runs the gateway: a listener per sandbox (explicit proxy, transparent, DNS), each "
     "request forwarded only when its SNI, Host and the addresses sluice resolved itself all "
     "match the sandbox's policy, and one audit record per request.\n\n"
     "A config error prints every error as check does. A missing sandbox CA is created; an "
     "existing one is used, never replaced. Standard error says where each sandbox listens, "
     "where its CA certificate is and the line a sandbox needs, then one line per refusal "
     "(rate-limited) at the default level.\n\n"
     "SIGHUP or a change of the config file reloads it (validated whole first; a bad one "
     "keeps the running configuration). SIGTERM or SIGINT drains requests in flight for up "
     "to limits.shutdown_grace, flushes the audit log and exits 0.",
     kRunFlags,
     "sluice run -c /etc/sluice/sluice.yaml\n"
     "SLUICE_LOG=debug sluice run -c sluice.yaml    # with the per-connection trace",
     "0 clean shutdown; 1 cannot start (an address in use, an unusable CA or "
     "upstream.ca_file); 2 bad arguments, a config error or a secret that cannot be read."},
    {"check", "-c FILE", "validate a configuration",
     "Loads FILE (and the files of its sandboxes_dir) as run would and prints "
     "\"FILE: ok (N sandboxes, N policies, N rules)\", or every error as "
     "FILE:LINE:COL: key.path: message on standard error. It reads the OSV advisories its "
     "policies list (then one line per such policy: how many, and their fingerprint), and no "
     "secret; it opens no CA and binds nothing.",
     kCheckFlags, "sluice check -c /etc/sluice/sluice.yaml",
     "0 the file is valid; 2 bad arguments, any config error, or advisories that cannot be "
     "read."},
    {"explain",
     "-c FILE --sandbox NAME --url URL [--method M] [--sni NAME] [--ip ADDR]... "
     "[--resolve]",
     "the verdict for one hypothetical request",
     "The verdict sluice would give one request, as one JSON object on one line: decision, "
     "rule, reason, status, and each address checked with its class and why it would be "
     "refused. It walks the same decision points as the gateway, in the same order.",
     kExplainFlags,
     "sluice explain -c sluice.yaml --sandbox agent-1 --url https://pypi.org/simple/ --resolve",
     "0 sluice would forward it (allow, or report in a report-mode sandbox); 1 it would deny "
     "it; 2 bad input (flags, config, unknown sandbox, a URL that is not absolute)."},
    {"ca init", "--dir DIR", "write a new sandbox CA",
     "Writes DIR/ca.key (an EC P-256 key, mode 0600), DIR/ca.pem (a self-signed CA "
     "certificate, ten years) and DIR/ca.p12 (the certificate as a Java trust store, password "
     "changeit), and prints the line a sandbox needs to trust it. It never overwrites a CA. "
     "Keep ca.key on the gateway; give the sandbox only ca.pem and ca.p12. run creates a "
     "missing CA itself, and a missing or stale ca.p12.",
     kCaInitFlags, "sluice ca init --dir /var/lib/sluice/agent-1",
     "0 CA written; 1 a CA file already exists, or writing failed; 2 bad arguments."},
    {"env", "-c FILE --sandbox NAME", "the shell lines a sandbox needs",
     "Prints the export lines that point a sandbox's clients at sluice: the proxy variables "
     "in both spellings, NO_PROXY for loopback, and the CA certificate's absolute path in "
     "every variable a common client reads (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, "
     "NODE_EXTRA_CA_CERTS, npm_config_cafile, GIT_SSL_CAINFO, AWS_CA_BUNDLE, ...), and for "
     "Java JAVA_TOOL_OPTIONS with the trust store ca.p12 and the proxy. A transparent-only "
     "sandbox gets the CA lines alone.",
     kEnvFlags, "eval \"$(sluice env -c /etc/sluice/sluice.yaml --sandbox agent-1)\"",
     "0 lines printed; 2 bad arguments, config, unknown sandbox or a wildcard listen."},
    {"audit verify",
     "FILE",
     "check an audit log's hash chain",
     "Checks the hash chain of an audit log in one pass: \"ok N records\", or \"line N: why\" "
     "for the first edited, dropped, reordered or cut record (both on standard output).",
     {},
     "sluice audit verify /var/log/sluice/audit.jsonl",
     "0 the chain is intact; 1 a record is edited, missing, moved or cut; 2 the file cannot "
     "be read, or bad arguments."},
    {"audit summary", "FILE... [--json] [--since WHEN] [--sandbox NAME]",
     "what each sandbox fetched and was refused, per host",
     "Reads audit logs (- is standard input) and tells, per sandbox and host, the requests by "
     "decision and reason, the body bytes each way, first and last seen; then the DNS names "
     "its resolver refused. A line that is no record is counted as skipped, never an error.",
     kSummaryFlags, "sluice audit summary /var/log/sluice/audit.jsonl --since 2h",
     "0; 2 bad arguments or a file that cannot be read."},
    {"audit report", "FILE... -o OUT.html [--since WHEN] [--sandbox NAME]",
     "the same as one self-contained HTML page with charts",
     "Writes what audit summary says as one HTML page that opens with no network (inline "
     "SVG, no script): a timeline of requests by decision, the top hosts by bytes and by "
     "denials, and the tables. Every number is also in a data- attribute.",
     kReportFlags, "sluice audit report /var/log/sluice/audit.jsonl -o report.html",
     "0; 2 bad arguments, or a file that cannot be read or written."},
    {"audit sbom", "FILE... [-o FILE] [--sandbox NAME]",
     "a CycloneDX SBOM of the package files the sandboxes fetched",
     "Reads audit logs (- is standard input) and writes a CycloneDX 1.5 JSON SBOM: one "
     "component per package file (npm, PyPI) a rule with a registry served with status 200, "
     "with its purl, its SHA-256 when the log has it (audit.hash_bodies: true), and the "
     "sandboxes that fetched it. It trusts the logs: run audit verify on them first. A line "
     "that is no record, or whose package cannot be read, is counted on standard error, never "
     "an error.",
     kSbomFlags, "sluice audit verify audit.jsonl && sluice audit sbom audit.jsonl -o sbom.json",
     "0; 2 bad arguments, or a file that cannot be read or written."},
    {"version",
     "",
     "sluice's version and its libraries'",
     "Prints sluice's version and, on a second line, the versions of the libraries it runs "
     "on (OpenSSL, c-ares, libuv, llhttp, nghttp2, spdlog). sluice --version is the same.",
     {},
     "sluice version",
     "0; 2 an argument was given."},
    {"help", "[COMMAND] [--man]", "this overview, a command's help, or the manual page",
     "Without COMMAND, one line per command; with it, that command's help (as "
     "sluice COMMAND --help). --man prints the manual page sluice(1).",
     kHelpFlags, "sluice help audit summary\nsluice help --man | man -l -",
     "0; 2 an unknown command."},
};

// `text` wrapped at `width` columns, each line indented by `indent` spaces (the lines after the
// first by `continued`, when given).
void appendWrapped(std::string& out, std::string_view text, std::size_t indent, std::size_t width,
                   std::size_t continued = std::string::npos) {
  bool first = true;
  std::size_t column = 0;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text.remove_prefix(space == std::string_view::npos ? text.size() : space + 1);
    if (column != 0 && column + 1 + word.size() > width) {
      out += '\n';
      column = 0;
    }
    if (column == 0) {
      column = first || continued == std::string::npos ? indent : continued;
      out.append(column, ' ');
      first = false;
    } else {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  out += '\n';
}

// Each paragraph of `text` (separated by "\n\n") wrapped, a blank line between them.
void appendParagraphs(std::string& out, std::string_view text, std::size_t indent) {
  while (!text.empty()) {
    const std::size_t end = text.find("\n\n");
    appendWrapped(out, text.substr(0, end), indent, 80);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 2);
    if (!text.empty()) {
      out += '\n';
    }
  }
}

std::string flagName(const FlagSpec& flag) {
  std::string name;
  if (!flag.short_name.empty()) {
    name += "-" + std::string(flag.short_name) + ", ";
  }
  name += "--" + std::string(flag.name);
  if (flag.takes_value) {
    name += " " + std::string(flag.value);
  }
  return name;
}

// roff text: a backslash as \e, every '-' as \- (a minus, so options copy as typed), and a
// line that would start with '.' or '\'' (a request) started with \& instead.
std::string roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) {
      out += "\\&";
    }
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

void appendRoffParagraphs(std::string& out, std::string_view text) {
  while (!text.empty()) {
    const std::size_t end = text.find("\n\n");
    out += ".PP\n" + roff(text.substr(0, end)) + "\n";
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 2);
  }
}

}  // namespace

std::span<const CommandHelp> allCommandHelp() { return kCommands; }

const CommandHelp* findCommandHelp(std::string_view name) {
  for (const CommandHelp& help : kCommands) {
    if (help.name == name) {
      return &help;
    }
  }
  return nullptr;
}

std::span<const FlagSpec> commandFlags(std::string_view name) {
  const CommandHelp* help = findCommandHelp(name);
  if (help == nullptr) {
    std::abort();
  }
  return help->flags;
}

std::string commandHelpText(const CommandHelp& help) {
  std::string out;
  appendWrapped(out, "usage: sluice " + std::string(help.name) + " " + std::string(help.synopsis),
                0, 80, 8);
  out += '\n';
  appendParagraphs(out, help.description, 2);
  if (!help.flags.empty()) {
    out += "\noptions:\n";
    for (const FlagSpec& flag : help.flags) {
      out += "  " + flagName(flag) + "\n";
      appendWrapped(out, flag.help, 6, 80);
    }
  }
  out += "\nexample:\n";
  std::string_view example = help.example;
  while (!example.empty()) {
    const std::size_t end = example.find('\n');
    out += "  $ " + std::string(example.substr(0, end)) + "\n";
    example.remove_prefix(end == std::string_view::npos ? example.size() : end + 1);
  }
  out += "\nexit status:\n";
  appendWrapped(out, help.exit_status, 2, 80);
  out += "\nMore in docs/cli.md and sluice(1).\n";
  return out;
}

std::string overviewText() {
  std::string out = "usage: sluice COMMAND [OPTIONS]; sluice COMMAND --help for one command\n\n";
  for (const CommandHelp& help : kCommands) {
    appendWrapped(out, "sluice " + std::string(help.name) + " " + std::string(help.synopsis), 2,
                  80, 10);
    out.append(6, ' ');
    out += help.purpose;
    out += '\n';
  }
  return out;
}

std::string manPage(std::string_view version) {
  std::string out =
      ".\\\" sluice(1), written by `sluice help --man` from proxy/cli/command_help.cc.\n"
      ".TH SLUICE 1 \"\" \"sluice " +
      roff(version) +
      "\" \"User Commands\"\n"
      ".SH NAME\nsluice \\- an egress gateway for sandboxes that run AI agents\n"
      ".SH SYNOPSIS\n";
  for (const CommandHelp& help : kCommands) {
    out += ".B sluice " + roff(help.name) + "\n";
    out += help.synopsis.empty() ? "" : roff(help.synopsis) + "\n";
    out += ".br\n";
  }
  out += ".SH DESCRIPTION\n";
  appendRoffParagraphs(
      out,
      "sluice sits beside each sandbox, terminates and logs its TLS with a per-sandbox CA, "
      "resolves every name itself, and forwards a request only when the SNI, the Host header "
      "and the address it resolved all match the sandbox's allowlist. Every request leaves a "
      "JSON audit record.\n\n"
      "Flags take their value as the next argument or after = (--url=https://x/, -c FILE). "
      "An unknown flag, a flag without its value, a flag given twice (except --ip) and a "
      "stray argument are errors (exit 2).");
  out += ".SH COMMANDS\n";
  for (const CommandHelp& help : kCommands) {
    out += ".SS \"sluice " + roff(help.name) + "\"\n";
    out += ".B sluice " + roff(help.name) + "\n";
    out += help.synopsis.empty() ? "" : roff(help.synopsis) + "\n";
    appendRoffParagraphs(out, help.description);
    for (const FlagSpec& flag : help.flags) {
      out += ".TP\n.B " + roff(flagName(flag)) + "\n" + roff(flag.help) + "\n";
    }
    out += ".PP\nExample:\n.PP\n.RS\n.nf\n" + roff(help.example) + "\n.fi\n.RE\n";
    out += ".PP\nExit status: " + roff(help.exit_status) + "\n";
  }
  out += ".SH ENVIRONMENT\n";
  out += ".TP\n.B SLUICE_WORKERS\nWorker threads, 1 to 256; default one per core.\n";
  out += ".TP\n.B SLUICE_LOG\n" +
         roff(
             "trace, debug, info (the default), warn, err, critical or off. debug adds the "
             "per-connection trace.") +
         "\n";
  out += ".TP\n.BR XDG_STATE_HOME \", \" HOME\n" +
         roff("Where a sandbox without ca keeps its CA.") + "\n";
  // The paths of the Debian package (packaging/CMakeLists.txt).
  out += ".SH FILES\n";
  out += ".TP\n.I /etc/sluice/sluice.yaml\n" +
         roff("The configuration of the packaged service (sluice.service).") + "\n";
  out += ".TP\n.I /etc/sluice/sandboxes.d\n" +
         roff("One file per sandbox (sandboxes_dir in the packaged configuration).") + "\n";
  out += ".TP\n.I /var/lib/sluice\n" + roff("The sandboxes' CAs, in the packaged service.") + "\n";
  out += ".TP\n.I /var/log/sluice\n" + roff("Audit logs, in the packaged service.") + "\n";
  out += ".SH SEE ALSO\n" +
         roff(
             "The reference is in /usr/share/doc/sluice/docs: cli.md, configuration.md, "
             "policy.md, wire.md, audit.md, metrics.md, threat-model.md (README.md is one "
             "level up).") +
         "\n";
  return out;
}

}  // namespace sluice::cli
