#include "policy/package_name.h"

namespace sluice::policy {

std::string_view toString(Ecosystem e) { return e == Ecosystem::Npm ? "npm" : "pypi"; }

std::string_view osvName(Ecosystem e) { return e == Ecosystem::Npm ? "npm" : "PyPI"; }

std::optional<Ecosystem> ecosystemFromWord(std::string_view word) {
  if (word == "npm") {
    return Ecosystem::Npm;
  }
  if (word == "pypi") {
    return Ecosystem::Pypi;
  }
  return std::nullopt;
}

namespace {

constexpr std::size_t kMaxNpmName = 214;   // validate-npm-package-name
constexpr std::size_t kMaxPypiName = 200;  // beyond any name PyPI holds; bounds the work

bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// A character npm's names may hold once lower-cased: what encodeURIComponent leaves alone,
// less '*' (which a pattern reserves; no package that matters has it).
bool isNpmNameChar(char c) {
  return isLower(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '!' ||
         c == '\'' || c == '(' || c == ')';
}

bool isNpmPart(std::string_view part) {
  if (part.empty() || part.front() == '.' || part.front() == '_') {
    return false;
  }
  for (char c : part) {
    if (!isNpmNameChar(c)) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> normalizeNpm(std::string_view name) {
  if (name.empty() || name.size() > kMaxNpmName) {
    return std::nullopt;
  }
  std::string out(name.size(), '\0');
  for (std::size_t i = 0; i < name.size(); ++i) {
    out[i] = lower(name[i]);
  }
  std::string_view view = out;
  if (view.front() == '@') {
    const std::size_t slash = view.find('/');
    if (slash == std::string_view::npos || !isNpmPart(view.substr(1, slash - 1)) ||
        !isNpmPart(view.substr(slash + 1))) {
      return std::nullopt;
    }
  } else if (!isNpmPart(view)) {
    return std::nullopt;
  }
  return out;
}

bool isPypiSeparator(char c) { return c == '-' || c == '_' || c == '.'; }

// Lower case, each run of separators one '-' (PEP 503). `star` keeps '*' as it is (a pattern).
// nullopt: a character PEP 508 names do not have.
std::optional<std::string> foldPypi(std::string_view text, bool star) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = lower(text[i]);
    if (isPypiSeparator(c)) {
      if (out.empty() || out.back() != '-') {
        out.push_back('-');
      }
    } else if (isLower(c) || isDigit(c) || (star && c == '*')) {
      out.push_back(c);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::string> normalizePypi(std::string_view name) {
  // PEP 508: a letter or digit at each end.
  if (name.empty() || name.size() > kMaxPypiName || isPypiSeparator(name.front()) ||
      isPypiSeparator(name.back())) {
    return std::nullopt;
  }
  return foldPypi(name, false);
}

}  // namespace

std::optional<std::string> normalizePackageName(Ecosystem e, std::string_view name) {
  return e == Ecosystem::Npm ? normalizeNpm(name) : normalizePypi(name);
}

bool globMatches(std::string_view glob, std::string_view text) {
  // Iterative, with one backtrack point: linear in |glob| * |text| at worst, no recursion.
  std::size_t g = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      mark = t;
    } else if (g < glob.size() && glob[g] == text[t]) {
      ++g;
      ++t;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') {
    ++g;
  }
  return g == glob.size();
}

Result<PackagePattern, std::string> PackagePattern::parse(std::string_view text) {
  if (text.empty()) {
    return Err{std::string("a package pattern may not be empty")};
  }
  if (text.size() > kMaxNpmName) {
    return Err{"'" + std::string(text) + "' is longer than any package name"};
  }
  PackagePattern pattern;
  pattern.text_ = std::string(text);
  // npm: lower case; each literal character one a name may hold ('@' and '/' for scopes).
  std::string npm(text.size(), '\0');
  bool npm_ok = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    npm[i] = lower(text[i]);
    npm_ok = npm_ok && (isNpmNameChar(npm[i]) || npm[i] == '*' || npm[i] == '@' || npm[i] == '/');
  }
  if (npm_ok) {
    pattern.npm_ = std::move(npm);
  }
  if (auto pypi = foldPypi(text, true)) {
    pattern.pypi_ = std::move(*pypi);
  }
  if (pattern.npm_.empty() && pattern.pypi_.empty()) {
    return Err{"'" + std::string(text) +
               "' can name no npm or PyPI package: write a name, '@scope/*' or a glob with '*'"};
  }
  return pattern;
}

bool PackagePattern::matches(Ecosystem ecosystem, std::string_view name) const {
  const std::string& form = ecosystem == Ecosystem::Npm ? npm_ : pypi_;
  return !form.empty() && globMatches(form, name);
}

}  // namespace sluice::policy
