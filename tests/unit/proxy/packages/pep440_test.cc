// PyPI's versions: PEP 440 read as packaging's Version reads it (every case below was checked
// against packaging 23), its canonical spelling, and its order.
#include "proxy/packages/pep440.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::packages {
namespace {

struct Spelling {
  std::string_view text;
  std::string_view normal;
};

TEST(Pep440, NormalisesEverySpellingPep440Accepts) {
  const Spelling cases[] = {
      {"1.0", "1.0"},
      {"1.0.0", "1.0.0"},  // the release keeps its trailing zeros
      {"v1.0", "1.0"},
      {"V1.0", "1.0"},
      {" 1.0\n", "1.0"},  // packaging strips surrounding whitespace
      {"01.002.0003", "1.2.3"},
      {"0!1.0", "1.0"},
      {"1!1.0", "1!1.0"},
      {"1.0a1", "1.0a1"},
      {"1.0alpha1", "1.0a1"},
      {"1.0.alpha.1", "1.0a1"},
      {"1.0-A-1", "1.0a1"},
      {"1.0a", "1.0a0"},
      {"1.0b2", "1.0b2"},
      {"1.0beta2", "1.0b2"},
      {"1.0_beta_2", "1.0b2"},
      {"1.0c1", "1.0rc1"},
      {"1.0pre1", "1.0rc1"},
      {"1.0preview1", "1.0rc1"},
      {"1.0RC1", "1.0rc1"},
      {"1.0-rc.1", "1.0rc1"},
      {"1.0a-1", "1.0a1"},  // the separator belongs to the pre-release number
      {"1.0a.", "1.0a0"},
      {"1.0.post1", "1.0.post1"},
      {"1.0post1", "1.0.post1"},
      {"1.0-post-1", "1.0.post1"},
      {"1.0.post", "1.0.post0"},
      {"1.0-1", "1.0.post1"},
      {"1.0-0", "1.0.post0"},
      {"1.0rev2", "1.0.post2"},
      {"1.0.r3", "1.0.post3"},
      {"1.0r", "1.0.post0"},
      {"1.0a1-1", "1.0a1.post1"},
      {"1.0.dev1", "1.0.dev1"},
      {"1.0dev", "1.0.dev0"},
      {"1.0-dev-2", "1.0.dev2"},
      {"1.0_DEV_2", "1.0.dev2"},
      {"1.0a1.post2.dev3", "1.0a1.post2.dev3"},
      {"1.0.post-dev", "1.0.post0.dev0"},
      {"1.0+abc.5", "1.0+abc.5"},
      {"1.0+ABC-5_x", "1.0+abc.5.x"},
      {"1.0+007", "1.0+7"},  // numeric local segments are numbers
      {"1.0+007a", "1.0+007a"},
      {"1!2.0rc1.post2.dev3+Ubuntu.1", "1!2.0rc1.post2.dev3+ubuntu.1"},
      {"18446744073709551615", "18446744073709551615"},
      {"1.0+99999999999999999999999", "1.0+99999999999999999999999"},
  };
  for (const Spelling& c : cases) {
    const std::optional<std::string> normal = normalizePep440(c.text);
    ASSERT_TRUE(normal.has_value()) << c.text;
    EXPECT_EQ(*normal, c.normal) << c.text;
    // The canonical spelling is a fixed point.
    EXPECT_EQ(normalizePep440(*normal), *normal) << c.text;
  }
}

TEST(Pep440, RefusesWhatIsNoVersion) {
  std::string many = "1";
  for (std::size_t i = 1; i < kMaxPep440Release; ++i) {
    many += ".0";
  }
  ASSERT_TRUE(parsePep440(many).has_value());  // exactly the bound
  const std::string too_many = many + ".0";
  const std::string too_long = "1.0+" + std::string(253, 'a');
  const std::string_view cases[] = {
      "",
      " ",
      "v",
      "a1",
      "1.",
      "1..0",
      ".1",
      "1.0-",
      "1.0+",
      "1.0+a..b",
      "1.0+a+b",
      "1.0+é",
      "1.0 a1",
      "1.0ab",
      "1.0prev1",
      "1.0.post1.post2",
      "1.0.dev1.a1",  // the parts come in their order
      "1.0.dev1.post1",
      "1!",
      "1!!2",
      "!1",
      "1.0*",
      "1.0.x",
      "vv1.0",
      "18446744073709551616",  // 2^64
      "1.18446744073709551616",
      "18446744073709551616!1",
      "1.0a18446744073709551616",
      "1.0.post18446744073709551616",
      "1.0.dev18446744073709551616",
      too_many,
      too_long,
      std::string_view("1.0\0", 4),
  };
  for (std::string_view text : cases) {
    EXPECT_FALSE(parsePep440(text).has_value()) << text;
  }
}

TEST(Pep440, Parts) {
  const std::optional<Pep440> v = parsePep440("2!1.2.3rc4.post5.dev6+local.7");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->epoch, 2u);
  EXPECT_EQ(v->release_count, 3u);
  EXPECT_EQ(v->release[2], 3u);
  EXPECT_EQ(v->pre, PreRelease::Rc);
  EXPECT_EQ(v->pre_number, 4u);
  EXPECT_TRUE(v->has_post);
  EXPECT_EQ(v->post, 5u);
  EXPECT_TRUE(v->has_dev);
  EXPECT_EQ(v->dev, 6u);
  EXPECT_EQ(v->local, "local.7");
  EXPECT_TRUE(v->isPrerelease());
  EXPECT_FALSE(parsePep440("1.0.post1")->isPrerelease());
  EXPECT_TRUE(parsePep440("1.0.post1.dev0")->isPrerelease());
  EXPECT_TRUE(parsePep440("1.0a1")->isPrerelease());
  EXPECT_FALSE(parsePep440("1.0+dev")->isPrerelease());
}

