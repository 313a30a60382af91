#include "proxy/packages/npm_packument_filter.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "proxy/packages/json_walk.h"

namespace sluice::proxy::packages {

namespace {

using policy::Ecosystem;

enum class TopKind : std::uint8_t { Other, Versions, Time, DistTags };

// Offsets into the document: 4 GiB is simdjson's own limit too.
struct TopMember {
  std::uint32_t key_begin, value_begin, value_end;
  std::uint32_t key_size;
  TopKind kind;
};
// A key and the end of its value: the member is [key_begin, value_end), the key's JSON token
// (quotes included) [key_begin, key_begin + key_size + 2).
struct Entry {
  std::uint32_t key_begin, key_size, value_end;
};
struct VersionEntry : Entry {
  bool kept = true;
};
struct TimeEntry : Entry {
  std::int64_t millis = 0;
  bool has_time = false;
  bool kept = false;  // decided once the versions are judged
};
struct TagEntry : Entry {
  std::string_view target;  // unescaped, in simdjson's string buffer
  enum class Action : std::uint8_t { Keep, Repoint, Drop } action = Action::Keep;
  std::uint32_t repoint_to = 0;  // a version's index
};

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

class PackumentFilter {
 public:
  PackumentFilter(const PaddedDocument& doc, const VersionJudge& judge, const VersionOrder& order)
      : doc_(doc), judge_(judge), order_(order) {}

  Result<Ok, MetadataError> read(ondemand::parser& parser) {
    ondemand::document document;
    auto walked = walkDocument(parser, document, doc_, kMaxPackumentEntries,
                               [&](WalkedMember& m) { return readTopMember(m); });
    if (!walked.ok()) {
      return walked;
    }
    by_version_key_ = sortedByKey(versions_);
    by_time_key_ = sortedByKey(times_);
    if (hasRepeatedKey(top_, sortedByKey(top_))) {
      return Err{MetadataError{"a top-level key is repeated", 0}};
    }
    if (hasRepeatedKey(versions_, by_version_key_)) {
      return Err{MetadataError{"a version is repeated in versions", 0}};
    }
    if (hasRepeatedKey(times_, by_time_key_)) {
      return Err{MetadataError{"a version is repeated in time", 0}};
    }
    if (hasRepeatedKey(tags_, sortedByKey(tags_))) {
      return Err{MetadataError{"a dist-tag is repeated", 0}};
    }
    return Ok{};
  }

  // Judges every version, then decides `time` and `dist-tags`.
  void judge(FilteredPackument& out) {
    for (VersionEntry& version : versions_) {
      const std::string_view name = keyText(version);
      std::optional<std::int64_t> published;
      const std::uint32_t time = find(by_time_key_, times_, name);
      if (time != kNone && times_[time].has_time) {
        published = times_[time].millis;
      }
      const VersionVerdict verdict = judge_.judge(name, published);
      version.kept = verdict.keeps();
      if (version.kept) {
        ++out.kept;
      } else {
        out.removed.push_back(
            RemovedVersion{std::string(name), verdict.reason, std::string(verdict.advisory)});
      }
    }
    for (TimeEntry& time : times_) {
      const std::string_view key = keyText(time);
      const std::uint32_t version = find(by_version_key_, versions_, key);
      time.kept = key == "created" || key == "modified" || key == "unpublished" ||
                  (version != kNone && versions_[version].kept);
    }
    decideTags(out);
  }

  // The filtered document, to a sink (writeExactly: counted, then written).
  template <class Sink>
  void write(Sink& out) const {
    out.put('{');
    bool first = true;
    const auto separate = [&] {
      if (!first) {
        out.put(',');
      }
      first = false;
    };
    bool has_tags = false;
    for (const TopMember& m : top_) {
      separate();
      if (m.kind == TopKind::Other) {
        out.put(text(m.key_begin, m.value_end));
        continue;
      }
      out.put(text(m.key_begin, m.value_begin));
      out.put('{');
      if (m.kind == TopKind::Versions) {
        writeKept(out, versions_);
      } else if (m.kind == TopKind::Time) {
        writeKept(out, times_);
      } else {
        writeTags(out);
        has_tags = true;
      }
      out.put('}');
    }
    if (!has_tags && added_latest_ != kNone) {
      separate();
      out.put("\"dist-tags\":{\"latest\":");
      out.put(keyToken(versions_[added_latest_]));
      out.put('}');
    }
    out.put('}');
  }

