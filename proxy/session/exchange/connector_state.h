#pragma once
// The states of the connector (getting an exchange its upstream connection) and the moves
// between them: the one table that Connector::transition() obeys and ARCHITECTURE.md draws.
// Dial what was checked: a name is resolved once, decided on with its addresses, and only the
// usable addresses are dialled, in turn; a reused connection is re-checked for this request.

#include <array>
#include <cstdint>
#include <string_view>

#include "proxy/session/context/state_table.h"

namespace sluice::proxy::session {

enum class ConnectorState : std::uint8_t {
  Idle,         // nothing asked, or the last outcome taken
  Joining,      // another request's dial to the same key may bring an HTTP/2 session to share
  Resolving,    // sluice's resolver (c-ares, the configured servers, cached)
  Connecting,   // the usable addresses in turn, each bounded by connect_timeout
  Handshaking,  // upstream TLS: SNI H, the chain and H verified against upstream.ca_file
  Ready,        // a connection for this request: handed to the exchange
  Failed,       // none: the exchange answers with the reason
};

inline constexpr TransitionTable kConnectorMachine{
    "connector",
    std::to_array<std::string_view>(
        {"Idle", "Joining", "Resolving", "Connecting", "Handshaking", "Ready", "Failed"}),
    std::to_array<Transition<ConnectorState>>({
        {ConnectorState::Idle, ConnectorState::Joining,
         "a dial to the same key, offering h2, is under way: wait for its session"},
        {ConnectorState::Idle, ConnectorState::Resolving, "H is a name: resolve it"},
        {ConnectorState::Joining, ConnectorState::Ready,
         "that dial became a session, which takes this request too"},
        {ConnectorState::Joining, ConnectorState::Resolving,
         "that dial brought no session it may share: dial its own"},
        {ConnectorState::Joining, ConnectorState::Connecting,
         "the same, with its own answer (or H an allowed IP literal)"},
        {ConnectorState::Joining, ConnectorState::Failed, "idle_timeout"},
        {ConnectorState::Joining, ConnectorState::Idle, "cancelled: it waits no more"},
        {ConnectorState::Idle, ConnectorState::Connecting,
         "H is an allowed IP literal: its own, checked, address"},
        {ConnectorState::Idle, ConnectorState::Ready,
         "the client's parked or a pooled connection passes this request's checks"},
        {ConnectorState::Idle, ConnectorState::Failed,
         "transparent, require_match: the literal is not what the sandbox dialled"},
        {ConnectorState::Resolving, ConnectorState::Connecting,
         "the answer decided on: its usable addresses"},
        {ConnectorState::Resolving, ConnectorState::Joining,
         "the answer decided on, and a dial to the same key, past its lookup, is under way"},
        {ConnectorState::Resolving, ConnectorState::Ready,
         "transparent, require_match: a pooled connection, once the answer matched"},
        {ConnectorState::Resolving, ConnectorState::Failed,
         "dns_failed, ip_denied, dns_mismatch, idle_timeout"},
        {ConnectorState::Resolving, ConnectorState::Idle, "cancelled: the lookup never calls"},
        {ConnectorState::Connecting, ConnectorState::Handshaking, "connected, https"},
        {ConnectorState::Connecting, ConnectorState::Ready, "connected, http"},
        {ConnectorState::Connecting, ConnectorState::Failed,
         "no usable address accepted: upstream_connect, or upstream_timeout"},
        {ConnectorState::Connecting, ConnectorState::Idle, "cancelled: the socket closes"},
        {ConnectorState::Handshaking, ConnectorState::Ready, "the upstream verified for H"},
        {ConnectorState::Handshaking, ConnectorState::Failed,
         "upstream_cert, upstream_connect, upstream_timeout"},
        {ConnectorState::Handshaking, ConnectorState::Idle, "cancelled: the socket closes"},
        {ConnectorState::Ready, ConnectorState::Idle,
         "the next exchange, or a stale reused one sent again"},
        {ConnectorState::Failed, ConnectorState::Idle, "the next exchange"},
    })};

}  // namespace sluice::proxy::session
