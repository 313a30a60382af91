#pragma once
// The built-in default configuration of `sluice run` without -c
// (docs/configuration.md#the-built-in-default): the text of examples/package-mirrors.yaml, compiled
// in.

#include <string_view>

namespace sluice::proxy {

inline constexpr std::string_view kBuiltinConfigName = "<built-in package-mirrors.yaml>";
std::string_view builtinConfigText();

}  // namespace sluice::proxy
