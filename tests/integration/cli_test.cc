// The command line, exercised as users run it: the real `sluice` binary as a process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace sluice::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ProcessResult sluice(std::vector<std::string> args) {
  args.insert(args.begin(), SLUICE_BINARY);
  return runProcess(args);
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sluice-cli-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    fs::path p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  fs::path path_;
};

std::string example(const std::string& name) {
  return std::string(SLUICE_SOURCE_DIR) + "/examples/" + name;
}

TEST(Check, AcceptsEveryExample) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(std::string(SLUICE_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    ProcessResult r = sluice({"check", "-c", entry.path().string()});
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.err;
    EXPECT_THAT(r.out, HasSubstr(": ok (")) << entry.path();
    EXPECT_EQ(r.err, "") << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(Check, ReportsEveryErrorWithFileLineColumn) {
  TempDir dir;
  std::string file = dir.write("bad.yaml",
                               "version: 1\n"
                               "sandboxes:\n"
                               "  - name: agent\n"
                               "    listen: 127.0.0.1:3128\n"
                               "    policy: missing\n"
                               "policies:\n"
                               "  p:\n"
                               "    rules:\n"
                               "      - hosts: [\"*.github.io\"]\n"
                               "        ports: [0443]\n"
                               "        colour: blue\n");
  ProcessResult r = sluice({"check", "-c", file});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  std::vector<std::string> lines;
  std::string line;
  for (char c : r.err) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  ASSERT_EQ(lines.size(), 4u) << r.err;
  // Every error, each at its own position, whatever order the loader found them in.
  const std::pair<std::string, std::string> expected[] = {
      {file + ":5:13: ", "missing"},
      {file + ":9:17: ", "github.io"},
      {file + ":10:17: ", "0443"},
      {file + ":11:9: ", "colour"},
  };
  for (const auto& [prefix, word] : expected) {
    bool found = false;
    for (const std::string& l : lines) {
      found = found || (l.starts_with(prefix) && l.find(word) != std::string::npos);
    }
    EXPECT_TRUE(found) << "no line starting " << prefix << " and naming " << word << " in:\n"
                       << r.err;
  }
}

TEST(Check, UnreadableFile) {
  ProcessResult r = sluice({"check", "-c", "/nonexistent/sluice.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("/nonexistent/sluice.yaml: cannot read"));
}

TEST(Check, NeedsConfigFlag) {
  ProcessResult r = sluice({"check"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("usage: sluice check -c FILE"));
}

TEST(Explain, AllowsAMirrorDownload) {
  ProcessResult r = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                            "default", "--url", "https://PyPI.org./simple/requests/"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"("decision":"allow","rule":"pypi","reason":null)"));
  EXPECT_THAT(r.out, HasSubstr(R"("host":"pypi.org")"));
  EXPECT_THAT(r.out, HasSubstr(R"("ip_checked":false,"addresses":[])"));
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one JSON object on one line";
}

// The built-in default's age rule (docs/packages.md#the-age-rule): explain names the package
// and says the rule applies; its verdict needs the publish times only a running sluice reads.
TEST(Explain, SaysWhenTheAgeRuleAppliesToAPackage) {
  ProcessResult r =
      sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox", "default", "--url",
              "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr(R"("package":{"ecosystem":"npm","kind":"file","name":"lodash",)"
                        R"("version":"4.17.21","advisory":null,"why":null,"age_rule":true})"));
}

TEST(Explain, DeniesAnUnlistedHost) {
  ProcessResult r = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                            "default", "--url", "https://attacker.test/x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr(R"("decision":"deny","rule":null,"reason":"not_allowed_host")"));
  EXPECT_THAT(r.out, HasSubstr(R"("status":403)"));
}

TEST(Explain, ChecksGivenAddresses) {
  ProcessResult r =
      sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox", "default", "--url",
              "https://pypi.org/simple/", "--ip", "169.254.169.254", "--ip", "64:ff9b::7f00:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr(R"("reason":"ip_denied")"));
  EXPECT_THAT(r.out, HasSubstr(R"("ip_checked":true)"));
  EXPECT_THAT(
      r.out,
      HasSubstr(
          R"({"ip":"169.254.169.254","usable":false,"class":"link_local","refused":"not_global"})"));
  EXPECT_THAT(
      r.out,
      HasSubstr(
          R"({"ip":"64:ff9b::7f00:1","usable":false,"class":"nat64:loopback","refused":"not_global"})"));

  ProcessResult ok =
      sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox", "default", "--url",
              "https://pypi.org/simple/", "--ip", "10.0.0.1", "--ip", "151.101.0.223"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_THAT(ok.out,
              HasSubstr(R"({"ip":"151.101.0.223","usable":true,"class":"global","refused":null})"));
}

TEST(Explain, SniDefaultsToTheUrlHostAndCanDiffer) {
  ProcessResult r = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                            "default", "--url", "https://pypi.org/", "--sni", "evil.test"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr(R"("reason":"sni_mismatch")"));
  ProcessResult none = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                               "default", "--url", "https://pypi.org/", "--sni", ""});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.out, HasSubstr(R"("reason":"sni_missing")"));
}

