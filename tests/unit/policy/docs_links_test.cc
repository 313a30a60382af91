// Every link into the docs resolves. Two kinds, anywhere in the source tree:
//   - a Markdown link of a page (`[text](target)`, outside ``` blocks), to a file or folder that
//     is there, relative to the page; with `#anchor`, to a heading that page has;
//   - a page named with an anchor in any text file (`docs/wire.md#http2` in a comment of the
//     code, a test's docstring, a script, a page's prose), the path read from the tree's root or
//     from the file's folder, the anchor one of that page's headings.
// Anchors are GitHub's (tests/support/markdown.h: headingAnchor). A heading renamed without its
// links, or a link written to a heading that never was, fails here with the file and line of
// the link. It sits beside docs_contract_test.cc and links nothing of policy/.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/markdown.h"
#include "tests/support/temp_dir.h"

namespace sluice::test_support {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(SLUICE_SOURCE_DIR).lexically_normal();
constexpr std::uintmax_t kLargestText = 1 << 20;

// One reference to a page, as written at `line` of `file`.
struct Reference {
  std::string file;  // relative to the root
  std::size_t line = 0;
  std::string written;
  std::vector<fs::path> candidates;  // where the page may be, in order; empty: `file` itself
  std::string anchor;                // empty: the page only
};

bool isPathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '/' || c == '-';
}
bool isAnchorChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}
bool hasScheme(std::string_view target) {
  const std::size_t colon = target.find(':');
  return colon != std::string_view::npos && target.find_first_of("/#") > colon;
}

