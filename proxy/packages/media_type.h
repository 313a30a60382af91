#pragma once
// Media types as registries negotiate them (RFC 9110 §8.3.1 and §12.5.1): the type of a
// Content-Type, and whether an Accept list asks for a type. Sans-IO; nothing is allocated.

#include <string_view>

namespace sluice::proxy::packages {

// "type/subtype" of a Content-Type value, without its parameters and whitespace ("" when the
// value has no '/' in its first element). Compare it with ascii::iequals: types are
// case-insensitive.
std::string_view mediaTypeOf(std::string_view content_type);

// Whether `accept` lists `type` itself (not through a wildcard) with a weight above 0. Other
// parameters are ignored; an element whose q is malformed is ignored. A parameter's quoted
// value (RFC 9110 §5.6.4) is one value: its commas and semicolons split nothing.
bool acceptListsMediaType(std::string_view accept, std::string_view type);

}  // namespace sluice::proxy::packages