TEST(Explain, MethodAndScheme) {
  ProcessResult post = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                               "default", "--url", "https://pypi.org/legacy/", "--method", "POST"});
  EXPECT_EQ(post.exit_code, 1);
  EXPECT_THAT(post.out, HasSubstr(R"("reason":"not_allowed_method")"));
  ProcessResult http = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                               "default", "--url", "http://pypi.org/simple/"});
  EXPECT_EQ(http.exit_code, 1);
  EXPECT_THAT(http.out, HasSubstr(R"("reason":"not_allowed_scheme")"));
  ProcessResult apt = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                              "default", "--url", "http://deb.debian.org/debian/"});
  EXPECT_EQ(apt.exit_code, 0);
  ProcessResult ftp = sluice({"explain", "-c", example("package-mirrors.yaml"), "--sandbox",
                              "default", "--url", "ftp://deb.debian.org/debian/"});
  EXPECT_EQ(ftp.exit_code, 1);
  EXPECT_THAT(ftp.out, HasSubstr(R"("reason":"not_allowed_scheme")"));
}

TEST(Explain, IpLiteralsAndTheirDisguises) {
  for (const char* url : {"https://127.0.0.1/", "https://[::ffff:127.0.0.1]/"}) {
    ProcessResult r = sluice(
        {"explain", "-c", example("package-mirrors.yaml"), "--sandbox", "default", "--url", url});
    EXPECT_EQ(r.exit_code, 1) << url;
    EXPECT_THAT(r.out, HasSubstr(R"("reason":"ip_literal")")) << url;
  }
  for (const char* url : {"http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/"}) {
    ProcessResult r = sluice(
        {"explain", "-c", example("package-mirrors.yaml"), "--sandbox", "default", "--url", url});
    EXPECT_EQ(r.exit_code, 1) << url;
    EXPECT_THAT(r.out, HasSubstr(R"("reason":"bad_host","status":403)")) << url;
  }
}

TEST(Explain, ReportModeForwardsAndSaysWhy) {
  ProcessResult r = sluice({"explain", "-c", example("report-mode.yaml"), "--sandbox", "trial",
                            "--url", "https://example.org/"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"("decision":"report","rule":null,"reason":"not_allowed_host")"));
  EXPECT_THAT(r.out, HasSubstr(R"("mode":"report")"));
}

