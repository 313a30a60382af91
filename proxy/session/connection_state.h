#pragma once
// The states of one client connection and the moves between them: the one table that
// ClientConnection::transition() obeys and ARCHITECTURE.md draws ("The life of a connection").
// What happens to each request on the connection is its codec's (client_codec.h): HTTP/1.1 or
// HTTP/2, the connection does not ask which. Serving is where requests come and go.

#include <array>
#include <cstdint>
#include <string_view>

#include "proxy/session/context/state_table.h"

namespace sluice::proxy::session {

enum class ConnectionState : std::uint8_t {
  Sniffing,            // transparent: the first byte tells TLS from HTTP
  ReadingProxyHead,    // explicit: CONNECT, or an absolute-form request (forward mode)
  ReadingClientHello,  // a tunnel: sluice's own parser reads the ClientHello for its SNI
  TlsHandshake,        // a leaf for H from the sandbox's CA; OpenSSL must negotiate that name
  Serving,             // the codec's requests come and go (HTTP/1.1 one at a time, HTTP/2 at once)
  Lingering,           // sluice's last bytes and FIN sent; the input is drained for a moment
  Closing,             // every handle is closing
  Closed,              // the last close callback ran: the worker may free the connection
};

inline constexpr TransitionTable kConnectionMachine{
    "connection",
    std::to_array<std::string_view>({"Sniffing", "ReadingProxyHead", "ReadingClientHello",
                                     "TlsHandshake", "Serving", "Lingering", "Closing",
                                     "Closed"}),
    std::to_array<Transition<ConnectionState>>({
        {ConnectionState::Sniffing, ConnectionState::ReadingClientHello,
         "a TLS handshake record (0x16): H is the SNI"},
        {ConnectionState::Sniffing, ConnectionState::Serving,
         "any other first byte: HTTP/1.1, H is each request's Host"},
        {ConnectionState::Sniffing, ConnectionState::Closing,
         "EOF, a read error, handshake_timeout, a connection limit"},
        {ConnectionState::ReadingProxyHead, ConnectionState::ReadingClientHello,
         "CONNECT H:port allowed: 200 Connection established"},
        {ConnectionState::ReadingProxyHead, ConnectionState::Serving,
         "an absolute-form http:// request: forward mode"},
        {ConnectionState::ReadingProxyHead, ConnectionState::Lingering,
         "the head refused: sluice's answer, Connection: close"},
        {ConnectionState::ReadingProxyHead, ConnectionState::Closing,
         "EOF, a read error, handshake_timeout, a connection limit"},
        {ConnectionState::ReadingClientHello, ConnectionState::TlsHandshake,
         "the ClientHello allowed (SNI = H): a leaf for H"},
        {ConnectionState::ReadingClientHello, ConnectionState::Lingering,
         "refused: a TLS alert where one can be sent"},
        {ConnectionState::ReadingClientHello, ConnectionState::Closing,
         "EOF, a read error, handshake_timeout"},
        {ConnectionState::TlsHandshake, ConnectionState::Serving,
         "handshake done, OpenSSL's SNI the one decided on: the ALPN's codec"},
        {ConnectionState::TlsHandshake, ConnectionState::Lingering,
         "the handshake failed, or OpenSSL saw another name"},
        {ConnectionState::TlsHandshake, ConnectionState::Closing,
         "EOF, a read error, handshake_timeout"},
        {ConnectionState::Serving, ConnectionState::Lingering,
         "a denial, the last request of a closing or draining connection, GOAWAY"},
        {ConnectionState::Serving, ConnectionState::Closing,
         "EOF between requests, a reset, idle_timeout, shutdown"},
        {ConnectionState::Lingering, ConnectionState::Closing, "EOF, or the linger is over"},
        {ConnectionState::Closing, ConnectionState::Closed, "the last handle closed"},
    })};

// The states of the opening: reading the proxy head, the ClientHello or the handshake, bounded
// by handshake_timeout as a whole. Any byte the client sends in them is progress.
constexpr bool opening(ConnectionState s) {
  return s == ConnectionState::Sniffing || s == ConnectionState::ReadingProxyHead ||
         s == ConnectionState::ReadingClientHello || s == ConnectionState::TlsHandshake;
}

}  // namespace sluice::proxy::session
