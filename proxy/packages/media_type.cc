#include "proxy/packages/media_type.h"

#include "base/ascii.h"
#include "proxy/packages/field_lists.h"

namespace sluice::proxy::packages {

using field_lists::trimOws;

std::string_view mediaTypeOf(std::string_view content_type) {
  const std::string_view type = trimOws(content_type.substr(0, content_type.find(';')));
  return type.find('/') == std::string_view::npos ? std::string_view() : type;
}

bool acceptListsMediaType(std::string_view accept, std::string_view type) {
  bool listed = false;
  field_lists::forEachListElement(accept, [&](std::string_view element) {
    const std::size_t semicolon = field_lists::findOutsideQuotes(element, ';');
    if (!ascii::iequals(trimOws(element.substr(0, semicolon)), type)) {
      return true;
    }
    int weight = 1000;
    std::string_view parameters =
        semicolon == std::string_view::npos ? std::string_view() : element.substr(semicolon + 1);
    while (!parameters.empty()) {
      const std::size_t next = field_lists::findOutsideQuotes(parameters, ';');
      const std::string_view parameter = trimOws(parameters.substr(0, next));
      if (parameter.size() >= 2 && ascii::toLower(parameter[0]) == 'q' && parameter[1] == '=') {
        weight = field_lists::parseQvalue(parameter.substr(2));
      }
      parameters =
          next == std::string_view::npos ? std::string_view() : parameters.substr(next + 1);
    }
    if (weight == 0) {
      listed = false;
      return false;  // q=0 excludes it, whatever else the list says
    }
    listed |= weight > 0;
    return true;
  });
  return listed;
}

}  // namespace sluice::proxy::packages
