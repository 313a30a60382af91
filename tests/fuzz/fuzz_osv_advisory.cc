// libFuzzer target for OSV advisories and the two version orders (an advisory file is as
// trusted as whoever could write into the operator's advisory directory or zip): simdjson
// reads the document, sluice keeps its npm and PyPI entries, settles their ranges and indexes
// them; the version strings found in the bytes go through both orders.
// Parser files: proxy/packages/advisory_reader.cc, proxy/packages/advisory.cc,
// proxy/packages/semver.cc, proxy/packages/pep440.cc, proxy/packages/version_order.cc
//
// Input: the whole input is one OSV document. The version strings are the input's pieces
// between '"' bytes (the first kPieces, each at most kPieceLength bytes), plus every version
// the entries kept.
// Invariants, each a trap on violation:
//   - a document read appends only entries of npm or PyPI whose name is in its normal form,
//     whose id is the document's (1 to kMaxOsvIdLength bytes), malicious exactly when the id
//     starts with "MAL-", within the per-document bounds; every kept range has an Introduced
//     event and its events in the order they are evaluated in; a document refused leaves the
//     output as it was and says why;
//   - an AdvisoryIndex built from the entries answers a lookup of each entry's package at
//     each of its explicit versions with that entry's id, and affects() agrees; over the
//     pieces, the index (which finds listed versions by versionKey()) names an advisory
//     exactly when affects() says one of its entries for that package covers the piece;
//   - both orders, over the pieces: compare(a, a) == 0, compare(a, b) == -compare(b, a),
//     a <= b <= c implies a <= c, and versionKey(a) == versionKey(b) exactly when
//     compare(a, b) == 0; a PEP 440 version's canonical spelling (when within
//     kMaxPep440Length: it can be 9 bytes longer) is a version equal to it and its own
//     canonical spelling.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/package_name.h"
#include "proxy/packages/advisory.h"
#include "proxy/packages/pep440.h"
#include "proxy/packages/version_order.h"

