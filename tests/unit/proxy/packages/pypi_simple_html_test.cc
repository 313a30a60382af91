#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "proxy/packages/pypi_simple_filter.h"
#include "tests/unit/proxy/packages/filter_test_support.h"

namespace sluice::proxy::packages {
namespace {

using testing::TableJudge;

std::string render(std::string json) {
  auto html = renderSimpleHtml(json);
  EXPECT_TRUE(html.ok()) << (html.ok() ? "" : html.error().what);
  return html.ok() ? *html : std::string();
}

// The anchor lines of a rendered page.
std::string anchors(const std::string& html) {
  const std::size_t begin = html.find("    <a ");
  const std::size_t end = html.find("  </body>");
  return begin == std::string::npos ? std::string() : html.substr(begin, end - begin);
}

TEST(PypiSimpleRender, WritesAPep503Page) {
  const std::string html = render(
      R"({"meta":{"api-version":"1.1"},"name":"foo-bar","files":[)"
      R"({"filename":"foo_bar-1.0.tar.gz","url":"https://files.example/p/foo_bar-1.0.tar.gz",)"
      R"("hashes":{"md5":"00ff","sha256":"abcd"},"requires-python":">=3.8, <4",)"
      R"("core-metadata":{"sha256":"beef"},"gpg-sig":false,"yanked":"broken build","size":5},)"
      R"({"filename":"foo_bar-1.0-py3-none-any.whl","url":"../w/foo_bar-1.0-py3-none-any.whl#frag",)"
      R"("hashes":{"md5":"00ff"},"dist-info-metadata":true,"yanked":true},)"
      R"({"filename":"foo_bar-2.0.tar.gz","url":"u","hashes":{},"requires-python":null,"yanked":false}]})");
  EXPECT_EQ(
      html,
      "<!DOCTYPE html>\n<html>\n  <head>\n"
      "    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
      "    <title>Links for foo-bar</title>\n  </head>\n  <body>\n"
      "    <h1>Links for foo-bar</h1>\n"
      "    <a href=\"https://files.example/p/foo_bar-1.0.tar.gz#sha256=abcd\""
      " data-requires-python=\"&gt;=3.8, &lt;4\" data-core-metadata=\"sha256=beef\""
      " data-dist-info-metadata=\"sha256=beef\" data-gpg-sig=\"false\""
      " data-yanked=\"broken build\">foo_bar-1.0.tar.gz</a><br />\n"
      "    <a href=\"../w/foo_bar-1.0-py3-none-any.whl#md5=00ff\" data-core-metadata=\"true\""
      " data-dist-info-metadata=\"true\" data-yanked=\"\">foo_bar-1.0-py3-none-any.whl</a><br />\n"
      "    <a href=\"u\">foo_bar-2.0.tar.gz</a><br />\n"
      "  </body>\n</html>\n");
}

TEST(PypiSimpleRender, EscapesEveryDocumentString) {
  const std::string html = render(
      R"({"meta":{"api-version":"9\"><script>"},"name":"<b>&\"x'",)"
      R"("files":[{"filename":"a\"<b>&c'.tar.gz","url":"https://h/\"><script>alert(1)</script>&x='",)"
      R"("hashes":{"sha256":"<x>","sha512":"ab"},"requires-python":"\"><a href=x>",)"
      R"("yanked":"</a><a href=\"evil\">","core-metadata":{"sha256":"\"x"}}]})");
  EXPECT_EQ(anchors(html),
            "    <a href=\"https://h/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;x=&#39;"
            "#sha512=ab\" data-requires-python=\"&quot;&gt;&lt;a href=x&gt;\""
            " data-core-metadata=\"true\" data-dist-info-metadata=\"true\""
            " data-yanked=\"&lt;/a&gt;&lt;a href=&quot;evil&quot;&gt;\">"
            "a&quot;&lt;b&gt;&amp;c&#39;.tar.gz</a><br />\n");
  EXPECT_NE(html.find("<title>Links for &lt;b&gt;&amp;&quot;x&#39;</title>"), std::string::npos);
  EXPECT_NE(html.find("content=\"1.0\""), std::string::npos);  // not 1.x: the default
  // Every '<' opens one of the page's own tags: 12 of the frame, 3 per anchor.
  EXPECT_EQ(std::count(html.begin(), html.end(), '<'), 15);
}

