// Matching an advisory to a version, and the index of what a configuration loaded. Reading
// the documents is advisory_reader.cc.
#include "proxy/packages/advisory.h"

#include <algorithm>
#include <tuple>

#include "proxy/packages/pep440.h"
#include "proxy/packages/semver.h"

namespace sluice::proxy::packages {

namespace {

int sign(int c) { return c < 0 ? -1 : (c > 0 ? 1 : 0); }

// The version asked about, parsed at most once per order however many events it meets.
class Probe {
 public:
  explicit Probe(std::string_view text) : text_(text) {}

  // compareVersions(scheme, text, other), without parsing the text again.
  int compare(VersionScheme scheme, std::string_view other) {
    if (scheme == VersionScheme::Pep440) {
      if (!pep440_parsed_) {
        pep440_ = parsePep440(text_);
        pep440_parsed_ = true;
      }
      return compareWith(pep440_, parsePep440(other), other, comparePep440);
    }
    if (!semver_parsed_) {
      semver_ = parseSemVer(text_);
      semver_parsed_ = true;
    }
    return compareWith(semver_, parseSemVer(other), other, compareSemVer);
  }

 private:
  template <typename Version, typename Compare>
  int compareWith(const std::optional<Version>& mine, const std::optional<Version>& theirs,
                  std::string_view other, Compare order) const {
    if (mine && theirs) {
      return order(*mine, *theirs);
    }
    if (mine || theirs) {
      return mine ? 1 : -1;  // no version before every version (version_order.h)
    }
    return sign(text_.compare(other));
  }

  std::string_view text_;
  std::optional<SemVer> semver_;
  std::optional<Pep440> pep440_;
  bool semver_parsed_ = false;
  bool pep440_parsed_ = false;
};

bool fromTheBeginning(const OsvEvent& event) {
  return event.kind == OsvEventKind::Introduced && event.version == "0";
}

bool inRange(const OsvRange& range, Probe& probe) {
  bool limited = false;
  bool below_a_limit = false;
  for (const OsvEvent& event : range.events) {
    if (event.kind == OsvEventKind::Limit) {
      limited = true;
      below_a_limit = below_a_limit || probe.compare(range.scheme, event.version) < 0;
    }
  }
  if (limited && !below_a_limit) {
    return false;
  }
  bool affected = false;
  for (const OsvEvent& event : range.events) {
    switch (event.kind) {
      case OsvEventKind::Introduced:
        if (fromTheBeginning(event) || probe.compare(range.scheme, event.version) >= 0) {
          affected = true;
        }
        break;
      case OsvEventKind::Fixed:
        if (probe.compare(range.scheme, event.version) >= 0) {
          affected = false;
        }
        break;
      case OsvEventKind::LastAffected:
        if (probe.compare(range.scheme, event.version) > 0) {
          affected = false;
        }
        break;
      case OsvEventKind::Limit:
        break;
    }
  }
  return affected;
}

bool inRanges(const AdvisoryEntry& entry, Probe& probe) {
  for (const OsvRange& range : entry.ranges) {
    if (inRange(range, probe)) {
      return true;
    }
  }
  return false;
}

// The version asked of an index: its key made at most once, when an entry lists versions.
class IndexProbe {
 public:
  IndexProbe(policy::Ecosystem ecosystem, std::string_view version)
      : ecosystem_(ecosystem), version_(version), probe_(version) {}

  // `entry` as the index keeps it: its versions are sorted keys.
  bool affects(const AdvisoryEntry& entry) {
    if (!entry.versions.empty()) {
      if (!key_) {
        key_ = versionKey(ecosystem_, version_);
      }
      if (std::binary_search(entry.versions.begin(), entry.versions.end(), *key_)) {
        return true;
      }
    }
    return inRanges(entry, probe_);
  }

 private:
  policy::Ecosystem ecosystem_;
  std::string_view version_;
  Probe probe_;
  std::optional<std::string> key_;
};

// 64-bit FNV-1a; each text preceded by its length, so that no two lists of texts hash as one.
class Fnv1a {
 public:
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash_ = (hash_ ^ p[i]) * 1099511628211ull;
    }
  }
  void number(std::uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      const auto byte = static_cast<unsigned char>(value >> (8 * i));
      bytes(&byte, 1);
    }
  }
  void text(std::string_view s) {
    number(s.size());
    bytes(s.data(), s.size());
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 14695981039346656037ull;
};

std::uint64_t hashEntry(const AdvisoryEntry& entry) {
  Fnv1a h;
  h.number(static_cast<std::uint64_t>(entry.ecosystem));
  h.text(entry.name);
  h.text(entry.id);
  h.text(entry.modified);
  h.number(entry.versions.size());
  for (const std::string& version : entry.versions) {
    h.text(version);
  }
  h.number(entry.ranges.size());
  for (const OsvRange& range : entry.ranges) {
    h.number(static_cast<std::uint64_t>(range.scheme));
    h.number(range.events.size());
    for (const OsvEvent& event : range.events) {
      h.number(static_cast<std::uint64_t>(event.kind));
      h.text(event.version);
    }
  }
  return h.value();
}

