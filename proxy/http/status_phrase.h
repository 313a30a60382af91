#pragma once
// The reason phrase of a status code as RFC 9110 section 15 (and the IANA registry) names it,
// for a status line sluice writes without one of the origin's: an answer from an HTTP/2 origin
// (which sends no phrase) relayed to an HTTP/1.1 client, or an origin's empty phrase. Clients
// show it (Java's getResponseMessage(), curl -v), so "HTTP/1.1 200 " reads as a broken server.

#include <string_view>

namespace sluice::proxy::http {

// "" for a code with no registered name.
std::string_view statusPhrase(int status);

}  // namespace sluice::proxy::http