 private:
  WalkEnd readTopMember(WalkedMember& m) {
    TopKind kind = TopKind::Other;
    WalkEnd end = m.value_begin;
    if (m.key == "versions") {
      kind = TopKind::Versions;
      end = readObject(m, "versions is not an object",
                       [&](WalkedMember& v) { return readVersion(v); });
    } else if (m.key == "time") {
      kind = TopKind::Time;
      end = readObject(m, "time is not an object", [&](WalkedMember& t) { return readTime(t); });
    } else if (m.key == "dist-tags") {
      kind = TopKind::DistTags;
      end =
          readObject(m, "dist-tags is not an object", [&](WalkedMember& t) { return readTag(t); });
    } else {
      end = validatedValue(m.value_begin, doc_);
    }
    if (end.ok()) {
      top_.push_back(TopMember{offset(m.key_begin), offset(m.value_begin), offset(*end),
                               static_cast<std::uint32_t>(m.key.size()), kind});
    }
    return end;
  }

  template <class OnMember>
  WalkEnd readObject(WalkedMember& m, std::string_view not_object, OnMember&& on_member) {
    ondemand::object object;
    if (*m.value_begin != '{' || m.value.get_object().get(object) != simdjson::SUCCESS) {
      return walkError(not_object, doc_, m.value_begin);
    }
    return walkObject(object, m.value_begin, doc_, kMaxPackumentEntries, on_member);
  }

  WalkEnd readVersion(WalkedMember& m) {
    if (*m.value_begin != '{') {
      return walkError("a version is not an object", doc_, m.value_begin);
    }
    WalkEnd end = validatedValue(m.value_begin, doc_);
    if (end.ok()) {
      VersionEntry entry;
      static_cast<Entry&>(entry) = entryOf(m, *end);
      versions_.push_back(entry);
    }
    return end;
  }

  WalkEnd readTime(WalkedMember& m) {
    TimeEntry entry;
    const char* end = nullptr;
    if (*m.value_begin == '"') {
      end = endOfJsonString(m.value_begin);
      if (end == nullptr) {
        return walkError("not JSON", doc_, m.value_begin);
      }
      // Read as written: an escaped time is no time a registry writes, and counts as none.
      const std::string_view text(m.value_begin + 1,
                                  static_cast<std::size_t>(end - m.value_begin - 2));
      if (const auto millis = parseIsoTime(text)) {
        entry.millis = *millis;
        entry.has_time = true;
      }
    } else if (m.key == "unpublished" && *m.value_begin == '{') {
      end = endOfJsonValue(m.value_begin);
      if (end == nullptr) {
        return walkError("not JSON", doc_, m.value_begin);
      }
    } else {
      return walkError("a time is not a string", doc_, m.value_begin);
    }
    static_cast<Entry&>(entry) = entryOf(m, end);
    times_.push_back(entry);
    return end;
  }

  WalkEnd readTag(WalkedMember& m) {
    TagEntry entry;
    if (*m.value_begin != '"' || m.value.get_string().get(entry.target) != simdjson::SUCCESS) {
      return walkError("a dist-tag is not a string", doc_, m.value_begin);
    }
    const char* end = endOfJsonString(m.value_begin);
    if (end == nullptr) {
      return walkError("not JSON", doc_, m.value_begin);
    }
    static_cast<Entry&>(entry) = entryOf(m, end);
    tags_.push_back(entry);
    return end;
  }