auto packageKey(const AdvisoryEntry& entry) { return std::tie(entry.ecosystem, entry.name); }

}  // namespace

bool affects(const AdvisoryEntry& entry, std::string_view version) {
  Probe probe(version);
  const VersionScheme own = schemeOf(entry.ecosystem);
  for (const std::string& listed : entry.versions) {
    if (listed == version || probe.compare(own, listed) == 0) {
      return true;
    }
  }
  return inRanges(entry, probe);
}

AdvisoryIndex::AdvisoryIndex(std::vector<AdvisoryEntry> entries) {
  struct Keyed {
    std::uint64_t hash;
    std::size_t at;
  };
  std::vector<Keyed> order(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::vector<std::string>& versions = entries[i].versions;
    for (std::string& version : versions) {
      version = versionKey(entries[i].ecosystem, version);
    }
    std::sort(versions.begin(), versions.end());
    versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
    order[i] = {hashEntry(entries[i]), i};
  }
  // By (ecosystem, name, id, hash): an order that does not depend on the order files were
  // read in, so neither does the fingerprint.
  std::sort(order.begin(), order.end(), [&](const Keyed& x, const Keyed& y) {
    const AdvisoryEntry& a = entries[x.at];
    const AdvisoryEntry& b = entries[y.at];
    return std::tie(a.ecosystem, a.name, a.id, x.hash) <
           std::tie(b.ecosystem, b.name, b.id, y.hash);
  });
  entries_.reserve(entries.size());
  std::vector<std::uint64_t> kept_hashes;
  kept_hashes.reserve(entries.size());
  Fnv1a fingerprint;
  for (const Keyed& keyed : order) {
    AdvisoryEntry& entry = entries[keyed.at];
    // Exact duplicates sort together (same key, id and hash) and the last kept entries are
    // theirs: compare the new one whole with those.
    bool duplicate = false;
    for (std::size_t k = entries_.size(); k-- > 0;) {
      const AdvisoryEntry& kept = entries_[k];
      if (kept_hashes[k] != keyed.hash || kept.id != entry.id ||
          packageKey(kept) != packageKey(entry)) {
        break;
      }
      if (kept == entry) {
        duplicate = true;
        break;
      }
    }
    if (duplicate) {
      continue;
    }
    fingerprint.number(keyed.hash);
    kept_hashes.push_back(keyed.hash);
    entries_.push_back(std::move(entry));
  }
  fingerprint_ = fingerprint.value();
  std::vector<std::string_view> ids;
  ids.reserve(entries_.size());
  for (const AdvisoryEntry& entry : entries_) {
    ids.push_back(entry.id);
  }
  std::sort(ids.begin(), ids.end());
  advisories_ = static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

std::span<const AdvisoryEntry> AdvisoryIndex::entriesFor(policy::Ecosystem ecosystem,
                                                         std::string_view name) const {
  const auto key = std::make_tuple(ecosystem, name);
  const auto first = std::lower_bound(
      entries_.begin(), entries_.end(), key, [](const AdvisoryEntry& entry, const auto& k) {
        return std::make_tuple(entry.ecosystem, std::string_view(entry.name)) < k;
      });
  auto last = first;
  while (last != entries_.end() && last->ecosystem == ecosystem && last->name == name) {
    ++last;
  }
  return {first, last};
}

std::vector<AdvisoryMatch> AdvisoryIndex::lookup(policy::Ecosystem ecosystem, std::string_view name,
                                                 std::string_view version) const {
  std::vector<AdvisoryMatch> matches;
  IndexProbe probe(ecosystem, version);
  for (const AdvisoryEntry& entry : entriesFor(ecosystem, name)) {
    if (!matches.empty() && matches.back().id == entry.id) {
      continue;  // the entries of one package are sorted by id
    }
    if (probe.affects(entry)) {
      matches.push_back({entry.id, entry.malicious});
    }
  }
  return matches;
}

std::optional<AdvisoryMatch> AdvisoryIndex::find(policy::Ecosystem ecosystem, std::string_view name,
                                                 std::string_view version,
                                                 bool malicious_only) const {
  IndexProbe probe(ecosystem, version);
  for (const AdvisoryEntry& entry : entriesFor(ecosystem, name)) {
    if ((!malicious_only || entry.malicious) && probe.affects(entry)) {
      return AdvisoryMatch{entry.id, entry.malicious};
    }
  }
  return std::nullopt;
}

}  // namespace sluice::proxy::packages
