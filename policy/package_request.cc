#include "policy/package_request.h"

#include <array>
#include <optional>

#include "base/ascii.h"
#include "policy/request_path.h"

namespace sluice::policy {

std::string_view toString(PackageRequestKind k) {
  switch (k) {
    case PackageRequestKind::None:
      return "none";
    case PackageRequestKind::Metadata:
      return "metadata";
    case PackageRequestKind::VersionMetadata:
      return "version_metadata";
    case PackageRequestKind::File:
      return "file";
    case PackageRequestKind::Unrecognized:
      return "unrecognized";
  }
  return "unknown";
}

namespace {

// Deeper paths name no package in either registry's namespace; a PyPI file is read from the
// last segment alone.
constexpr std::size_t kMaxSegments = 16;

struct Segment {
  std::string text;  // decoded once, as the registry reads it
  bool encoded_slash = false;
};

struct Segments {
  std::array<Segment, kMaxSegments> items;
  std::size_t count = 0;
  bool too_many = false;
};

// The path's segments, each decoded once. The target was examined: every '%' has two hex
// digits after it, and decoding once is all a registry does.
Segments splitPath(std::string_view path) {
  Segments out;
  std::size_t begin = 1;  // past the leading '/'
  while (begin <= path.size()) {
    std::size_t end = path.find('/', begin);
    if (end == std::string_view::npos) {
      end = path.size();
    }
    if (out.count == kMaxSegments) {
      out.too_many = true;
      return out;
    }
    Segment& segment = out.items[out.count++];
    const std::string_view raw = path.substr(begin, end - begin);
    segment.text.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size()) {
        const int hi = ascii::hexValue(raw[i + 1]);
        const int lo = ascii::hexValue(raw[i + 2]);
        if (hi >= 0 && lo >= 0) {
          const char c = static_cast<char>(hi * 16 + lo);
          segment.encoded_slash = segment.encoded_slash || c == '/';
          segment.text.push_back(c);
          i += 2;
          continue;
        }
      }
      segment.text.push_back(raw[i]);
    }
    begin = end + 1;
  }
  return out;
}

// The registry path's segments ("/npm/" -> ["npm"]), and where the package's own begin in
// `segments`; nullopt when the path is not under it.
std::optional<std::size_t> belowRegistryPath(const Segments& segments, std::string_view base) {
  std::size_t index = 0;
  std::size_t begin = 1;
  while (begin < base.size()) {
    std::size_t end = base.find('/', begin);
    if (end == std::string_view::npos) {
      end = base.size();  // (the loader ends every registry path with '/'; a caller may not)
    }
    const std::string_view part = base.substr(begin, end - begin);
    if (index >= segments.count || segments.items[index].encoded_slash ||
        segments.items[index].text != part) {
      return std::nullopt;
    }
    ++index;
    begin = end + 1;
  }
  return index;
}

PackageRequest unrecognized(Ecosystem e) {
  PackageRequest out;
  out.ecosystem = e;
  out.kind = PackageRequestKind::Unrecognized;
  return out;
}

bool isVersionText(std::string_view text) {
  if (text.empty() || text.size() > 128) {
    return false;
  }
  for (char c : text) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '.' || c == '-' || c == '+' || c == '!' || c == '_';
    if (!ok) {
      return false;
    }
  }
  return true;
}

bool lowerEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char c = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (c != b[i]) {
      return false;
    }
  }
  return true;
}