namespace {

namespace pk = sluice::proxy::packages;
using sluice::policy::Ecosystem;

constexpr std::size_t kPieces = 10;
constexpr std::size_t kPieceLength = 80;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

bool isZeroIntroduced(const pk::OsvEvent& e) {
  return e.kind == pk::OsvEventKind::Introduced && e.version == "0";
}

void checkEntry(const pk::AdvisoryEntry& entry) {
  check(entry.ecosystem == Ecosystem::Npm || entry.ecosystem == Ecosystem::Pypi);
  const std::optional<std::string> normal =
      sluice::policy::normalizePackageName(entry.ecosystem, entry.name);
  check(normal.has_value() && *normal == entry.name);
  check(!entry.id.empty() && entry.id.size() <= pk::kMaxOsvIdLength);
  check(entry.malicious == entry.id.starts_with("MAL-"));
  check(entry.versions.size() <= pk::kMaxOsvVersions);
  for (const std::string& version : entry.versions) {
    check(version.size() <= pk::kMaxOsvVersionLength);
  }
  for (const pk::OsvRange& range : entry.ranges) {
    check(!range.events.empty() && range.events.size() <= pk::kMaxOsvEvents);
    check(std::any_of(range.events.begin(), range.events.end(), [](const pk::OsvEvent& e) {
      return e.kind == pk::OsvEventKind::Introduced;
    }));
    for (std::size_t i = 1; i < range.events.size(); ++i) {
      const pk::OsvEvent& a = range.events[i - 1];
      const pk::OsvEvent& b = range.events[i];
      check(!isZeroIntroduced(b) || isZeroIntroduced(a));
      if (!isZeroIntroduced(a) && !isZeroIntroduced(b)) {
        check(pk::compareVersions(range.scheme, a.version, b.version) <= 0);
      }
    }
  }
}

void checkOrders(const std::vector<std::string_view>& texts) {
  for (pk::VersionScheme scheme : {pk::VersionScheme::SemVer, pk::VersionScheme::Pep440}) {
    const std::size_t n = texts.size();
    std::vector<int> table(n * n);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        const int c = pk::compareVersions(scheme, texts[i], texts[j]);
        check(c >= -1 && c <= 1);
        table[i * n + j] = c;
      }
      check(table[i * n + i] == 0);
    }
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        check(table[i * n + j] == -table[j * n + i]);
        for (std::size_t k = 0; k < n; ++k) {
          if (table[i * n + j] <= 0 && table[j * n + k] <= 0) {
            check(table[i * n + k] <= 0);
          }
        }
      }
    }
  }
  for (Ecosystem ecosystem : {Ecosystem::Npm, Ecosystem::Pypi}) {
    for (std::string_view a : texts) {
      for (std::string_view b : texts) {
        check((pk::versionKey(ecosystem, a) == pk::versionKey(ecosystem, b)) ==
              (pk::compareVersions(ecosystem, a, b) == 0));
      }
    }
  }
  for (std::string_view text : texts) {
    const std::optional<std::string> normal = pk::normalizePep440(text);
    if (normal && normal->size() <= pk::kMaxPep440Length) {
      check(pk::normalizePep440(*normal) == *normal);
      check(pk::compareVersions(pk::VersionScheme::Pep440, text, *normal) == 0);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size heap copy, so ASan flags any read past the document (the reader must copy
  // it into a padded buffer before simdjson reads ahead).
  std::unique_ptr<char[]> copy(new char[size == 0 ? 1 : size]);
  std::copy(data, data + size, copy.get());
  const std::string_view json(copy.get(), size);

  pk::AdvisoryEntry sentinel;
  sentinel.id = "SENTINEL-1";
  sentinel.name = "sentinel";
  std::vector<pk::AdvisoryEntry> out{sentinel};
  std::string error;
  const bool ok = pk::parseOsv(json, out, &error);
  check(out.front() == sentinel);
  if (!ok) {
    check(out.size() == 1 && !error.empty());
  }
  out.erase(out.begin());
  check(out.size() <= pk::kMaxOsvAffected);
  std::string_view id;
  for (const pk::AdvisoryEntry& entry : out) {
    checkEntry(entry);
    check(id.empty() || entry.id == id);  // one document, one id
    id = entry.id;
  }

  std::vector<std::string_view> texts;
  for (std::size_t at = 0; at < json.size() && texts.size() < kPieces;) {
    const std::size_t quote = json.find('"', at);
    const std::size_t end = quote == std::string_view::npos ? json.size() : quote;
    if (end - at <= kPieceLength) {
      texts.push_back(json.substr(at, end - at));
    }
    at = end + 1;
  }
  const std::vector<pk::AdvisoryEntry> entries = out;
  for (const pk::AdvisoryEntry& entry : entries) {
    for (const std::string& version : entry.versions) {
      if (texts.size() < 2 * kPieces) {
        texts.push_back(version);
      }
    }
  }
  checkOrders(texts);

  const pk::AdvisoryIndex index(std::move(out));
  check(index.entryCount() <= entries.size());
  for (const pk::AdvisoryEntry& entry : entries) {
    for (const std::string& version : entry.versions) {
      check(pk::affects(entry, version));
      const std::vector<pk::AdvisoryMatch> matches =
          index.lookup(entry.ecosystem, entry.name, version);
      check(std::any_of(matches.begin(), matches.end(),
                        [&](const pk::AdvisoryMatch& m) { return m.id == entry.id; }));
      check(index.find(entry.ecosystem, entry.name, version, false).has_value());
    }
    // The index (version keys) and affects() (comparisons) agree on every piece.
    for (std::string_view text : texts) {
      if (pk::affects(entry, text)) {
        const std::vector<pk::AdvisoryMatch> matches =
            index.lookup(entry.ecosystem, entry.name, text);
        check(std::any_of(matches.begin(), matches.end(),
                          [&](const pk::AdvisoryMatch& m) { return m.id == entry.id; }));
      }
    }
  }
  for (std::string_view text : texts) {
    for (Ecosystem ecosystem : {Ecosystem::Npm, Ecosystem::Pypi}) {
      const std::string_view name =
          entries.empty() ? std::string_view("a") : std::string_view(entries.front().name);
      for (const pk::AdvisoryMatch& match : index.lookup(ecosystem, name, text)) {
        check(std::any_of(entries.begin(), entries.end(), [&](const pk::AdvisoryEntry& e) {
          return e.id == match.id && e.ecosystem == ecosystem && e.name == name &&
                 pk::affects(e, text);
        }));
      }
    }
  }
  return 0;
}