// The Markdown links of page `file` (relative to the root), outside ``` blocks.
void markdownLinks(const std::string& file, std::string_view text, std::vector<Reference>& out) {
  const fs::path folder = fs::path(file).parent_path();
  bool fenced = false;
  std::size_t number = 0;
  for (std::string_view line : linesOf(text)) {
    ++number;
    if (isFence(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      continue;
    }
    for (std::size_t open = line.find("]("); open != std::string_view::npos;
         open = line.find("](", open + 2)) {
      const std::size_t from = open + 2;
      const std::size_t close = line.find_first_of(") ", from);
      std::string_view target = line.substr(from, close - from);
      if (target.empty() || hasScheme(target)) {
        continue;  // another site, mailto:
      }
      Reference ref{file, number, std::string(target), {}, {}};
      const std::size_t hash = target.find('#');
      if (hash != std::string_view::npos) {
        ref.anchor = target.substr(hash + 1);
        target = target.substr(0, hash);
      }
      if (!target.empty()) {
        ref.candidates.push_back((folder / target).lexically_normal());
      }
      out.push_back(std::move(ref));
    }
  }
}

// Every page named with an anchor in `text` (a path ending in ".md", then '#' and the anchor),
// but the Markdown link targets of a page (markdownLinks reads those, relative to the page).
void namedAnchors(const std::string& file, std::string_view text, std::vector<Reference>& out) {
  const bool page = file.ends_with(".md");
  const fs::path folder = fs::path(file).parent_path();
  std::size_t number = 1;
  std::size_t counted = 0;
  for (std::size_t mark = text.find(".md#"); mark != std::string_view::npos;
       mark = text.find(".md#", mark + 4)) {
    std::size_t begin = mark;
    while (begin > 0 && isPathChar(text[begin - 1])) {
      --begin;
    }
    std::size_t end = mark + 4;
    while (end < text.size() && isAnchorChar(text[end])) {
      ++end;
    }
    for (; counted < begin; ++counted) {
      number += text[counted] == '\n' ? 1 : 0;
    }
    const std::string_view path = text.substr(begin, mark + 3 - begin);
    if (path == ".md" || (page && begin >= 2 && text.substr(begin - 2, 2) == "](")) {
      continue;
    }
    Reference ref{file, number, std::string(text.substr(begin, end - begin)), {}, {}};
    ref.candidates.push_back(fs::path(path).lexically_normal());
    ref.candidates.push_back((folder / path).lexically_normal());
    ref.anchor = text.substr(mark + 4, end - mark - 4);
    out.push_back(std::move(ref));
  }
}

// The folders no link can point into: git's, build trees (a CMakeCache.txt, or a name starting
// with "build": build/, build-logs/, build-release/...), and the fuzzers' corpus.
bool skipped(const fs::path& folder) {
  const std::string name = folder.filename().string();
  return name.starts_with('.') || name.starts_with("build") ||
         fs::exists(folder / "CMakeCache.txt") ||
         folder.lexically_relative(kRoot) == fs::path("tests/fuzz/corpus");
}

// The references of every text file of the tree (a file with a NUL byte, or over 1 MiB, is
// not text).
std::vector<Reference> referencesOfTheTree() {
  std::vector<Reference> refs;
  for (auto it = fs::recursive_directory_iterator(kRoot); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_directory()) {
      if (skipped(it->path())) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (!it->is_regular_file() || it->file_size() > kLargestText) {
      continue;
    }
    const std::string text = readFile(it->path().string());
    if (text.find('\0') != std::string::npos) {
      continue;
    }
    const std::string file = it->path().lexically_relative(kRoot).string();
    if (file.ends_with(".md")) {
      markdownLinks(file, text, refs);
    }
    namedAnchors(file, text, refs);
  }
  return refs;
}

// What is wrong with `ref`, or "".
std::string problemOf(const Reference& ref, std::map<fs::path, std::set<std::string>>& anchors) {
  fs::path page = ref.file;
  if (!ref.candidates.empty()) {
    page.clear();
    for (const fs::path& candidate : ref.candidates) {
      if (fs::exists(kRoot / candidate)) {
        page = candidate;
        break;
      }
    }
    if (page.empty()) {
      return "names no file of the tree";
    }
  }
  if (ref.anchor.empty()) {
    return "";
  }
  if (page.extension() != ".md") {
    return "has an anchor into " + page.string() + ", which is no Markdown page";
  }
  auto found = anchors.find(page);
  if (found == anchors.end()) {
    found = anchors.emplace(page, pageAnchors(readFile((kRoot / page).string()))).first;
  }
  if (!found->second.contains(ref.anchor)) {
    return "names no heading of " + page.string();
  }
  return "";
}

std::vector<std::string> problems(const std::vector<Reference>& refs) {
  std::map<fs::path, std::set<std::string>> anchors;
  std::vector<std::string> found;
  for (const Reference& ref : refs) {
    const std::string problem = problemOf(ref, anchors);
    if (!problem.empty()) {
      found.push_back(ref.file + ":" + std::to_string(ref.line) + ": " + ref.written + " " +
                      problem);
    }
  }
  return found;
}

TEST(DocsLinks, HeadingsGetGithubsAnchors) {
  EXPECT_EQ(headingAnchor("HTTP/2 toward origins"), "http2-toward-origins");
  EXPECT_EQ(headingAnchor("`sluice explain`"), "sluice-explain");
  EXPECT_EQ(headingAnchor("sluice audit summary, sluice audit report"),
            "sluice-audit-summary-sluice-audit-report");
  EXPECT_EQ(headingAnchor("The sandbox's resolver as a channel"),
            "the-sandboxs-resolver-as-a-channel");
  EXPECT_EQ(headingAnchor("What `ips` covers"), "what-ips-covers");
  EXPECT_EQ(headingAnchor("limits.per_sandbox, and a sandbox's `limits`"),
            "limitsper_sandbox-and-a-sandboxs-limits");
  EXPECT_EQ(headingAnchor("See [the invariant](#the-invariant) first"), "see-the-invariant-first");
  const std::set<std::string> anchors = pageAnchors(
      "# Title\n## Errors\ntext\n```\n# not a heading\n```\n### Errors\n"
      "  ```sh\n  # nor this\n  ```\n#hashtag\n<a id=\"kept\"></a>\n");
  EXPECT_EQ(anchors, (std::set<std::string>{"title", "errors", "errors-1", "kept"}));
}

// "page#anchor", put together at run time so that this file's own text names no page the walk
// below would read.
std::string at(std::string_view page, std::string_view anchor) {
  return std::string(page) + "#" + std::string(anchor);
}

// The check can fail: a reference of each kind to a heading that is not there, and to a page
// that is not there, among good ones.
TEST(DocsLinks, ABrokenReferenceIsReportedWhereItIsWritten) {
  std::vector<Reference> refs;
  markdownLinks("docs/cli.md",
                "intro\n[ok](" + at("wire.md", "http2") + ") [bad](" + at("wire.md", "grpc-nope") +
                    ") [own](#exit-codes)\n```\n[in a block](" + at("wire.md", "nowhere") +
                    ")\n```\n[gone](" + at("config.md", "rules") + ") [site](https://example.com/" +
                    at("x.md", "y") + ") [folder](../examples)\n",
                refs);
  namedAnchors("proxy/http/x.cc",
               "// see " + at("docs/wire.md", "http2") + " and\n// " + at("docs/wire.md", "grpcx") +
                   ", " + at("docs/config.md", "rules") + ".\n",
               refs);
  EXPECT_EQ(
      problems(refs),
      (std::vector<std::string>{
          "docs/cli.md:2: " + at("wire.md", "grpc-nope") + " names no heading of docs/wire.md",
          "docs/cli.md:6: " + at("config.md", "rules") + " names no file of the tree",
          "proxy/http/x.cc:2: " + at("docs/wire.md", "grpcx") + " names no heading of docs/wire.md",
          "proxy/http/x.cc:2: " + at("docs/config.md", "rules") + " names no file of the tree",
      }));
}

TEST(DocsLinks, EveryReferenceInTheTreeResolves) {
  const std::vector<Reference> refs = referencesOfTheTree();
  // Sanity: the walk found the docs' own links and the code's comments.
  EXPECT_GT(refs.size(), 300u);
  for (const std::string& problem : problems(refs)) {
    ADD_FAILURE() << problem;
  }
}

}  // namespace
}  // namespace sluice::test_support
