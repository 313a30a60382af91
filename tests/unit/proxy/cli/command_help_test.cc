// The table behind every command's --help, `sluice help` and sluice(1)
// (proxy/cli/command_help.h): complete for each command, its flags named in its synopsis, the
// help text fits a terminal, and the man page cannot be steered by the text it holds.
#include "proxy/cli/command_help.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::cli {
namespace {

TEST(CommandHelp, EveryCommandSaysWhatItDoesWhatItTakesAndShowsAnExample) {
  ASSERT_GE(allCommandHelp().size(), 10u);
  for (const CommandHelp& help : allCommandHelp()) {
    SCOPED_TRACE(std::string(help.name));
    EXPECT_FALSE(help.purpose.empty());
    EXPECT_FALSE(help.description.empty());
    EXPECT_NE(help.example.find("sluice " + std::string(help.name)), std::string::npos);
    EXPECT_TRUE(help.exit_status.starts_with("0"));
    EXPECT_EQ(findCommandHelp(help.name), &help);
    for (const FlagSpec& flag : help.flags) {
      SCOPED_TRACE(std::string(flag.name));
      EXPECT_FALSE(flag.help.empty());
      EXPECT_EQ(flag.value.empty(), !flag.takes_value);
      // Named in the synopsis, by its long name or (as "-c FILE") its short one.
      EXPECT_TRUE(help.synopsis.find("--" + std::string(flag.name)) != std::string::npos ||
                  (!flag.short_name.empty() &&
                   help.synopsis.find("-" + std::string(flag.short_name) + " ") !=
                       std::string::npos))
          << help.synopsis;
    }
  }
  EXPECT_EQ(findCommandHelp("ca"), nullptr);
  EXPECT_EQ(findCommandHelp("audit verify")->flags.size(), 0u);
}

TEST(CommandHelp, TheTextFitsEightyColumns) {
  std::string all = overviewText();
  for (const CommandHelp& help : allCommandHelp()) {
    all += commandHelpText(help);
  }
  std::size_t start = 0;
  while (start < all.size()) {
    const std::size_t end = all.find('\n', start);
    const std::string line = all.substr(start, end - start);
    // An example is as typed, whatever its length.
    if (!line.starts_with("  $ ")) {
      EXPECT_LE(line.size(), 80u) << line;
    }
    EXPECT_EQ(line.find_last_not_of(' ') + 1, line.size()) << "trailing space: " << line;
    start = end + 1;
  }
}

TEST(CommandHelp, OneCommandsHelp) {
  const std::string text = commandHelpText(*findCommandHelp("explain"));
  EXPECT_EQ(text.rfind("usage: sluice explain -c FILE --sandbox NAME --url URL", 0), 0u);
  EXPECT_NE(text.find("\noptions:\n  -c, --config FILE\n      The configuration (required).\n"),
            std::string::npos);
  EXPECT_NE(text.find("  --ip ADDR\n"), std::string::npos);
  EXPECT_NE(text.find("  --resolve\n"), std::string::npos);
  EXPECT_NE(text.find("\nexample:\n  $ sluice explain -c "), std::string::npos);
  EXPECT_NE(text.find("\nexit status:\n  0 sluice would forward it"), std::string::npos);
}

// Every request line of the page is one the generator wrote: a text line never starts with '.'
// or '\'' (it would be a request), a backslash is \e, and options keep their minus signs.
TEST(CommandHelp, TheManPageIsRoffWhateverTheTextSays) {
  const std::string page = manPage("1.2.3-test");
  EXPECT_EQ(page.rfind(".\\\" sluice(1)", 0), 0u);
  EXPECT_NE(page.find(".TH SLUICE 1 \"\" \"sluice 1.2.3\\-test\" \"User Commands\"\n"),
            std::string::npos);
  EXPECT_NE(page.find(".SH SYNOPSIS\n"), std::string::npos);
  EXPECT_NE(page.find(".TP\n.B \\-c, \\-\\-config FILE\n"), std::string::npos);
  for (const CommandHelp& help : allCommandHelp()) {
    EXPECT_NE(page.find(".SS \"sluice " + std::string(help.name) + "\"\n"), std::string::npos);
  }
  const char* const kRequests[] = {".\\\"", ".TH ", ".SH ", ".SS ", ".B ", ".BR ", ".I ",
                                   ".PP", ".TP", ".RS", ".RE", ".nf", ".fi", ".br"};
  std::size_t start = 0;
  while (start < page.size()) {
    const std::size_t end = page.find('\n', start);
    const std::string line = page.substr(start, end - start);
    if (line.starts_with(".") || line.starts_with("'")) {
      bool known = false;
      for (const char* request : kRequests) {
        known = known || line.starts_with(request);
      }
      EXPECT_TRUE(known) << line;
    }
    EXPECT_FALSE(line.empty()) << "a blank line in a man page is a paragraph break groff warns of";
    start = end + 1;
  }
}

}  // namespace
}  // namespace sluice::cli