  Entry entryOf(const WalkedMember& m, const char* end) const {
    return Entry{offset(m.key_begin), static_cast<std::uint32_t>(m.key.size()), offset(end)};
  }

  std::uint32_t offset(const char* p) const { return static_cast<std::uint32_t>(doc_.offsetOf(p)); }
  std::string_view text(std::uint32_t begin, std::uint32_t end) const {
    return {doc_.begin() + begin, end - begin};
  }
  std::string_view keyText(const Entry& e) const {
    return {doc_.begin() + e.key_begin + 1, e.key_size};
  }
  std::string_view keyText(const TopMember& m) const {
    return {doc_.begin() + m.key_begin + 1, m.key_size};
  }
  std::string_view keyToken(const Entry& e) const {
    return {doc_.begin() + e.key_begin, e.key_size + std::size_t{2}};
  }

  template <class T>
  std::vector<std::uint32_t> sortedByKey(const std::vector<T>& entries) const {
    std::vector<std::uint32_t> order(entries.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return keyText(entries[a]) < keyText(entries[b]);
    });
    return order;
  }

  template <class T>
  bool hasRepeatedKey(const std::vector<T>& entries,
                      const std::vector<std::uint32_t>& order) const {
    return std::adjacent_find(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
             return keyText(entries[a]) == keyText(entries[b]);
           }) != order.end();
  }

  template <class T>
  std::uint32_t find(const std::vector<std::uint32_t>& order, const std::vector<T>& entries,
                     std::string_view key) const {
    const auto at = std::lower_bound(
        order.begin(), order.end(), key,
        [&](std::uint32_t index, std::string_view k) { return keyText(entries[index]) < k; });
    return at != order.end() && keyText(entries[*at]) == key ? *at : kNone;
  }

  int compare(std::string_view a, std::string_view b) const {
    return order_.compare(Ecosystem::Npm, a, b);
  }
  bool isPrerelease(std::string_view version) const {
    return order_.is_prerelease(Ecosystem::Npm, version);
  }

  void decideTags(FilteredPackument& out) {
    // The kept versions in the ecosystem's order; stable_sort (a merge) stays in bounds even
    // if a hostile spelling made the order inconsistent, where std::sort might not.
    std::vector<std::uint32_t> kept;
    for (std::uint32_t i = 0; i < versions_.size(); ++i) {
      if (versions_[i].kept) {
        kept.push_back(i);
      }
    }
    std::stable_sort(kept.begin(), kept.end(), [&](std::uint32_t a, std::uint32_t b) {
      return compare(keyText(versions_[a]), keyText(versions_[b])) < 0;
    });
    std::vector<std::uint32_t> kept_stable;
    std::copy_if(kept.begin(), kept.end(), std::back_inserter(kept_stable),
                 [&](std::uint32_t i) { return !isPrerelease(keyText(versions_[i])); });

    bool has_latest = false;
    TagEntry* latest = nullptr;
    for (TagEntry& tag : tags_) {
      const std::uint32_t version = find(by_version_key_, versions_, tag.target);
      if (version != kNone && versions_[version].kept) {
        tag.action = TagEntry::Action::Keep;
      } else if (version == kNone) {
        tag.action = TagEntry::Action::Drop;
      } else {
        const auto& candidates = isPrerelease(tag.target) ? kept : kept_stable;
        const auto below = std::partition_point(
            candidates.begin(), candidates.end(),
            [&](std::uint32_t i) { return compare(keyText(versions_[i]), tag.target) < 0; });
        tag.action =
            below == candidates.begin() ? TagEntry::Action::Drop : TagEntry::Action::Repoint;
        tag.repoint_to = below == candidates.begin() ? 0 : *(below - 1);
      }
      if (keyText(tag) == "latest") {
        latest = &tag;
        has_latest = tag.action != TagEntry::Action::Drop;
      }
    }
    if (!kept.empty() && !has_latest) {
      const std::uint32_t newest = kept_stable.empty() ? kept.back() : kept_stable.back();
      if (latest != nullptr) {
        latest->action = TagEntry::Action::Repoint;
        latest->repoint_to = newest;
      } else {
        added_latest_ = newest;
        ++out.tags_moved;
      }
    }
    for (const TagEntry& tag : tags_) {
      out.tags_moved += tag.action == TagEntry::Action::Keep ? 0 : 1;
    }
  }

