#include "proxy/http/parse_event.h"

namespace sluice::proxy::http {

std::string_view toString(EventKind kind) {
  switch (kind) {
    case EventKind::NeedMore:
      return "need_more";
    case EventKind::HeadComplete:
      return "head_complete";
    case EventKind::MessageComplete:
      return "message_complete";
    case EventKind::ConnectHead:
      return "connect_head";
    case EventKind::InterimHead:
      return "interim_head";
    case EventKind::Error:
      return "error";
  }
  return "?";
}

std::string_view toString(ParseError error) {
  switch (error) {
    case ParseError::None:
      return "none";
    case ParseError::BadRequest:
      return "bad_request";
    case ParseError::HeaderTooLarge:
      return "header_too_large";
    case ParseError::Internal:
      return "internal";
  }
  return "?";
}

}  // namespace sluice::proxy::http
