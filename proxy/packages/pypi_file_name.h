#pragma once
// The version a PyPI distribution file is of, read from its name exactly as pip reads it
// (docs/packages.md#names): a filter must judge the version pip will see, so it takes the file
// name from the URL pip downloads (its path's last segment, percent-decoded: pip's
// Link.filename), and splits it as pip's LinkEvaluator does.
//
// A name that is no wheel or sdist of the project (another project's file, a legacy .egg,
// .exe or .msi, anything pip would skip) gives nullopt: the filters drop such files unjudged
// rather than refuse the page, because old releases on PyPI still carry them and pip ignores
// them anyway; nothing unjudged is passed on.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::proxy::packages {

inline constexpr std::size_t kMaxFileNameLength = 255;
using FileNameBuffer = std::array<char, kMaxFileNameLength>;

// Whether PEP 503's normal form of `name` (lower case, each run of '-', '_' and '.' one '-':
// packaging's canonicalize_name, which pip uses) is `normalized`.
bool isProjectName(std::string_view name, std::string_view normalized);

// The file name a download URL names as pip reads it, decoded into `buffer`; nullopt when the
// URL is not one the filters pass on: a byte outside printable ASCII, a space or a backslash
// (URL parsers disagree on them), a fragment other than `#<hashname>=<hex>` (pip reads
// `#egg=NAME-VERSION` as the version), an empty last segment, a bad %-escape, or a name of
// other characters than PEP 427/625's (letters, digits, "._+!-").
std::optional<std::string_view> fileNameOfUrl(std::string_view url, FileNameBuffer& buffer);

// Whether `name` consists of PEP 427/625's characters only and is at most kMaxFileNameLength.
bool isPlainFileName(std::string_view name);

// The version of `file_name` when it is a wheel ({name}-{ver}(-{build})?-{py}-{abi}-{plat}.whl,
// PEP 427) or an sdist (pip's archive extensions: .tar.gz, .zip, .tar.bz2, .tgz, ...; name and
// version split at the first '-' before which stands the project's name, as pip splits them) of
// the project whose PEP 503 name is `normalized_project`.
struct FileVersion {
  std::string_view written;  // as the file name writes it
  bool wheel = false;        // pip reads each '_' of a wheel's version as '-'
};
std::optional<FileVersion> versionOfFile(std::string_view file_name,
                                         std::string_view normalized_project);
// The version as pip reads it ("1.0_1" of a wheel is "1.0-1", a post release), appended.
void appendPipVersion(std::string& out, const FileVersion& version);

}  // namespace sluice::proxy::packages
