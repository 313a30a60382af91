// Request targets and path prefixes (docs/policy.md#paths): a path that servers read in more than
// one way matches no prefix.
#include "policy/request_path.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::policy {
namespace {

TEST(CheckRequestTarget, Shapes) {
  struct Row {
    std::string target;
    PathShape shape;
  };
  const Row rows[] = {
      {"/", PathShape::Plain},
      {"*", PathShape::Plain},
      {"/simple/", PathShape::Plain},
      {"/simple/requests/", PathShape::Plain},
      {"/a/b.c/d..e/...", PathShape::Plain},
      {"/a;b=c/d", PathShape::Plain},
      {"/a:b@c!$&'()*+,=-._~", PathShape::Plain},
      {"/%41%7e", PathShape::Plain},
      {"/a?b=../../c", PathShape::Plain},
      {"/a?q=[1]|{x}", PathShape::Plain},
      {"/a?", PathShape::Plain},
      {"/@scope%2fname", PathShape::Ambiguous},
      {"/a/../b", PathShape::Ambiguous},
      {"/a/./b", PathShape::Ambiguous},
      {"/..", PathShape::Ambiguous},
      {"/.", PathShape::Ambiguous},
      {"/a/..", PathShape::Ambiguous},
      {"/a/%2e%2e/b", PathShape::Ambiguous},
      {"/a/%2E./b", PathShape::Ambiguous},
      {"/a/..;/b", PathShape::Ambiguous},
      {"/a/.;x/b", PathShape::Ambiguous},
      {"/a/..;jsessionid=1", PathShape::Ambiguous},
      {"/a//b", PathShape::Ambiguous},
      {"//a", PathShape::Ambiguous},
      {"/a/%2f/b", PathShape::Ambiguous},
      {"/a/%5C..", PathShape::Ambiguous},
      {"/a%00b", PathShape::Ambiguous},
      // Read otherwise after one more decoding: the origin may decode twice.
      {"/v1/public/%252e%252e/admin", PathShape::Ambiguous},
      {"/a/%252E%252e/b", PathShape::Ambiguous},
      {"/a/%252f", PathShape::Ambiguous},
      {"/a/%255c", PathShape::Ambiguous},
      {"/a/%2500", PathShape::Ambiguous},
      {"/a/%2541", PathShape::Ambiguous},
      {"/a/%25%32%65%25%32%65/b", PathShape::Ambiguous},
      {"/a/%25%32%45", PathShape::Ambiguous},
      {"/a/%252%65", PathShape::Ambiguous},
      {"/a/%25%32e", PathShape::Ambiguous},
      {"/a/%25252e", PathShape::Ambiguous},
      {"/a/%25u002e", PathShape::Ambiguous},
      {"/a/%25U002E", PathShape::Ambiguous},
      {"/a/%25%75002e", PathShape::Ambiguous},
      // A "%25" that no second decoding turns into an escape reads the same either way.
      {"/100%25off", PathShape::Plain},
      {"/a/%25", PathShape::Plain},
      {"/a/%252", PathShape::Plain},
      {"/a/%252g", PathShape::Plain},
      {"/a/%25/2e", PathShape::Plain},
      {"/a/%25u00", PathShape::Plain},
      {"/a/%25u00g0", PathShape::Plain},
      {"/a/%25.2e", PathShape::Plain},
      {"/a/2e%25", PathShape::Plain},
      {"/a/%252e", PathShape::Ambiguous},
      // The query is not matched: double encoding there changes no decision.
      {"/a?b=%252e%252e", PathShape::Plain},
      {"/a?%25%32%65", PathShape::Plain},
      {"", PathShape::Invalid},
      {"a/b", PathShape::Invalid},
      {"http://a/b", PathShape::Invalid},
      {"/a b", PathShape::Invalid},
      {"/a\\b", PathShape::Invalid},
      {"/a\"b", PathShape::Invalid},
      {"/a<b>", PathShape::Invalid},
      {"/a|b", PathShape::Invalid},
      {"/a#b", PathShape::Invalid},
      {"/a?b#c", PathShape::Invalid},
      {"/a?b c", PathShape::Invalid},
      {"/%", PathShape::Invalid},
      {"/%4", PathShape::Invalid},
      {"/%g0", PathShape::Invalid},
      {"/a/%u002e", PathShape::Invalid},
      {"/a/%%32%65", PathShape::Invalid},
      {"/a/%2%65", PathShape::Invalid},
      {"/\xc3\xa9", PathShape::Invalid},
      {std::string("/a\0b", 4), PathShape::Invalid},
      {"/a\x7f", PathShape::Invalid},
      {"/a?\x01", PathShape::Invalid},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(checkRequestTarget(row.target), row.shape) << row.target;
  }
}

// Which kinds of ambiguity a path has, as a matcher reads them (a later rule option may accept
// one kind, npm's encoded '/', and still refuse the others).
TEST(ExamineRequestTarget, AmbiguityKinds) {
  struct Row {
    std::string_view target;
    std::uint8_t kinds;
  };
  const Row rows[] = {
      {"/simple/x", 0},
      {"/a/../b", kDotSegment},
      {"/a/..;/b", kDotSegment},
      {"/a//b", kEmptySegment},
      {"/@scope%2fname", kEncodedSlash},
      {"/@scope%2Fname", kEncodedSlash},
      {"/a%5cb", kEncodedBackslash},
      {"/a%00", kEncodedNul},
      {"/a/%252e%252e/b", kDoubleEncoded},
      {"/a/%252f", kDoubleEncoded},
      {"/a/%25%32%66", kDoubleEncoded},
      {"/a/%2e%2e/%252f", kDotSegment | kDoubleEncoded},
      {"/a/../%2f%2500//", kDotSegment | kEncodedSlash | kDoubleEncoded | kEmptySegment},
      // An encoded '/' ends a segment for a server that decodes it before routing.
      {"/a/..%2f%2500", kDotSegment | kEncodedSlash | kDoubleEncoded},
      {"/@s%2f..%2fx", kDotSegment | kEncodedSlash},
      {"/@s%2F%2e", kDotSegment | kEncodedSlash},
      {"/a/%2fb", kEmptySegment | kEncodedSlash},
      {"/a%2f%2fb", kEmptySegment | kEncodedSlash},
      {"/a%2f", kEncodedSlash},
      {"/a..%2fb", kEncodedSlash},
  };
  for (const Row& row : rows) {
    const TargetCheck check = examineRequestTarget(row.target);
    EXPECT_EQ(check.ambiguities, row.kinds) << row.target;
    EXPECT_EQ(check.shape, row.kinds == 0 ? PathShape::Plain : PathShape::Ambiguous)
        << row.target;
  }
  EXPECT_TRUE(examineRequestTarget("/@scope%2fname").has(kEncodedSlash));
  EXPECT_FALSE(examineRequestTarget("/@scope%2fname").has(kDoubleEncoded));
  EXPECT_EQ(examineRequestTarget("/a%zz").shape, PathShape::Invalid);
  EXPECT_EQ(examineRequestTarget("/a%zz").ambiguities, 0);
}

TEST(PathHasPrefix, SegmentWise) {
  struct Row {
    std::string_view target;
    std::string_view prefix;
    bool matches;
  };
  const Row rows[] = {
      {"/simple/", "/simple/", true},
      {"/simple/x", "/simple/", true},
      {"/simple", "/simple/", false},
      {"/simplex/", "/simple/", false},
      {"/simple", "/simple", true},
      {"/simple/", "/simple", true},
      {"/simple/x", "/simple", true},
      {"/simplex", "/simple", false},
      {"/simple?x", "/simple", true},
      {"/simple?x", "/simple/", false},
      {"/%73imple/x", "/simple/", true},
      {"/simple%2fx", "/simple", false},
      {"/SIMPLE/", "/simple/", false},
      {"/", "/", true},
      {"/anything", "/", true},
      {"*", "/", false},
      {"/a/b/c", "/a/b", true},
      {"/a/bc", "/a/b", false},
      // An encoded '/' matches only a "%2f" the prefix spells out, and only there.
      {"/@myorg%2fpkg", "/@myorg%2f", true},
      {"/@myorg%2Fpkg", "/@myorg%2f", true},
      {"/@myorg%2fpkg", "/@myorg%2F", true},
      {"/@myorg%2f", "/@myorg%2f", true},
      {"/@myorg/pkg", "/@myorg%2f", false},
      {"/@myorg%2fpkg", "/@myorg/", false},
      {"/@myorg%2fpkg", "/", false},
      {"/@myorg%2fpkg%2fx", "/@myorg%2f", false},
      {"/@myorg%2fpkg/x%2f", "/@myorg%2f", false},
      {"/@myorg%2fpkg", "/@myorg%2fpkg", true},
      {"/@myorg%2fpkg/-/x.tgz", "/@myorg%2fpkg", true},
      {"/@myorg%2fpkgx", "/@myorg%2fpkg", false},
      {"/@myorg%2fpkg%2fx", "/@myorg%2fpkg", false},
      {"/@myorg%2fpkg?a=%2f", "/@myorg%2f", true},
      {"/npm/@myorg%2fpkg", "/npm/@myorg%2f", true},
      {"/npm%2f@myorg%2fpkg", "/npm/@myorg%2f", false},
      {"/@my%6frg%2fpkg", "/@myorg%2f", true},
      {"/@myorg%252fpkg", "/@myorg%2f", false},
      // Not valid targets (decide() refuses them first), but the matcher still ends on them.
      {"/@myorg%2fpkg%zz", "/@myorg%2f", false},
      {"/a/%2", "/a/", false},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(pathHasPrefix(row.target, row.prefix), row.matches)
        << row.target << " vs " << row.prefix;
  }
}

TEST(IsValidPathPrefix, PolicyPrefixes) {
  for (std::string_view ok : {"/", "/simple/", "/simple", "/v1/messages", "/a;b", "/~u/",
                              "/@myorg%2f", "/npm/@myorg%2F", "/a%2fb", "/a%2fb/c%2f"}) {
    EXPECT_TRUE(isValidPathPrefix(ok)) << ok;
  }
  for (std::string_view bad :
       {"",     "simple/", "/a/../b", "/a//b", "/a?b",     "/a#b",       "/%41",
        "/a b", "*",       "/./",     "/..",   "/a%2f%2f", "/a%2f..%2f", "/a%2f.",
        "/%2e", "/a%2g",   "/a%2",    "/a%5c", "/a%252f",  "/%2f"}) {
    EXPECT_FALSE(isValidPathPrefix(bad)) << bad;
  }
}

}  // namespace
}  // namespace sluice::policy