TEST(PypiSimpleRender, ControlBytesBecomeReplacementCharacters) {
  const std::string html =
      render(R"({"name":"x","files":[{"filename":"a\u0000b\n.tar.gz","url":"u"}]})");
  EXPECT_NE(html.find(">a\xef\xbf\xbd"
                      "b\xef\xbf\xbd.tar.gz</a>"),
            std::string::npos);
}

TEST(PypiSimpleRender, RefusesWhatIsNoPage) {
  for (const std::string& json :
       {std::string("[]"), std::string(R"({"files":[]})"),
        std::string(R"({"name":"x","files":{}})"),
        std::string(R"({"name":"x","files":[{"url":"u"}]})"),
        std::string(R"({"name":"x","files":[{"filename":"f","url":"u","url":"v"}]})"),
        std::string(R"({"name":"x","files":[{"filename":"f","url":1}]})"),
        std::string(R"({"name":"x","files":[]} x)"),
        std::string(R"({"name":"x","files":[],"y":tru})")}) {
    std::string doc = json;
    EXPECT_FALSE(renderSimpleHtml(doc).ok()) << json;
  }
}

TEST(PypiSimpleRender, ItsPagesPassTheHtmlFilter) {
  std::string json =
      R"({"name":"Foo.Bar","files":[{"filename":"foo_bar-1.0.tar.gz","url":"https://h/foo_bar-1.0.tar.gz",)"
      R"("hashes":{"sha256":"ab"},"requires-python":">=3","yanked":"r&d"},)"
      R"({"filename":"foo_bar-2.0.tar.gz","url":"https://h/foo_bar-2.0.tar.gz","hashes":{}}]})";
  const std::string html = render(json);
  TableJudge judge;
  judge.remove("2.0");
  auto result = filterSimpleHtml(html, "foo-bar", judge);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->kept_files, 1u);
  EXPECT_EQ(result->removed_files, 1u);
  EXPECT_EQ(result->body.find("foo_bar-2.0"), std::string::npos);
  EXPECT_NE(result->body.find("foo_bar-1.0.tar.gz</a><br />\n  </body>"), std::string::npos)
      << result->body;
}

const std::string kPage =
    "<!DOCTYPE html>\n<html>\n  <head>\n"
    "    <meta name=\"pypi:repository-version\" content=\"1.1\">\n"
    "    <title>Links for foo-bar</title>\n  </head>\n  <body>\n    <h1>Links for foo-bar</h1>\n"
    "    <a href=\"https://h/p/foo_bar-1.0.tar.gz#sha256=ab12\" data-requires-python=\"&gt;=3.8\">"
    "foo_bar-1.0.tar.gz</a><br />\n"
    "    <a href=\"https://h/p/foo_bar-2.0-py3-none-any.whl#sha256=cd34\" data-yanked>"
    "foo_bar-2.0-py3-none-any.whl</a><br />\n"
    "    <a href=\"https://h/p/foo_bar-2.0.tar.gz#sha256=ef56\">foo_bar-2.0.tar.gz</a><br />\n"
    "  </body>\n</html>\n";

TEST(PypiSimpleHtml, RemovesTheAnchorsOfRemovedVersions) {
  TableJudge judge;
  judge.remove("2.0");
  auto result = filterSimpleHtml(kPage, "Foo.Bar", judge);
  ASSERT_TRUE(result.ok()) << result.error().what;
  std::string expected = kPage;
  for (const char* gone : {"    <a href=\"https://h/p/foo_bar-2.0-py3-none-any.whl#sha256=cd34\" "
                           "data-yanked>foo_bar-2.0-py3-none-any.whl</a><br />",
                           "    <a href=\"https://h/p/foo_bar-2.0.tar.gz#sha256=ef56\">"
                           "foo_bar-2.0.tar.gz</a><br />"}) {
    expected.erase(expected.find(gone), std::string(gone).size() + 1);  // its line goes
  }
  EXPECT_EQ(result->body, expected);
  EXPECT_EQ(result->kept_files, 1u);
  EXPECT_EQ(result->removed_files, 2u);
  ASSERT_EQ(judge.calls.size(), 2u);  // one call per version
  EXPECT_FALSE(judge.calls[0].second.has_value());
}

