#pragma once
// An authoritative-looking DNS server for tests, on 127.0.0.1:<ephemeral> over UDP, driven by
// the test's own libuv loop. It answers A and AAAA from a table, and can answer NXDOMAIN,
// NODATA, REFUSED or SERVFAIL, stay silent, or hold queries until released. It counts every
// query it receives, per name and type, so tests can assert "no query was sent".
//
// Lifetime: create on a loop, close() before the loop is closed; the socket is freed by the
// loop (run it once more). The wire code is written here from RFC 1035, independent of c-ares.

#include <uv.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::testing {

class FakeDnsServer {
 public:
  static constexpr std::uint16_t kTypeA = 1;
  static constexpr std::uint16_t kTypeAaaa = 28;

  enum class Mode : std::uint8_t {
    Answer,    // NOERROR with the zone's records of the asked type (none: NODATA)
    NxDomain,  // rcode 3
    Refused,   // rcode 5
    ServFail,  // rcode 2
    Silent,    // no reply at all
  };

  struct Zone {
    Mode mode = Mode::Answer;
    std::vector<std::string> a;     // dotted quads
    std::vector<std::string> aaaa;  // IPv6 text
    std::uint32_t ttl = 300;
    bool hold = false;  // keep queries unanswered until releaseHeld()
  };

  explicit FakeDnsServer(uv_loop_t* loop);
  ~FakeDnsServer();
  FakeDnsServer(const FakeDnsServer&) = delete;
  FakeDnsServer& operator=(const FakeDnsServer&) = delete;

  // Names are matched case-insensitively, without a trailing dot. Unknown names: NXDOMAIN.
  void set(std::string_view name, Zone zone);

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  int queries() const { return total_; }
  int queries(std::string_view name) const;
  int queries(std::string_view name, std::uint16_t type) const;
  std::size_t held() const { return held_.size(); }

  // Answers every held query as its zone says (ignoring `hold`).
  void releaseHeld();
  void close();

 private:
  struct Held {
    sockaddr_storage peer;
    std::vector<std::uint8_t> query;
  };

  static void onAlloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf);
  static void onRecv(uv_udp_t* udp, ssize_t nread, const uv_buf_t* buf, const sockaddr* peer,
                     unsigned flags);
  void handle(const std::vector<std::uint8_t>& query, const sockaddr* peer, bool releasing);
  void send(const sockaddr* peer, std::vector<std::uint8_t> reply);

  uv_udp_t* udp_;
  std::uint16_t port_ = 0;
  std::map<std::string, Zone, std::less<>> zones_;
  std::map<std::pair<std::string, std::uint16_t>, int> counts_;
  int total_ = 0;
  std::vector<Held> held_;
  char buffer_[65536];
};

}  // namespace sluice::testing
