#pragma once
// The npm packument, filtered so that npm resolves to an allowed version
// (docs/packages.md#metadata): every version is judged, the removed ones leave `versions` and
// `time`, and `dist-tags` that named one name the newest kept version below it of the same kind
// (or go). Everything else is copied as the registry wrote it, span by span.
//
// Both forms (https://github.com/npm/registry/blob/main/docs/responses/package-metadata.md):
// the full one (`application/json`), whose `time` gives each version's publish time, and the
// abbreviated one (`application/vnd.npm.install-v1+json`), which has no `time`: its versions are
// judged with no publish time (the judge decides; the gateway asks origins for the full form).
//
// Refused as a whole (MetadataError, never a partial output): anything but one JSON object
// (trailing bytes, invalid UTF-8 or escapes, bad numbers or atoms anywhere, nesting deeper than
// kMaxJsonDepth); `versions` not an object of objects; `time` not an object of strings (but
// `time.unpublished`, an object npm writes for unpublished packages); `dist-tags` not an object
// of strings; a key repeated in the top level, `versions`, `time` or `dist-tags` (a hostile
// origin could hope the filter judges one and the client uses the other); a key of those
// objects written with an escape; more than kMaxPackumentEntries entries in any of them.
//
// Cost: simdjson's stage 1 and on-demand walk (a manifest or the readme is skipped through its
// index, never unescaped), the span validator over every byte once, and one copy of what is kept
// into an output reserved once at its exact size. Memory: the document (padded in place), 20 to
// 44 bytes per version, time entry and tag, simdjson's index (4 bytes per structural character,
// freed before the output is allocated) and the output (at most the document plus the repointed
// tags). A 30 MiB packument of 5,000 versions: ~25 ms of one core, peak ~1.9x the document.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "policy/package_name.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/packages/version_judge.h"

namespace sluice::proxy::packages {

// Entries read from one object of a packument (top level, versions, time, dist-tags) at most.
inline constexpr std::size_t kMaxPackumentEntries = std::size_t{1} << 18;

struct FilteredPackument {
  std::string json;                     // the filtered document
  std::vector<RemovedVersion> removed;  // in the document's order
  std::size_t kept = 0;        // versions kept (0 is a valid answer: "No matching version")
  std::size_t tags_moved = 0;  // dist-tags repointed, added (latest) or dropped
};

// Filters the packument in `document`. The document is padded in place by kMetadataPadding
// bytes for simdjson and restored before returning: reserve size() + kMetadataPadding to spare
// a copy. Every version (a key of `versions`) is judged once, with the publish time that
// `time[version]` gives when it is a valid ISO 8601 time (else none). Then:
//   - `versions` keeps the kept versions; `time` keeps `created`, `modified`, `unpublished`
//     and the kept versions' entries (entries of versions not in `versions` go too);
//   - a dist-tag naming a kept version stays. One naming a removed version names the highest
//     kept version below it in `order`: a stable one for a tag that named a stable version, any
//     kept one for a tag that named a prerelease (`next`, `beta` may fall back to an older beta
//     or a release, `latest` never to a prerelease); with none such, the tag goes. A tag naming
//     a version that is not in `versions` goes (it pointed at nothing installable).
//   - `latest` is always there when a version is kept: if it went (or never was), it names the
//     highest kept stable version, else the highest kept one (a `dist-tags` object is added to a
//     document that had none).
Result<FilteredPackument, MetadataError> filterNpmPackument(std::string& document,
                                                            const VersionJudge& judge,
                                                            const VersionOrder& order);

// The per-version document (`GET /NAME/VERSION` or `/NAME/TAG`: one manifest whose `version`
// member names it). It is served unchanged or refused, so this only checks it (the same JSON
// rules; `version` a string, present once) and judges that version with the publish time the
// caller knows (the manifest has none). Padding as above.
struct NpmVersionDocument {
  std::string version;
  VersionVerdict verdict;
};
Result<NpmVersionDocument, MetadataError> judgeNpmVersionDocument(
    std::string& document, const VersionJudge& judge, std::optional<std::int64_t> published);

}  // namespace sluice::proxy::packages
