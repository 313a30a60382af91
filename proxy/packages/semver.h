#pragma once
// npm's versions (docs/packages.md#versions): SemVer 2.0.0 as the npm registry spells them,
// "1.2.3", "1.2.3-beta.1", "1.2.3+build", and its precedence order (semver.org §11).
//
// What is read, and why it differs from the letter of SemVer where it does:
//   - surrounding ASCII whitespace is stripped, and one leading "v" or "=" is taken, as
//     node-semver does (it trims, and its loose mode takes "v"/"="): npm reads such a key as
//     the version it spells, so sluice must too, or a packument could name one version two
//     ways and have only one judged;
//   - otherwise strict: major.minor.patch without leading zeros, each at most 2^53 - 1
//     (node-semver's Number.MAX_SAFE_INTEGER; larger is refused, never wrapped); prerelease
//     and build identifiers non-empty, of [0-9A-Za-z-], and a numeric prerelease identifier
//     without leading zeros;
//   - at most kMaxSemVerLength bytes before stripping (node-semver's MAX_LENGTH).
// Bounds: parsing and comparing are linear in the text and allocate nothing; a SemVer holds
// views into the text it was parsed from, valid while that text is.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::proxy::packages {

inline constexpr std::size_t kMaxSemVerLength = 256;
inline constexpr std::uint64_t kMaxSemVerNumber = (std::uint64_t{1} << 53) - 1;

struct SemVer {
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  std::uint64_t patch = 0;
  std::string_view prerelease;  // without its '-'; empty: a release
  std::string_view build;       // without its '+'; ignored by the order
};

std::optional<SemVer> parseSemVer(std::string_view text);

// <0, 0, >0 by SemVer precedence: build metadata ignored; a release above its prereleases;
// prerelease identifiers compared left to right, numeric ones by value (of any length) below
// alphanumeric ones, those by ASCII; a shorter list that is a prefix of a longer one first.
int compareSemVer(const SemVer& a, const SemVer& b);

}  // namespace sluice::proxy::packages
