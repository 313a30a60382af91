#pragma once
// PyPI's versions (docs/packages.md#versions): PEP 440 in full, read as pip reads them
// (packaging's Version), and ordered as PEP 440 orders them.
//
//   [v][N!]N(.N)*[{a|b|rc}[N]][.postN][.devN][+local]
// with every spelling PEP 440 accepts: case-insensitive; a leading "v"; pre-release words
// alpha/beta/c/pre/preview (a, b, rc, rc, rc); '-', '_' or '.' before and after each of the
// pre, post and dev words; implicit 0 numbers ("1.0a" is 1.0a0); post-releases as "-N",
// "postN", "revN", "rN"; local segments separated by '-', '_' or '.'.
// Surrounding ASCII whitespace is stripped, as packaging does (pip reads " 1.0" as 1.0, so
// sluice does too); other bytes outside the grammar make the text no version.
//
// Bounds: at most kMaxPep440Length bytes (before stripping), at most kMaxPep440Release
// release numbers, each number (epoch, release, pre, post, dev) fitting in 64 bits: larger is
// refused, never wrapped. Local numeric segments are compared by value at any length.
// Parsing and comparing are linear in the text and allocate nothing: a Pep440 holds a fixed
// array and a view of its local part into the text, valid while that text is.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::proxy::packages {

inline constexpr std::size_t kMaxPep440Length = 256;
inline constexpr std::size_t kMaxPep440Release = 32;

enum class PreRelease : std::uint8_t { None, Alpha, Beta, Rc };

struct Pep440 {
  std::uint64_t epoch = 0;
  std::array<std::uint64_t, kMaxPep440Release> release{};
  std::size_t release_count = 0;  // 1 to kMaxPep440Release
  PreRelease pre = PreRelease::None;
  std::uint64_t pre_number = 0;
  bool has_post = false;
  std::uint64_t post = 0;
  bool has_dev = false;
  std::uint64_t dev = 0;
  std::string_view local;  // as written, without its '+'; empty: a public version

  // PEP 440's pre-releases: a pre or dev part ("1.0a1", "1.0.dev3", "1.0.post1.dev0").
  bool isPrerelease() const { return pre != PreRelease::None || has_dev; }
};

std::optional<Pep440> parsePep440(std::string_view text);

// <0, 0, >0 by PEP 440's order: epoch; release with trailing zeros ignored (1.0 == 1.0.0);
// then .devN < aN < bN < rcN < the release < .postN, the dev of a pre or post release just
// below it; then a local version above its public one, local segments compared left to
// right (numeric ones by value above alphanumeric ones, those case-insensitively), a shorter
// list that is a prefix of a longer one first.
int comparePep440(const Pep440& a, const Pep440& b);

// The canonical spelling (packaging's str(Version)): "1!2.0rc1.post2.dev3+ubuntu.1"; no
// epoch when it is 0, numbers without leading zeros, the local part lower case, its
// separators '.'. The release keeps its trailing zeros ("1.0.0" stays "1.0.0"). Implicit
// numbers made explicit ("1r" is "1.post0") make it at most 9 bytes longer than the text, so
// near kMaxPep440Length it can be longer than parsePep440 reads.
std::string normalizedPep440(const Pep440& version);
// The canonical spelling of `text`, or nullopt when it is no PEP 440 version.
std::optional<std::string> normalizePep440(std::string_view text);

}  // namespace sluice::proxy::packages
