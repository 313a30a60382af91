#include "proxy/dns/answer.h"

namespace sluice::proxy::dns {

std::string_view toString(DnsError e) {
  switch (e) {
    case DnsError::NotFound:
      return "not_found";
    case DnsError::NoAddresses:
      return "no_addresses";
    case DnsError::Timeout:
      return "timeout";
    case DnsError::Refused:
      return "refused";
    case DnsError::Failed:
      return "failed";
    case DnsError::Cancelled:
      return "cancelled";
  }
  return "failed";
}

}  // namespace sluice::proxy::dns
