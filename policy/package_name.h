#pragma once
// Package names as each registry reads them (docs/packages.md#names), and the patterns of a
// policy's `packages` lists. A name is compared only in its normal form, so that a list entry
// and a request for the same package agree however either was spelled.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace sluice::policy {

// The registries whose URL shapes sluice reads (a rule's `registry`). Crates, Go modules and
// Maven would join here, each with its recogniser (package_request.h) and version order.
enum class Ecosystem : std::uint8_t { Npm, Pypi };
std::string_view toString(Ecosystem e);  // "npm", "pypi": the config's words
// The OSV `affected[].package.ecosystem` value of the ecosystem: "npm", "PyPI".
std::string_view osvName(Ecosystem e);
std::optional<Ecosystem> ecosystemFromWord(std::string_view word);

// The normal form of a package name, or nullopt when `name` cannot be one:
//   npm: lower case (the registry has refused capitals in new names since 2017, so no one can
//        publish a name that differs from an old one by case alone), "@scope/name" or "name",
//        each part of [a-z0-9._~-], not starting with '.' or '_', at most 214 characters;
//   PyPI: PEP 503: lower case, each run of '-', '_' and '.' one '-'; PEP 508's name grammar
//        (ASCII letters and digits, with '-', '_', '.' inside), at most 200 characters.
std::optional<std::string> normalizePackageName(Ecosystem e, std::string_view name);

// One entry of `allow`, `deny` or `exempt`: an exact name ("left-pad"), an npm scope
// ("@myorg/*": every package of the scope), or a glob over the normal form in which '*'
// stands for any run of characters, '/' included ("types-*", "@types/*"). Written names are
// normalised as the ecosystem normalises requests; a glob's literal parts are too, for each
// ecosystem a list can apply to (a policy's lists apply to all its registries).
class PackagePattern {
 public:
  static Result<PackagePattern, std::string> parse(std::string_view text);

  const std::string& text() const { return text_; }  // as written
  // `name` is in its normal form for `ecosystem`.
  bool matches(Ecosystem ecosystem, std::string_view name) const;

 private:
  std::string text_;
  std::string npm_;   // the pattern in npm's normal form ("" when it can name no npm package)
  std::string pypi_;  // ... and in PyPI's
};

// '*' matches any run of characters (none included); every other character itself.
bool globMatches(std::string_view glob, std::string_view text);

}  // namespace sluice::policy
