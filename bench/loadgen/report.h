#pragma once
// The one JSON line sluice-loadgen prints at the end, and idle mode's "holding" line. The
// fields are fixed (a comparison script reads them); a field that does not apply to the mode
// is null:
//
//   mode, label, url, proxy        as given (label and proxy null when absent)
//   concurrency, threads           threads as run (never more than there are connections)
//   seconds                        the measured window (idle: bringing every connection up)
//   requests, errors               2xx responses / failures in the window (idle: connections
//                                  held / failures, including drops during the hold)
//   req_per_s                      requests / seconds (null for idle)
//   p50_us, p99_us                 keepalive, bulk: request written -> response complete;
//                                  newconn, idle: TCP connect started -> response complete
//   conn_per_s                     newconn: connections (one request each) / s; idle: the
//                                  rate connections came up
//   mb_per_s                       bulk: body bytes / seconds, in 10^6 bytes
//   bytes                          response body bytes received in the window
//   connections                    idle: connections held (as in the "holding" line)
//   cpu_seconds                    the generator's own CPU time (user + system, all threads)
//                                  over the window: divide by requests for its cost per request
//   proto                          "http/1.1" or "h2" (--proto)
//   streams                        h2: concurrent streams per connection (--streams); the
//                                  requests in flight are concurrency x streams

#include <cstdint>
#include <string>

#include "bench/loadgen/histogram.h"
#include "bench/loadgen/options.h"

namespace sluice::loadgen {

struct Summary {
  int threads = 0;
  double seconds = 0;
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::uint64_t bytes = 0;
  std::uint64_t held = 0;
  double cpu_seconds = 0;
  LatencyHistogram latency;
};

std::string resultLine(const Options& options, const Summary& summary);
std::string holdingLine(std::uint64_t connections);

}  // namespace sluice::loadgen
