#pragma once
// PyPI's legacy JSON API (https://warehouse.pypa.io/api-reference/json.html), filtered so that
// a tool resolving from it (poetry, pdm, pip-audit...) sees only allowed files
// (docs/packages.md#metadata), judged as the simple API's filter judges them
// (pypi_simple_filter.h, docs/packages.md#the-age-rule):
//   /pypi/NAME/json          {"info":{"name":..,"version":..,..},"last_serial":N,
//                             "releases":{"1.0":[FILE,..],..},"urls":[FILE,..],
//                             "vulnerabilities":[..]}   (`urls`: the files of info.version)
//   /pypi/NAME/VERSION/json  the same without `releases` (info and urls describe VERSION)
// FILE: {"filename":..,"url":..,"upload_time":..,"upload_time_iso_8601":..,"digests":..,..}.
//
// A file's upload time is its `upload_time_iso_8601` (parseIsoTime), else its `upload_time`
// read as UTC (PyPI writes it without a zone), as written: null, an escape or a time that does
// not parse is none. A file is valid when its `url` names its `filename` (fileNameOfUrl) and
// the version pip reads of that name (versionOfFile) is, by `order`, the release key it is
// listed under (in `urls`: info.version); an invalid file (another project's, an .egg, one
// hidden under another version's key) is dropped unjudged.
//
// With `releases`, each key is a version, judged once in document order with the earliest
// upload time among its valid files (none when it has none), then each of its valid files with
// its own (VersionJudge::fileTooNew, asked of every valid file, a removed version's too, so a
// judge sees every upload time). A removed version's key goes with its files; a kept version
// that lost every file goes too (whole); one that lost some keeps its key with the rest (not
// whole, PackageTooNew). A `urls` file stays exactly when a file of its name stayed in
// `releases`: it is not judged again. Without `releases` (the version document), `urls` is the
// group of info.version, judged as one release. `info` is never rewritten, even when its
// version went (info_version_removed): the caller decides what to serve.
//
// Refused whole (MetadataError), as the simple filter refuses: anything not one JSON object
// (as npm_packument_filter.h says); `info` missing, not an object, or without a string `name`
// naming `project` (PEP 503's comparison) and a string `version`, either repeated; `urls`
// missing or not an array of files; `releases` not an object of arrays of files; a file not an
// object with string `filename` and `url`; `filename`, `url`, `upload_time` or
// `upload_time_iso_8601` repeated in a file, or not a string (the times may be null); a key
// repeated in the top level or in `releases`; a key of the top level, `info`, `releases` or a
// file written with an escape; more than kMaxJsonApiFiles files or releases. What the filter
// does not read (`last_serial`, `vulnerabilities`, a file's other members, unknown members) is
// copied as the origin wrote it, span by span; so is `info`.
//
// Bounds and memory as pypi_simple_filter.h: beside the document, simdjson's index (freed
// before the output is allocated) and the output, under 64 bytes per file and release and
// one version text at a time.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/packages/version_judge.h"

namespace sluice::proxy::packages {

// Files (all arrays together) and releases a document may hold, each at most.
inline constexpr std::size_t kMaxJsonApiFiles = std::size_t{1} << 18;

struct FilteredJsonApi {
  std::string body;  // the filtered JSON
  // In document order of the first file (or release key) that went; a version that kept some
  // files is not whole.
  std::vector<RemovedVersion> removed;
  std::string info_version;  // info.version as the document spells it (unescaped)
  // When info.version (by `order`) was judged out or lost every file: its entry in `removed`
  // (whose reason a caller refusing a version document gives).
  std::optional<std::size_t> info_version_removed;
  // Over every file object listed, `urls`' included: kept (written out), judged and removed,
  // dropped unjudged (above).
  std::size_t kept_files = 0, removed_files = 0, invalid_files = 0;
};

// Filters a JSON API document of `project` (as the request named it: compared in PEP 503's
// form). The calls to `judge`, in document order: each version, then each of its valid files.
// `document` is padded in place as npm_packument_filter.h says and restored before returning.
Result<FilteredJsonApi, MetadataError> filterPypiJsonApi(std::string& document,
                                                         std::string_view project,
                                                         const VersionJudge& judge,
                                                         const VersionOrder& order);

}  // namespace sluice::proxy::packages
