#pragma once
// PyPI's simple API, filtered so that pip resolves to an allowed version
// (docs/packages.md#metadata): each file's version is read from its name as pip reads it
// (pypi_file_name.h), each version judged once, and every file of a removed version goes.
//
// PEP 691 JSON (`application/vnd.pypi.simple.v1+json`) is what sluice filters: it has PEP 700's
// `upload-time`, so a version is judged with the earliest upload time among its files, and the
// files of a kept version each with its own (pypi_file_versions.h). A client
// that asked for HTML gets a PEP 503 page rendered from the filtered JSON (renderSimpleHtml).
// A PEP 503 page received as such has no times: filterSimpleHtml judges with none, and reads
// the page with a strict tokenizer that refuses what it is not sure to read as pip does.
//
// Files dropped unjudged ("invalid"): a name that is no wheel or sdist of the project (another
// project's, .egg, .exe...), a URL whose file name is not the `filename` (pip reads the URL's),
// a URL with a fragment other than a hash (pip reads `#egg=` as the version). Pages refused
// whole (MetadataError): JSON as npm_packument_filter.h refuses it; `name` missing or another
// project's; `files` not an array of objects with string `filename` and `url`; `filename`,
// `url` or `upload-time` repeated in a file; a key of the top level or of a file written with
// an escape; `versions` not an array of strings; more than kMaxSimpleFiles files or versions.
// Bounds and memory as npm_packument_filter.h: beside the document, simdjson's index (freed
// before the output is allocated) and the output, each file's version and name copied once
// (less than the document holds) and under 64 bytes per file.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/packages/version_judge.h"

namespace sluice::proxy::packages {

inline constexpr std::size_t kMaxSimpleFiles = std::size_t{1} << 18;

struct FilteredSimplePage {
  std::string body;  // JSON or HTML, as the input was
  // In the order of the first file that went; a version that kept some files is not whole.
  std::vector<RemovedVersion> removed;
  std::size_t kept_files = 0;
  std::size_t removed_files = 0;  // files judged and removed
  std::size_t invalid_files = 0;  // dropped unjudged (above)
};

// Filters a PEP 691 page of `project` (as the request named it: compared in PEP 503's form).
// Versions are grouped as their file names spell them (pip's reading); each group is judged
// with the earliest valid `upload-time` among its files (none when no file has one), then each
// file of a kept group with its own. `versions` (PEP 700) loses every entry `order` finds equal
// to a version that lost every file. Everything else is
// copied as the origin wrote it. `document` is padded in place as npm_packument_filter.h says.
Result<FilteredSimplePage, MetadataError> filterSimpleJson(std::string& document,
                                                           std::string_view project,
                                                           const VersionJudge& judge,
                                                           const VersionOrder& order);

// A PEP 503 page of a PEP 691 document (normally one filterSimpleJson wrote): an anchor per
// file, href the URL with a `#sha256=` fragment (else another hash PEP 691 gave), and
// data-requires-python, data-core-metadata and data-dist-info-metadata (PEP 658/714),
// data-gpg-sig and data-yanked (true: empty; a string: the reason) from their JSON members.
// Every text from the document is escaped for HTML (& < > " ' and control bytes, the latter as
// U+FFFD), so no document string can open or close a tag or an attribute. The same JSON checks
// as filterSimpleJson; padded in place likewise.
Result<std::string, MetadataError> renderSimpleHtml(std::string& document);

// Filters a PEP 503 page as received (`text/html`, `application/vnd.pypi.simple.v1+html`),
// every version judged with no publish time. The page must be UTF-8 without NUL, made of text,
// one `<!DOCTYPE html>`, and tags html, head, body, meta, title, h1, h2, p, div, span, hr, br,
// a (any case) with well-formed attributes; anchors hold only text and are not nested; entities
// are the five of XML and printable ASCII numeric ones. Anything else (comments, scripts,
// CDATA, `<base>`, stray '<', an unclosed tag, a repeated attribute) refuses the page: what the
// filter is not sure to read as pip does must not pass. A removed or invalid anchor is cut out
// with a <br> right after it (and its line, when it has one of its own); the rest is copied as
// it was. An anchor without href names no file (pip skips it) and stays.
Result<FilteredSimplePage, MetadataError> filterSimpleHtml(std::string_view page,
                                                           std::string_view project,
                                                           const VersionJudge& judge);

}  // namespace sluice::proxy::packages
