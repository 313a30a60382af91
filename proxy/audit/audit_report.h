#pragma once
// `sluice audit report FILE... -o OUT.html` (docs/cli.md#sluice-audit-summary-sluice-audit-report):
// a Summary as one self-contained HTML page: no script, no stylesheet or font from anywhere,
// charts drawn as inline SVG, so it opens the same with no network. A timeline of requests by
// decision, the top hosts by bytes and by denials, and per sandbox the summary's tables. Every
// number in it is also in a `data-` attribute, so a test (and a script) can read the page back.

#include <string>
#include <string_view>
#include <vector>

#include "proxy/audit/audit_summary.h"

namespace sluice::proxy::audit {

// `sources`: the files read, named in the page's heading.
std::string summaryReport(const Summary& summary, const std::vector<std::string>& sources);

// Text for HTML (element content and attribute values): & < > " ' escaped, control characters
// shown as '?'.
void appendHtmlText(std::string& out, std::string_view text);

}  // namespace sluice::proxy::audit