// An HTML page gives no upload times: each file is asked about by its name (the judge may
// know its time from a JSON page before) and goes when the judge finds it too new.
TEST(PypiSimpleHtml, EachFileIsAskedAboutByItsName) {
  TableJudge judge;
  judge.max_uploaded = 0;  // every file without a time is too new
  auto result = filterSimpleHtml(kPage, "Foo.Bar", judge);
  ASSERT_TRUE(result.ok()) << result.error().what;
  EXPECT_EQ(result->kept_files, 0u);
  EXPECT_EQ(result->removed_files, 3u);
  ASSERT_EQ(judge.file_calls.size(), 3u);
  EXPECT_EQ(judge.file_calls[0].first, "foo_bar-1.0.tar.gz");
  EXPECT_EQ(judge.file_calls[1].first, "foo_bar-2.0-py3-none-any.whl");
  EXPECT_FALSE(judge.file_calls[1].second.has_value());
  ASSERT_EQ(result->removed.size(), 2u);
  EXPECT_TRUE(result->removed[0].whole && result->removed[1].whole);
  EXPECT_EQ(result->body.find("<a "), std::string::npos) << result->body;
}

struct HtmlCase {
  const char* name;
  std::string page;
  int kept;  // -1: the page is refused
};

class PypiHtmlPages : public ::testing::TestWithParam<HtmlCase> {};

TEST_P(PypiHtmlPages, ReadsOrRefuses) {
  TableJudge judge;
  judge.remove("2.0");
  auto result = filterSimpleHtml(GetParam().page, "foo-bar", judge);
  ASSERT_EQ(result.ok(), GetParam().kept >= 0) << (result.ok() ? "" : result.error().what);
  if (result.ok()) {
    EXPECT_EQ(static_cast<int>(result->kept_files), GetParam().kept);
    EXPECT_EQ(result->body.find("2.0"), std::string::npos) << result->body;
  }
}

std::string in(const std::string& body) { return "<html><body>\n" + body + "\n</body></html>"; }
const std::string kOld = "<a href=\"foo_bar-1.0.tar.gz\">foo_bar-1.0.tar.gz</a>";
const std::string kNew = "<a href=\"foo_bar-2.0.tar.gz\">foo_bar-2.0.tar.gz</a>";