// npm (docs/packages.md#npm): NAME, @scope%2fNAME or @scope/NAME; then nothing (packument),
// one segment (a version or dist-tag) or "-/BASENAME-VERSION.tgz" (tarball).
PackageRequest recognizeNpm(const Segments& s, std::size_t i) {
  PackageRequest out;
  out.ecosystem = Ecosystem::Npm;
  if (i >= s.count || (i + 1 == s.count && s.items[i].text.empty()) || s.items[i].text == "-") {
    return out;  // the registry's root, or its own endpoints
  }
  std::string raw_name = s.items[i].text;
  if (raw_name.empty()) {
    return unrecognized(Ecosystem::Npm);  // an empty segment: refused as ambiguous before this
  }
  if (raw_name.front() == '@' && !s.items[i].encoded_slash) {
    if (i + 1 >= s.count || s.items[i + 1].encoded_slash) {
      return unrecognized(Ecosystem::Npm);
    }
    raw_name += '/';
    raw_name += s.items[++i].text;
  } else if (raw_name.front() != '@' && s.items[i].encoded_slash) {
    return unrecognized(Ecosystem::Npm);
  }
  ++i;
  std::optional<std::string> name = normalizePackageName(Ecosystem::Npm, raw_name);
  if (!name) {
    return unrecognized(Ecosystem::Npm);
  }
  out.name = std::move(*name);
  const std::size_t rest = s.count - i;
  if (rest == 0 || (rest == 1 && s.items[i].text.empty())) {
    out.kind = PackageRequestKind::Metadata;
    out.form = MetadataForm::NpmPackument;
    return out;
  }
  if (rest == 1 && !s.items[i].encoded_slash && isVersionText(s.items[i].text)) {
    out.kind = PackageRequestKind::VersionMetadata;
    out.form = MetadataForm::NpmVersion;
    out.version = s.items[i].text;
    return out;
  }
  if (rest == 2 && s.items[i].text == "-" && !s.items[i + 1].encoded_slash) {
    const std::string_view file = s.items[i + 1].text;
    const std::string_view name_view = out.name;
    const std::string_view base = name_view.substr(name_view.find('/') + 1);
    constexpr std::string_view kSuffix = ".tgz";
    if (file.size() > base.size() + 1 + kSuffix.size() && file.ends_with(kSuffix) &&
        lowerEquals(file.substr(0, base.size()), base) && file[base.size()] == '-') {
      const std::string_view version =
          file.substr(base.size() + 1, file.size() - base.size() - 1 - kSuffix.size());
      if (isVersionText(version)) {
        out.kind = PackageRequestKind::File;
        out.version = std::string(version);
        return out;
      }
    }
  }
  return unrecognized(Ecosystem::Npm);
}

// PyPI's distribution files (docs/packages.md#pypi): wheels (PEP 427), sdists and eggs, and
// the PEP 658 metadata file beside each. The suffix, once its ".metadata" is taken off.
constexpr std::array<std::string_view, 7> kDistSuffixes = {".whl",    ".tar.gz", ".zip", ".tar.bz2",
                                                           ".tar.xz", ".tgz",    ".egg"};

// Sets name and version from a distribution file name; false when the name is one but its
// parts cannot be read. nullopt: not a distribution file name.
std::optional<bool> readDistFile(std::string_view file, PackageRequest& out) {
  constexpr std::string_view kMetadata = ".metadata";
  if (file.ends_with(kMetadata)) {
    file.remove_suffix(kMetadata.size());
  }
  std::string_view stem;
  std::string_view suffix;
  for (std::string_view candidate : kDistSuffixes) {
    if (file.size() > candidate.size() && file.ends_with(candidate)) {
      stem = file.substr(0, file.size() - candidate.size());
      suffix = candidate;
      break;
    }
  }
  if (suffix.empty()) {
    return std::nullopt;
  }
  std::string_view name;
  std::string_view version;
  if (suffix == ".whl" || suffix == ".egg") {
    // {name}-{version}(-{build})?-{python}-{abi}-{platform}; an egg's {name}-{version}-pyX.Y.
    const std::size_t first = stem.find('-');
    const std::size_t second = stem.find('-', first == std::string_view::npos ? first : first + 1);
    if (first == std::string_view::npos) {
      return false;
    }
    name = stem.substr(0, first);
    version = stem.substr(
        first + 1, second == std::string_view::npos ? std::string_view::npos : second - first - 1);
  } else {
    // {name}-{version}: a legacy name may hold '-', a version never does.
    const std::size_t last = stem.rfind('-');
    if (last == std::string_view::npos) {
      return false;
    }
    name = stem.substr(0, last);
    version = stem.substr(last + 1);
  }
  std::optional<std::string> normal = normalizePackageName(Ecosystem::Pypi, name);
  if (!normal || !isVersionText(version)) {
    return false;
  }
  out.name = std::move(*normal);
  out.version = std::string(version);
  out.file = std::string(file);
  return true;
}

