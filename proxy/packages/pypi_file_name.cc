#include "proxy/packages/pypi_file_name.h"

#include <algorithm>

#include "base/ascii.h"

namespace sluice::proxy::packages {

namespace {

constexpr bool isNameSeparator(char c) { return c == '-' || c == '_' || c == '.'; }

constexpr bool isFileNameChar(char c) {
  return ascii::isAlnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || c == '!';
}

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// pip's archive extensions (pip/_internal/utils/filetypes.py) but the wheel's, longest first
// where one ends another.
constexpr std::string_view kSdistExtensions[] = {
    ".tar.gz", ".tar.bz2", ".tar.xz", ".tar.lzma", ".tar.lz", ".tar",
    ".zip",    ".tgz",     ".tbz",    ".txz",      ".tlz",
};

std::optional<FileVersion> wheelVersion(std::string_view stem, std::string_view project) {
  std::string_view parts[7];
  std::size_t count = 0;
  for (std::size_t begin = 0;;) {
    const std::size_t dash = stem.find('-', begin);
    if (count == 6) {
      return std::nullopt;
    }
    parts[count++] = stem.substr(begin, dash == std::string_view::npos ? dash : dash - begin);
    if (dash == std::string_view::npos) {
      break;
    }
    begin = dash + 1;
  }
  if (count != 5 && count != 6) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (parts[i].empty()) {
      return std::nullopt;
    }
  }
  // A build tag starts with a digit (PEP 427), else pip's pattern does not match.
  if (count == 6 && !ascii::isDigit(parts[2][0])) {
    return std::nullopt;
  }
  if (!isProjectName(parts[0], project)) {
    return std::nullopt;
  }
  return FileVersion{parts[1], true};
}

std::optional<FileVersion> sdistVersion(std::string_view stem, std::string_view project) {
  // pip's _find_name_version_sep: the first '-' before which stands the project's name.
  for (std::size_t dash = stem.find('-'); dash != std::string_view::npos;
       dash = stem.find('-', dash + 1)) {
    if (isProjectName(stem.substr(0, dash), project)) {
      const std::string_view version = stem.substr(dash + 1);
      if (version.empty()) {
        return std::nullopt;
      }
      return FileVersion{version, false};
    }
  }
  return std::nullopt;
}

}  // namespace

bool isProjectName(std::string_view name, std::string_view normalized) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < name.size();) {
    if (isNameSeparator(name[i])) {
      while (i < name.size() && isNameSeparator(name[i])) {
        ++i;
      }
      if (at == normalized.size() || normalized[at++] != '-') {
        return false;
      }
      continue;
    }
    if (at == normalized.size() || normalized[at++] != ascii::toLower(name[i])) {
      return false;
    }
    ++i;
  }
  return at == normalized.size();
}

bool isPlainFileName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxFileNameLength &&
         std::all_of(name.begin(), name.end(), isFileNameChar);
}

std::optional<std::string_view> fileNameOfUrl(std::string_view url, FileNameBuffer& buffer) {
  for (const char c : url) {
    if (c <= ' ' || c >= 0x7f || c == '\\') {
      return std::nullopt;
    }
  }
  if (const std::size_t hash = url.find('#'); hash != std::string_view::npos) {
    const std::string_view fragment = url.substr(hash + 1);
    const std::size_t equals = fragment.find('=');
    const std::string_view algorithm = fragment.substr(0, equals);
    const std::string_view digest =
        equals == std::string_view::npos ? std::string_view() : fragment.substr(equals + 1);
    if (algorithm.empty() || digest.empty() ||
        !std::all_of(algorithm.begin(), algorithm.end(),
                     [](char c) { return ascii::isLower(c) || ascii::isDigit(c); }) ||
        !std::all_of(digest.begin(), digest.end(), ascii::isHexDigit)) {
      return std::nullopt;
    }
    url = url.substr(0, hash);
  }
  url = url.substr(0, url.find('?'));
  const std::string_view segment = url.substr(url.rfind('/') + 1);  // npos + 1 == 0
  std::size_t size = 0;
  for (std::size_t i = 0; i < segment.size(); ++i) {
    char c = segment[i];
    if (c == '%') {
      const int high = i + 2 < segment.size() ? ascii::hexValue(segment[i + 1]) : -1;
      const int low = high >= 0 ? ascii::hexValue(segment[i + 2]) : -1;
      if (low < 0) {
        return std::nullopt;
      }
      c = static_cast<char>(high << 4 | low);
      i += 2;
    }
    if (size == buffer.size() || !isFileNameChar(c)) {
      return std::nullopt;
    }
    buffer[size++] = c;
  }
  if (size == 0) {
    return std::nullopt;
  }
  return std::string_view(buffer.data(), size);
}

std::optional<FileVersion> versionOfFile(std::string_view file_name,
                                         std::string_view normalized_project) {
  if (!isPlainFileName(file_name)) {
    return std::nullopt;
  }
  if (endsWith(file_name, ".whl")) {
    return wheelVersion(file_name.substr(0, file_name.size() - 4), normalized_project);
  }
  for (const std::string_view extension : kSdistExtensions) {
    if (endsWith(file_name, extension)) {
      return sdistVersion(file_name.substr(0, file_name.size() - extension.size()),
                          normalized_project);
    }
  }
  return std::nullopt;
}

void appendPipVersion(std::string& out, const FileVersion& version) {
  for (const char c : version.written) {
    out.push_back(version.wheel && c == '_' ? '-' : c);
  }
}

}  // namespace sluice::proxy::packages