TEST(Explain, BadInputExitsTwo) {
  const std::string m = example("package-mirrors.yaml");
  const std::vector<std::vector<std::string>> cases = {
      {"explain", "-c", m, "--sandbox", "nobody", "--url", "https://pypi.org/"},
      {"explain", "-c", m, "--sandbox", "default", "--url", "pypi.org"},
      {"explain", "-c", m, "--sandbox", "default", "--url", "https://pypi.org/", "--ip", "x"},
      {"explain", "-c", m, "--sandbox", "default", "--url", "https://pypi.org/", "--method", "G T"},
      {"explain", "-c", m, "--sandbox", "default", "--url", "http://pypi.org/", "--sni", "a"},
      {"explain", "-c", m, "--sandbox", "default"},
      {"explain", "-c", m, "--url", "https://pypi.org/", "--sandbox", "default", "--bogus"},
      {"explain", "-c", "/nonexistent.yaml", "--sandbox", "default", "--url", "https://a/"},
  };
  for (const auto& args : cases) {
    ProcessResult r = sluice(args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(args);
    EXPECT_EQ(r.out, "") << ::testing::PrintToString(args);
    EXPECT_NE(r.err, "") << ::testing::PrintToString(args);
  }
}

TEST(CaInit, WritesAPrivateKeyAndNeverOverwrites) {
  TempDir dir;
  std::string ca_dir = (dir.path() / "agent-1").string();
  ProcessResult first = sluice({"ca", "init", "--dir", ca_dir});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  struct stat key {};
  ASSERT_EQ(::stat((ca_dir + "/ca.key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600u);
  EXPECT_TRUE(fs::exists(ca_dir + "/ca.pem"));
  // wget's and apt's files name the certificate (docs/cli.md#sluice-ca-init).
  std::ifstream apt(ca_dir + "/apt.conf");
  std::string apt_conf((std::istreambuf_iterator<char>(apt)), std::istreambuf_iterator<char>());
  EXPECT_THAT(apt_conf, HasSubstr("Acquire::https::CaInfo \"" + ca_dir + "/ca.pem\";\n"));
  EXPECT_TRUE(fs::exists(ca_dir + "/wgetrc"));
  std::ifstream pem(ca_dir + "/ca.pem");
  std::string before((std::istreambuf_iterator<char>(pem)), std::istreambuf_iterator<char>());

  ProcessResult second = sluice({"ca", "init", "--dir", ca_dir});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("never overwrites"));
  std::ifstream pem2(ca_dir + "/ca.pem");
  std::string after((std::istreambuf_iterator<char>(pem2)), std::istreambuf_iterator<char>());
  EXPECT_EQ(before, after);
}

std::string sandboxConfig(const TempDir& dir, const std::string& sandbox_lines) {
  return dir.write("sluice.yaml", "version: 1\nsandboxes:\n  - name: agent\n" + sandbox_lines +
                                      "    policy: p\npolicies:\n  p:\n    rules:\n"
                                      "      - name: r\n        hosts: [pypi.org]\n");
}

TEST(Env, ProxyAndCaLinesThatAShellCanEvaluate) {
  TempDir dir;
  std::string config = sandboxConfig(
      dir, "    listen: \"[::1]:3128\"\n    ca: \"" + dir.path().string() + "/it's here\"\n");
  ProcessResult r = sluice({"env", "-c", config, "--sandbox", "agent"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("export HTTPS_PROXY='http://[::1]:3128'\n"));
  EXPECT_THAT(r.out, HasSubstr("export http_proxy='http://[::1]:3128'\n"));
  EXPECT_THAT(r.out, HasSubstr("export NODE_USE_ENV_PROXY='1'\n"));
  EXPECT_THAT(r.out,
              HasSubstr("export WGETRC='" + dir.path().string() + "/it'\\''s here/wgetrc'\n"));
  EXPECT_THAT(
      r.out, HasSubstr("export APT_CONFIG='" + dir.path().string() + "/it'\\''s here/apt.conf'\n"));
  // A quote in the path survives the shell: '\'' closes, escapes and reopens.
  EXPECT_THAT(r.out,
              HasSubstr("export PIP_CERT='" + dir.path().string() + "/it'\\''s here/ca.pem'\n"));
  ProcessResult shell = runProcess(
      {"/bin/sh", "-c", "eval \"$1\" && printf '%s' \"$CARGO_HTTP_CAINFO\"", "sh", r.out});
  EXPECT_EQ(shell.out, dir.path().string() + "/it's here/ca.pem");
}

// What a user pastes into a sandbox is one absolute, normal path, however the config named it.
TEST(Env, TheCaPathIsAbsoluteAndNormal) {
  TempDir dir;
  sandboxConfig(dir, "    listen: 127.0.0.1:3128\n    ca: ./state/../ca//agent/.\n");
  ProcessResult r =
      sluice({"env", "-c", dir.path().string() + "/./sluice.yaml", "--sandbox", "agent"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = dir.path().lexically_normal().string() + "/ca/agent/ca.pem";
  EXPECT_THAT(r.out, HasSubstr("export SSL_CERT_FILE='" + want + "'\n"));
  EXPECT_THAT(r.out, HasSubstr("; CA certificate " + want + "\n"));
}

TEST(Env, TransparentOnlySandboxGetsTheCaLinesAlone) {
  TempDir dir;
  std::string config = sandboxConfig(dir, "    transparent: 10.200.0.1:3129\n    ca: /var/ca\n");
  ProcessResult r = sluice({"env", "-c", config, "--sandbox", "agent"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("PROXY")));
  EXPECT_THAT(r.out, HasSubstr("export SSL_CERT_FILE='/var/ca/ca.pem'\n"));
}

TEST(Env, BadInputExitsTwo) {
  TempDir dir;
  std::string wildcard = sandboxConfig(dir, "    listen: 0.0.0.0:3128\n    ca: /var/ca\n");
  ProcessResult r = sluice({"env", "-c", wildcard, "--sandbox", "agent"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("every address"));
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(sluice({"env", "-c", wildcard, "--sandbox", "other"}).exit_code, 2);
  EXPECT_EQ(sluice({"env", "-c", wildcard}).exit_code, 2);
  EXPECT_EQ(sluice({"env", "--sandbox", "agent"}).exit_code, 2);
}

TEST(AuditVerify, UsageAndUnreadableFile) {
  EXPECT_EQ(sluice({"audit", "verify"}).exit_code, 2);
  EXPECT_EQ(sluice({"audit", "check", "x"}).exit_code, 2);
  ProcessResult missing = sluice({"audit", "verify", "/nonexistent/audit.jsonl"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/audit.jsonl"));
  TempDir dir;
  ProcessResult empty = sluice({"audit", "verify", dir.write("empty.jsonl", "")});
  EXPECT_EQ(empty.exit_code, 0);
  EXPECT_EQ(empty.out, "ok 0 records\n");
}

TEST(Usage, UnknownCommandsAndVersion) {
  EXPECT_EQ(sluice({}).exit_code, 2);
  ProcessResult unknown = sluice({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'frobnicate'"));
  ProcessResult version = sluice({"version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, StartsWith("sluice 0.1.0\n"));
  EXPECT_THAT(version.out, HasSubstr("OpenSSL 3."));
}

// Every command's --help (and -h, and `sluice help NAME`) on standard output, exit 0, and the
// same text each way; the overview names each command as docs/cli.md's synopsis does.
TEST(Usage, EveryCommandHasItsHelp) {
  const std::vector<std::vector<std::string>> commands = {{"run"},
                                                          {"check"},
                                                          {"explain"},
                                                          {"ca", "init"},
                                                          {"env"},
                                                          {"audit", "verify"},
                                                          {"audit", "summary"},
                                                          {"audit", "report"},
                                                          {"version"},
                                                          {"help"}};
  std::ifstream docs_file(std::string(SLUICE_SOURCE_DIR) + "/docs/cli.md");
  const std::string docs((std::istreambuf_iterator<char>(docs_file)),
                         std::istreambuf_iterator<char>());
  ProcessResult overview = sluice({"help"});
  EXPECT_EQ(overview.exit_code, 0);
  for (const auto& words : commands) {
    std::string name = words[0] + (words.size() > 1 ? " " + words[1] : "");
    SCOPED_TRACE(name);
    std::vector<std::string> with_flag = words;
    with_flag.push_back("--help");
    ProcessResult help = sluice(with_flag);
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_EQ(help.err, "");
    EXPECT_THAT(help.out, StartsWith("usage: sluice " + name));
    EXPECT_THAT(help.out, HasSubstr("\nexample:\n  $ "));
    EXPECT_THAT(help.out, HasSubstr("\nexit status:\n  0"));
    with_flag.back() = "-h";
    EXPECT_EQ(sluice(with_flag).out, help.out);
    std::vector<std::string> via_help = {"help"};
    via_help.insert(via_help.end(), words.begin(), words.end());
    if (name != "help") {
      EXPECT_EQ(sluice(via_help).out, help.out);
    }
    // The synopsis line, as docs/cli.md's first block has it.
    const std::string usage_line = help.out.substr(7, help.out.find("\n\n") - 7);
    std::string one_line;
    for (char c : usage_line) {
      if (c != '\n' && !(c == ' ' && !one_line.empty() && one_line.back() == ' ')) {
        one_line += c;
      }
    }
    EXPECT_THAT(docs, HasSubstr("\n" + one_line + "\n"));
    EXPECT_THAT(overview.out, HasSubstr("  sluice " + name));
  }
  // --help after other flags, and a group's help: each of its commands.
  EXPECT_EQ(sluice({"check", "-c", "x.yaml", "--help"}).exit_code, 0);
  ProcessResult audit = sluice({"audit", "--help"});
  EXPECT_EQ(audit.exit_code, 0);
  EXPECT_THAT(audit.out, HasSubstr("usage: sluice audit verify FILE"));
  EXPECT_THAT(audit.out, HasSubstr("usage: sluice audit report FILE..."));
  EXPECT_EQ(sluice({"help", "frobnicate"}).exit_code, 2);
  EXPECT_EQ(sluice({"frobnicate", "--help"}).exit_code, 2);
  EXPECT_EQ(sluice({"help", "run", "--man"}).exit_code, 2);
}

// sluice(1) as groff reads it: no warning at the strictest level (-ww), and each command in it.
TEST(Usage, TheManPageRendersWithoutWarnings) {
  TempDir dir;
  ProcessResult page = sluice({"help", "--man"});
  ASSERT_EQ(page.exit_code, 0);
  const std::string path = dir.write("sluice.1", page.out);
  ProcessResult check = runProcess({"/bin/sh", "-c", "groff -man -Tutf8 -ww -z " + path});
  EXPECT_EQ(check.exit_code, 0);
  EXPECT_EQ(check.err, "");
  ProcessResult text = runProcess({"/bin/sh", "-c", "MANWIDTH=80 man -l " + path});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("sluice audit report FILE... -o OUT.html"));
  EXPECT_THAT(text.out, HasSubstr("-c, --config FILE"));
}

}  // namespace
}  // namespace sluice::testing