PackageRequest recognizePypi(const Segments& s, std::optional<std::size_t> below) {
  PackageRequest out;
  out.ecosystem = Ecosystem::Pypi;
  if (s.count > 0) {
    const Segment& last = s.items[s.count - 1];
    if (std::optional<bool> read = readDistFile(last.text, out)) {
      if (!*read || last.encoded_slash) {
        return unrecognized(Ecosystem::Pypi);
      }
      out.kind = PackageRequestKind::File;
      return out;
    }
  }
  if (!below) {
    return out;
  }
  const std::size_t i = *below;
  const std::size_t rest = s.count - i;
  auto at = [&](std::size_t k) -> std::string_view { return s.items[i + k].text; };
  for (std::size_t k = 0; k < rest; ++k) {
    if (s.items[i + k].encoded_slash) {
      return unrecognized(Ecosystem::Pypi);
    }
  }
  if (rest == 0 || (rest == 1 && at(0).empty()) ||
      (at(0) == "simple" && (rest == 1 || (rest == 2 && at(1).empty())))) {
    return out;  // the site's root, or the index of every project
  }
  std::string_view name;
  if (at(0) == "simple" && (rest == 2 || (rest == 3 && at(2).empty()))) {
    out.form = MetadataForm::PypiSimple;
    out.kind = PackageRequestKind::Metadata;
    name = at(1);
  } else if (at(0) == "pypi" && rest == 3 && at(2) == "json") {
    out.form = MetadataForm::PypiJson;
    out.kind = PackageRequestKind::Metadata;
    name = at(1);
  } else if (at(0) == "pypi" && rest == 4 && at(3) == "json" && isVersionText(at(2))) {
    out.form = MetadataForm::PypiJson;
    out.kind = PackageRequestKind::VersionMetadata;
    name = at(1);
    out.version = std::string(at(2));
  } else {
    return unrecognized(Ecosystem::Pypi);
  }
  std::optional<std::string> normal = normalizePackageName(Ecosystem::Pypi, name);
  if (!normal) {
    return unrecognized(Ecosystem::Pypi);
  }
  out.name = std::move(*normal);
  return out;
}

}  // namespace

PackageRequest recognizePackageRequest(const RegistrySettings& registry, std::string_view method,
                                       std::string_view target) {
  PackageRequest none;
  none.ecosystem = registry.ecosystem;
  if (method != "GET" && method != "HEAD") {
    return none;
  }
  const TargetCheck check = examineRequestTarget(target);
  if (check.shape == PathShape::Invalid || target.empty() || target.front() != '/') {
    return none;  // refused as bad_request by the decision, or "*"
  }
  if (check.shape == PathShape::Ambiguous && (check.ambiguities & ~kEncodedSlash) != 0) {
    return unrecognized(registry.ecosystem);
  }
  const std::string_view path = target.substr(0, target.find('?'));
  const Segments segments = splitPath(path);
  if (segments.too_many) {
    return belowRegistryPath(segments, registry.path) ? unrecognized(registry.ecosystem) : none;
  }
  const std::optional<std::size_t> below = belowRegistryPath(segments, registry.path);
  if (registry.ecosystem == Ecosystem::Pypi) {
    return recognizePypi(segments, below);
  }
  return below ? recognizeNpm(segments, *below) : none;
}

}  // namespace sluice::policy