int compare(std::string_view a, std::string_view b) {
  const std::optional<Pep440> x = parsePep440(a);
  const std::optional<Pep440> y = parsePep440(b);
  EXPECT_TRUE(x && y) << a << " " << b;
  return x && y ? comparePep440(*x, *y) : 99;
}

void expectAscending(const std::vector<std::string_view>& chain) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    EXPECT_EQ(compare(chain[i], chain[i]), 0) << chain[i];
    for (std::size_t j = i + 1; j < chain.size(); ++j) {
      EXPECT_EQ(compare(chain[i], chain[j]), -1) << chain[i] << " < " << chain[j];
      EXPECT_EQ(compare(chain[j], chain[i]), 1) << chain[j] << " > " << chain[i];
    }
  }
}

// PEP 440's own example of the order of a release's pre-, post- and dev releases, as
// packaging's tests spell it.
TEST(Pep440, ThePepsOrderingExample) {
  expectAscending({"1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12", "1.0b1.dev456",
                   "1.0b2", "1.0b2.post345.dev456", "1.0b2.post345", "1.0rc1.dev456", "1.0rc1",
                   "1.0", "1.0+abc.5", "1.0+abc.7", "1.0+5", "1.0.post456.dev34", "1.0.post456",
                   "1.1.dev1"});
}

TEST(Pep440, MoreOrder) {
  expectAscending({"0.dev0",
                   "0a0",
                   "0",
                   "0.0.0.0.1",
                   "0.9",
                   "0.10",
                   "1.0a1.dev1",
                   "1.0a1",
                   "1.0a1.post1.dev1",
                   "1.0a1.post1",
                   "1.0b1",
                   "1.0rc1",
                   "1.0rc1.post1",
                   "1.0",
                   "1.0+a",
                   "1.0+a.b",
                   "1.0+a.0",
                   "1.0+b",
                   "1.0+0",
                   "1.0+1",
                   "1.0+1.a",
                   "1.0+1.0",
                   "1.0+2",
                   "1.0+10",
                   "1.0.post0.dev0",
                   "1.0.post0",
                   "1.0.post1",
                   "1.1",
                   "18446744073709551615",
                   "1!0.dev0",
                   "1!0.1",
                   "2!0"});
}

TEST(Pep440, Equivalences) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"1.0", "1.0.0"},        {"1", "1.0.0.0.0"},     {"1.0.0.0.0a1", "1.0a1"},
      {"0!1.0", "1.0"},        {"1.0a", "1.0a0"},      {"1.0alpha1", "1.0a1"},
      {"1.0c1", "1.0rc1"},     {"1.0-1", "1.0.post1"}, {"1.0.post", "1.0.post0"},
      {"1.0.dev", "1.0.dev0"}, {"1.0+ABC", "1.0+abc"}, {"1.0+a-b", "1.0+a.b"},
      {"1.0+007", "1.0+7"},    {"v1.0", "1.0"},        {"01.0", "1.0"},
  };
  for (const auto& [a, b] : cases) {
    EXPECT_EQ(compare(a, b), 0) << a << " == " << b;
    EXPECT_EQ(compare(b, a), 0) << b << " == " << a;
  }
  EXPECT_EQ(compare("1!0.1", "2.0"), 1);
}

}  // namespace
}  // namespace sluice::proxy::packages
