#pragma once
// How a tunnel opens: a CONNECT decided on its target (then "200 Connection established"), or
// a redirected connection's first byte (a TLS handshake record, else HTTP); the ClientHello
// read by sluice's own parser and decided on with its SNI (H is the CONNECT's target, or the
// SNI itself when redirected); a leaf for H minted only then; and the handshake, whose server
// name as OpenSSL negotiated it must be that SNI (two parsers that disagree are a bypass). A
// tunnel that gets no TLS session ends with an alert where one can be sent
// (docs/wire.md#tunnels-that-get-no-tls-session), and its record.
//
// Part of a ClientConnection (OpeningHost), which owns it beside the facts, the exchange, the
// transport and the codec it works on; it moves the connection through ReadingProxyHead (a
// CONNECT), Sniffing, ReadingClientHello and TlsHandshake.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "policy/config.h"
#include "policy/reason.h"
#include "proxy/http/request_parser.h"
#include "proxy/session/client_transport.h"
#include "proxy/session/connection_state.h"
#include "proxy/session/exchange.h"
#include "proxy/session/exchange_host.h"
#include "proxy/session/http1_server_codec.h"
#include "proxy/session/worker_context.h"

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
  // A redirected connection's ClientHello is a new request: the generation in force now, and an
  // audit log that can be written (each false/true: the connection was ended or refused).
  virtual bool takeUpCurrentGeneration() = 0;
  virtual bool refuseIfAuditUnavailable() = 0;
  virtual const policy::Sandbox& sandbox() const = 0;
  virtual SandboxRuntime& runtime() const = 0;
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
  TunnelOpening(OpeningHost& host, WorkerContext& context, ConnectionFacts& facts,
                Exchange& exchange, ClientTransport& transport, Http1ServerCodec& codec);
  TunnelOpening(const TunnelOpening&) = delete;
  TunnelOpening& operator=(const TunnelOpening&) = delete;

  // The explicit listener's CONNECT (the record begun): decided on its target.
  void onConnect(const http::RequestHead& head);
  // A redirected connection's first bytes.
  void onFirstBytes(std::span<const char> data);
  // More of the ClientHello.
  void onHelloBytes(std::span<const char> data);
  // Advances the handshake with the bytes fed to the TLS session. True once it completed and
  // the tunnel is open; false while it goes on, or when it failed (the connection is ending).
  bool handshake();
  // Refuses a tunnel whose TLS never started: an alert where one can be sent (0: none), its
  // record (none for Reason::None: sluice's own failure), then the connection ends.
  void refuse(policy::Reason reason, std::uint8_t alert, std::string_view detail);

 private:
  void processClientHello();

  OpeningHost& host_;
  WorkerContext& ctx_;
  ConnectionFacts& facts_;
  Exchange& exchange_;
  ClientTransport& transport_;
  Http1ServerCodec& codec_;
  std::string hello_;  // raw tunnel bytes until the ClientHello is complete
};

}  // namespace sluice::proxy::session