INSTANTIATE_TEST_SUITE_P(
    Cases, PypiHtmlPages,
    ::testing::Values(
        HtmlCase{"plain", in(kOld + kNew), 1},
        HtmlCase{"uppercase",
                 in("<A HREF=\"foo_bar-2.0.tar.gz\">foo_bar-2.0.tar.gz</A><BR>" + kOld), 1},
        HtmlCase{"single_quotes", in("<a href='foo_bar-2.0.tar.gz'>foo_bar-2.0.tar.gz</a>"), 0},
        HtmlCase{"unquoted", in("<a href=foo_bar-2.0.tar.gz>foo_bar-2.0.tar.gz</a>"), 0},
        HtmlCase{"gt_in_quotes",
                 in("<a data-requires-python=\">=3\" "
                    "href=\"foo_bar-2.0.tar.gz\">foo_bar-2.0.tar.gz</a>"),
                 0},
        HtmlCase{"entities_in_name",
                 in("<a href=\"foo_bar&#45;2.0.tar.gz\">foo&#x5f;bar-2&#46;0.tar.gz</a>"), 0},
        HtmlCase{"amp_in_url",
                 in("<a href=\"foo_bar-2.0.tar.gz?a=1&amp;b=2\">foo_bar-2.0.tar.gz</a>"), 0},
        HtmlCase{"text_names_another_file",
                 in("<a href=\"foo_bar-1.0.tar.gz\">foo_bar-2.0.tar.gz</a>"), 0},
        HtmlCase{"egg_fragment",
                 in("<a href=\"foo_bar-1.0.tar.gz#egg=foo_bar-2.0\">foo_bar-1.0.tar.gz</a>"), 0},
        HtmlCase{"another_project", in("<a href=\"evil-1.0.tar.gz\">evil-1.0.tar.gz</a>" + kOld),
                 1},
        HtmlCase{"no_href", in("<a name=\"x\">anything</a>" + kOld), 1},
        HtmlCase{"comment", in("<!-- " + kNew + " -->" + kOld), -1},
        HtmlCase{"comment_bang", in("<!--->" + kNew + "-->"), -1},
        HtmlCase{"script", in("<script>" + kNew + "</script>"), -1},
        HtmlCase{"style", in("<style>a{}</style>" + kOld), -1},
        HtmlCase{"base", in("<base href=\"https://evil/\">" + kOld), -1},
        HtmlCase{"cdata", in("<![CDATA[" + kNew + "]]>"), -1},
        HtmlCase{"processing_instruction", in("<?x " + kNew + "?>"), -1},
        HtmlCase{"stray_lt", in("a < b" + kOld), -1},
        HtmlCase{"unclosed_tag", in(kOld) + "<a href=\"foo_bar-2.0.tar.gz\"", -1},
        HtmlCase{"unclosed_quote", in("<a href=\"foo_bar-2.0.tar.gz>foo_bar-2.0.tar.gz</a>"), -1},
        HtmlCase{"unclosed_anchor", in("<a href=\"foo_bar-2.0.tar.gz\">foo_bar-2.0.tar.gz"), -1},
        HtmlCase{"nested_anchor", in("<a href=\"foo_bar-1.0.tar.gz\">" + kNew + "</a>"), -1},
        HtmlCase{"tag_in_anchor",
                 in("<a href=\"foo_bar-2.0.tar.gz\"><span>foo_bar-2.0.tar.gz</span></a>"), -1},
        HtmlCase{"self_closing_anchor",
                 in("<a href=\"foo_bar-2.0.tar.gz\"/>foo_bar-2.0.tar.gz</a>"), -1},
        HtmlCase{
            "repeated_href",
            in("<a href=\"foo_bar-1.0.tar.gz\" HREF=\"foo_bar-2.0.tar.gz\">foo_bar-1.0.tar.gz</a>"),
            -1},
        HtmlCase{"no_space_between_attributes",
                 in("<a href=\"foo_bar-1.0.tar.gz\"data-x=\"y\">foo_bar-1.0.tar.gz</a>"), -1},
        HtmlCase{
            "lt_in_attribute",
            in("<a data-requires-python=\"<4\" href=\"foo_bar-1.0.tar.gz\">foo_bar-1.0.tar.gz</a>"),
            -1},
        HtmlCase{"legacy_entity",
                 in("<a href=\"foo_bar-1.0.tar.gz&sol;..\">foo_bar-1.0.tar.gz</a>"), -1},
        HtmlCase{"entity_without_semicolon", in("<a href=\"foo_bar-1.0.tar.gz&amp\">x</a>"), -1},
        HtmlCase{"windows_1252_reference", in("<a href=\"foo_bar-1.0.tar.gz&#128;\">x</a>"), -1},
        HtmlCase{"stray_end_anchor", in("</a>" + kOld), -1},
        HtmlCase{"unknown_tag", in("<table>" + kOld), -1},
        HtmlCase{"nul", in(kOld) + std::string(1, '\0'), -1},
        HtmlCase{"invalid_utf8", in(kOld + "\xff"), -1},
        HtmlCase{"doctype", "<!DOCTYPE html>" + in(kOld), 1},
        HtmlCase{"other_declaration", "<!DOCTYPE html PUBLIC \"x\">" + in(kOld), -1},
        HtmlCase{"lt_at_the_end", in(kOld) + "<", -1}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace sluice::proxy::packages
