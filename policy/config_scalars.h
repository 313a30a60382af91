#pragma once
// The text of the configuration's scalar values, parsed strictly
// (docs/configuration.md#strict-yaml). No YAML here: the loader hands over the scalar's text and
// reports the returned message at the value's position, after the key path. Every message names the
// offending text in single quotes.
//
// Why our own parsers: yaml-cpp 0.7 reads `0443` as octal 291 and `0x1bb` as 443, and
// std::stoul accepts "+443", " 443" and "443abc". A port written in a policy must mean what
// it says, so only plain decimal is a number.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace sluice::policy {

// ^(0|[1-9][0-9]*)$ within std::uint64_t.
Result<std::uint64_t, std::string> parseDecimal(std::string_view text);

// ^(0|[1-9][0-9]*)(ms|s|m)$: "500ms", "2s", "1m". A bare number is an error (is "2" seconds
// or milliseconds?), as are fractions, signs and other units.
Result<std::chrono::milliseconds, std::string> parseDuration(std::string_view text);
// A duration as parseDuration reads it, or in hours and days too ("12h", "7d"): ages, which are
// counted in days (docs/packages.md#settings).
Result<std::chrono::milliseconds, std::string> parseAge(std::string_view text);

// ^(0|[1-9][0-9]*)(B|KiB|MiB|GiB)?$ in bytes; a bare number is bytes. Units are binary and
// case-sensitive ("64kb" is refused rather than guessed).
Result<std::uint64_t, std::string> parseSize(std::string_view text);

// Sandbox, policy and secret names: ^[a-z0-9._-]+$, 1-64 characters, not "." or "..". They
// end up in directory names (<ca base>/<sandbox name>), metric labels and log lines.
Result<Ok, std::string> checkName(std::string_view text);

// An HTTP method token (RFC 9110 tchar) without lower-case letters: methods are compared
// case-sensitively, so "get" would never match a real GET.
Result<Ok, std::string> checkMethod(std::string_view text);

// A header field name (RFC 9110 token), returned lower-cased.
Result<std::string, std::string> parseHeaderName(std::string_view text);

// `text` in single quotes for an error message; control and non-ASCII bytes as \xNN, and
// more than 64 characters shortened with "...", so that a message stays one readable line.
std::string quoteForMessage(std::string_view text);
// Appends `text` with control and non-ASCII bytes as \xNN (what quoteForMessage shows), for a
// message that goes to a terminal.
void appendPrintable(std::string& out, std::string_view text);

}  // namespace sluice::policy
