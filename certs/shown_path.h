#pragma once
// A path as sluice shows it to its user (the CA's files in the lines of `sluice run`, `sluice
// env`, `sluice ca init`, and in the notices of a generation that made or found them):
// absolute, joined to the working directory the process opens it from, and lexically normal
// ("/x/./ca/../ca" is "/x/ca"), so a user can paste it into a sandbox's environment and a log
// reader can compare two of them. Nothing is looked up on disk: the path need not exist yet.

#include <string>
#include <string_view>

namespace sluice::certs {

// `path` absolute and lexically normal; `path` as it is when the working directory is unknown.
std::string shownPath(std::string_view path);

}  // namespace sluice::certs