  template <class Sink, class T>
  void writeKept(Sink& out, const std::vector<T>& entries) const {
    bool first = true;
    for (const T& e : entries) {
      if (e.kept) {
        if (!first) {
          out.put(',');
        }
        first = false;
        out.put(text(e.key_begin, e.value_end));
      }
    }
  }

  template <class Sink>
  void writeTags(Sink& out) const {
    bool first = true;
    const auto separate = [&] {
      if (!first) {
        out.put(',');
      }
      first = false;
    };
    for (const TagEntry& tag : tags_) {
      if (tag.action == TagEntry::Action::Keep) {
        separate();
        out.put(text(tag.key_begin, tag.value_end));
      } else if (tag.action == TagEntry::Action::Repoint) {
        separate();
        out.put(keyToken(tag));
        out.put(':');
        out.put(keyToken(versions_[tag.repoint_to]));
      }
    }
    if (added_latest_ != kNone) {
      separate();
      out.put("\"latest\":");
      out.put(keyToken(versions_[added_latest_]));
    }
  }

  const PaddedDocument& doc_;
  const VersionJudge& judge_;
  const VersionOrder& order_;
  std::vector<TopMember> top_;
  std::vector<VersionEntry> versions_;
  std::vector<TimeEntry> times_;
  std::vector<TagEntry> tags_;
  std::vector<std::uint32_t> by_version_key_;  // indices in the order of their keys
  std::vector<std::uint32_t> by_time_key_;
  std::uint32_t added_latest_ = kNone;
};

bool tooLarge(const PaddedDocument& doc) {
  return doc.paddedSize() >= std::numeric_limits<std::uint32_t>::max();
}

}  // namespace

Result<FilteredPackument, MetadataError> filterNpmPackument(std::string& document,
                                                            const VersionJudge& judge,
                                                            const VersionOrder& order) {
  const PaddedDocument doc(document);
  PackumentFilter filter(doc, judge, order);
  return runFilter<FilteredPackument>(doc, filter, &FilteredPackument::json,
                                      [&](FilteredPackument& out) { filter.judge(out); });
}

Result<NpmVersionDocument, MetadataError> judgeNpmVersionDocument(
    std::string& document, const VersionJudge& judge, std::optional<std::int64_t> published) {
  const PaddedDocument doc(document);
  if (tooLarge(doc)) {
    return Err{MetadataError{"larger than 4 GiB", 0}};
  }
  ondemand::parser parser;
  ondemand::document parsed;
  std::vector<std::string_view> keys;
  std::optional<std::string_view> version;
  auto walked =
      walkDocument(parser, parsed, doc, kMaxPackumentEntries, [&](WalkedMember& m) -> WalkEnd {
        keys.push_back(m.key);
        if (m.key != "version") {
          return validatedValue(m.value_begin, doc);
        }
        std::string_view text;
        if (*m.value_begin != '"' || m.value.get_string().get(text) != simdjson::SUCCESS) {
          return walkError("version is not a string", doc, m.value_begin);
        }
        version = text;
        const char* end = endOfJsonString(m.value_begin);
        return end == nullptr ? walkError("not JSON", doc, m.value_begin) : WalkEnd(end);
      });
  if (!walked.ok()) {
    return Err{walked.error()};
  }
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
    return Err{MetadataError{"a top-level key is repeated", 0}};
  }
  if (!version) {
    return Err{MetadataError{"no version", 0}};
  }
  return NpmVersionDocument{std::string(*version), judge.judge(*version, published)};
}

}  // namespace sluice::proxy::packages
