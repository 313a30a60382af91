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
      {"/\xc3\xa9", PathShape::Invalid},
      {std::string("/a\0b", 4), PathShape::Invalid},
      {"/a\x7f", PathShape::Invalid},
      {"/a?\x01", PathShape::Invalid},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(checkRequestTarget(row.target), row.shape) << row.target;
  }
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
  };
  for (const Row& row : rows) {
    EXPECT_EQ(pathHasPrefix(row.target, row.prefix), row.matches)
        << row.target << " vs " << row.prefix;
  }
}

TEST(IsValidPathPrefix, PolicyPrefixes) {
  for (std::string_view ok : {"/", "/simple/", "/simple", "/v1/messages", "/a;b", "/~u/"}) {
    EXPECT_TRUE(isValidPathPrefix(ok)) << ok;
  }
  for (std::string_view bad : {"", "simple/", "/a/../b", "/a//b", "/a?b", "/a#b", "/%41",
                               "/a b", "*", "/./", "/.."}) {
    EXPECT_FALSE(isValidPathPrefix(bad)) << bad;
  }
}

}  // namespace
}  // namespace sluice::policy
