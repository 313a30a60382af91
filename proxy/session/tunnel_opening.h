#pragma once
// How a tunnel opens, and the tunnel's own record: a CONNECT decided on its target (then "200
// Connection established"), or a redirected connection's first byte (a TLS handshake record,
// else HTTP); the ClientHello read by sluice's own parser and decided on with its SNI (H is the
// CONNECT's target, or the SNI itself when redirected); a leaf for H minted only then; and the
// handshake, whose server name as OpenSSL negotiated it must be that SNI (two parsers that
// disagree are a bypass). A tunnel that gets no TLS session ends with an alert where one can be
// sent (docs/wire.md#tunnels-that-get-no-tls-session), and its record.
//
// A tunnel the policy refuses is refused in band where it can be (policy/refusal.h,
// docs/wire.md#refusals-in-band): it opens as an allowed one would, with
// ConnectionFacts::refused_in_band set, and each request inside gets the refusal.
//
// The tunnel is no request: the requests inside it are the codec's, each with its record. The
// tunnel's record is kept here, from the CONNECT (or the ClientHello) on: written when the
// tunnel is refused (in band too), when it ends without carrying a request, or when the sandbox
// made it fail (docs/audit.md#when-a-record-is-written). So are the connection's refusals
// before any request (a connection over a limit).
//
// Part of a ClientConnection (OpeningHost), which owns it beside the facts and the transport it
// works on; it moves the connection through ReadingProxyHead (a CONNECT), Sniffing,
// ReadingClientHello and TlsHandshake.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "policy/config.h"
#include "policy/reason.h"
#include "proxy/http/request_parser.h"
#include "proxy/session/context/client_side.h"
#include "proxy/session/client_transport.h"
#include "proxy/session/connection_state.h"
#include "proxy/session/exchange/request_record.h"
#include "proxy/session/context/worker_context.h"

namespace sluice::proxy {
struct SandboxRuntime;
}  // namespace sluice::proxy

namespace sluice::proxy::session {

class OpeningHost {
 public:
  virtual ConnectionState state() const = 0;
  virtual bool transition(ConnectionState next) = 0;
  virtual bool closing() const = 0;
  virtual void flushCorked() = 0;
  virtual void finishConnection() = 0;
  // A redirected connection's ClientHello is a new request: the generation in force now (false:
  // the sandbox is gone, the connection was ended), and an audit log that can be written.
  virtual bool takeUpCurrentGeneration() = 0;
  virtual bool auditAvailable() const = 0;
  virtual const policy::Sandbox& sandbox() const = 0;
  // A redirected connection's first byte is not TLS: plain HTTP, H from each request's Host.
  virtual void onPlainHttp(std::span<const char> data) = 0;
  // The ClientHello was allowed and fed to the TLS session: the handshake can go on.
  virtual void onHandshakeBytes() = 0;
  // The handshake completed: requests come on the tunnel.
  virtual void onTunnelOpen() = 0;
  // The sandbox's handshake failed (it may have refused sluice's certificate).
  virtual void onHandshakeFailed(const tls::Failure& failure) = 0;

 protected:
  ~OpeningHost() = default;
};

class TunnelOpening {
 public:
  TunnelOpening(OpeningHost& host, ClientSide& side, ConnectionFacts& facts,
                ClientTransport& transport);
  TunnelOpening(const TunnelOpening&) = delete;
  TunnelOpening& operator=(const TunnelOpening&) = delete;

  // The explicit listener's CONNECT, decided on its target; `rest` is what followed its head.
  void onConnect(const http::RequestHead& head, std::string_view rest);
  // A redirected connection's first bytes.
  void onFirstBytes(std::span<const char> data);
  // More of the ClientHello.
  void onHelloBytes(std::span<const char> data);
  // Advances the handshake with the bytes fed to the TLS session. True once it completed and
  // the tunnel is open; false while it goes on, or when it failed (the connection is ending).
  bool handshake();

  // A connection over a limit, before anything was read: its record (no token taken: the limit
  // is its reason), with `answer` the reason's HTTP answer (an explicit-proxy client), then the
  // connection ends.
  void refuseConnection(policy::Reason reason, std::string_view detail, bool answer);
  // The tunnel ended without carrying a request, over `proto` (None: before any HTTP), for
  // `why`: its record, with the decision that opened it and the CONNECT's 200 or none
  // (docs/audit.md#when-a-record-is-written).
  void recordQuiet(audit::Proto proto, audit::Error why);
  // The sandbox made the tunnel fail (an HTTP/2 flood): its record says so, `bad_request` with
  // no status, after its requests' (docs/audit.md#errors).
  void recordFailure(audit::Proto proto, audit::Error error);

 private:
  void processClientHello();
  policy::RequestFacts tunnelFacts() const;
  // Refuses a tunnel whose TLS never started: an alert where one can be sent (0: none), its
  // record (none for Reason::None: sluice's own failure), then the connection ends.
  void refuse(policy::Reason reason, std::uint8_t alert, std::string_view detail);
  // The same for a refusal already settled (None: no record).
  void endWithoutTls(policy::Reason reason, std::uint8_t alert, std::string_view detail);
  // A redirected connection's ClientHello refused in band: its token, log line and record.
  // False when it is over the rate instead (then refused with an alert: the connection ends).
  bool refuseHelloInBand(policy::Reason reason);
  // Refuses the CONNECT with sluice's HTTP/1.1 answer (403, 503...) and its record;
  // answerConnect() for a refusal already settled.
  void refuseConnect(policy::Reason reason, std::string_view detail);
  void answerConnect(policy::Reason reason, std::string_view detail);
  // Refuses the CONNECT in band (docs/wire.md#refusals-in-band): the tunnel's record (deny, the
  // CONNECT's 200), then the tunnel opens as an allowed one would, to carry the refusal.
  void refuseInBand(policy::Reason reason, std::string_view detail, std::string_view rest);
  // A refusal's token of the sandbox's rate (beyond it, every refusal is rate_limited) and its
  // log line; the reason and detail that stand.
  policy::Reason settle(policy::Reason reason, std::string_view& detail, std::string& over_rate);
  void write(policy::Verdict verdict, policy::Reason reason, int status);
  // A new record for the tunnel.
  void begin();

  OpeningHost& host_;
  ClientSide& side_;
  ConnectionFacts& facts_;
  ClientTransport& transport_;
  RequestRecord record_;
  RateToken rate_ = RateToken::NotTaken;
  std::string hello_;  // raw tunnel bytes until the ClientHello is complete
};

}  // namespace sluice::proxy::session
