#pragma once
// What a request names as its target on a connection, by the connection's route: inside a
// tunnel H and the port are the tunnel's, on a redirected plain connection H is the Host and
// the port the one the sandbox dialled, and a forward-mode request names both in its
// absolute-form URL. Pure: the head and the connection's facts in, the record's target out.

#include <optional>
#include <string_view>

#include "policy/reason.h"
#include "proxy/audit/audit_record.h"
#include "proxy/http/request_parser.h"
#include "proxy/session/context/client_side.h"
#include "proxy/session/exchange/request_record.h"

namespace sluice::proxy::session {

// Why a head cannot name a target on its connection (its answer, and the record's reason).
struct TargetRefusal {
  policy::Reason reason = policy::Reason::BadRequest;
  std::string_view detail;  // static text, or a view into the head
};

// Sets record.scheme, target_host, port and url for `head` on `connection`. A refusal when the
// head cannot be forwarded on that route (what it set so far stays, for the record).
std::optional<TargetRefusal> targetOf(const ConnectionFacts& connection,
                                      const http::RequestHead& head, RequestRecord& record);

// The record of a head the parser refused says what had been received: the method, the target
// and the Host as far as they were read ("as received": docs/audit.md#the-fields). For the first
// head on the explicit listener (`first_head`) it also says which mode the head was asking for:
// `mode` becomes Connect or Forward.
void recordRefusedHead(const http::RequestParser::PartialHead& seen,
                       const ConnectionFacts& connection, bool first_head, RequestRecord& record,
                       audit::Mode& mode);

}  // namespace sluice::proxy::session
