#pragma once
// The two SSL_CTX kinds sluice uses. Config-time objects: build each once
// (the server context once per process, the upstream context once per trust-store setting)
// and share it read-only among all connections and worker threads; every TlsSession holds a
// reference (SSL_new up-refs the context), so a context may be released while sessions live.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <openssl/ssl.h>

#include "base/result.h"
#include "certs/openssl_ptr.h"

namespace sluice::proxy::tls {

using certs::SslCtxPtr;

// The application protocols sluice speaks (docs/threat-model.md#protocol-escapes): toward the
// sandbox both, h2 preferred; toward origins HTTP/1.1.
inline constexpr std::string_view kAlpnHttp11 = "http/1.1";
inline constexpr std::string_view kAlpnH2 = "h2";

// Both sides agree only to the groups X25519, P-256 and P-384 (a client offering none of them,
// e.g. only finite-field groups, gets a handshake_failure alert) and to no TLS 1.2 suite with
// a finite-field Diffie-Hellman key exchange: whoever picks such a group picks what the
// handshake costs the other side.
//
// Sandbox-facing side. TLS 1.2 minimum (TLS 1.0/1.1 ClientHellos get a protocol_version
// alert: docs/threat-model.md#tls-parser-disagreement), TLS 1.3 preferred, OpenSSL's default
// TLS 1.3 suites and ECDHE AEAD TLS 1.2 suites, at security level 2.
// The certificate and key are set per connection (TlsSession::server), so one context serves
// every host. ALPN: selects "h2" when the client offers it, else "http/1.1" when it offers that,
// otherwise answers without ALPN (never another protocol). No client certificates. Renegotiation
// refused.
//
// No session resumption, by design: no tickets (TLS 1.2 or 1.3) and no session cache. The
// context is shared by every host of every sandbox, and OpenSSL lets a TLS 1.3 client resume
// a session across SNI values (and reports the *old* name from SSL_get_servername on a
// TLS 1.2 resumption), which would blur the SNI check of docs/wire.md#tls-toward-the-sandbox. A
// full handshake to a local gateway costs one ECDHE and one P-256 signature.
//
// Null only when OpenSSL cannot allocate (its error queue is cleared).
SslCtxPtr makeServerContext();

// Upstream side (point 6 of docs/wire.md#the-invariant): TLS client, TLS 1.2 minimum, peer
// verification required against `ca_file` (a PEM bundle; an error if it cannot be read or holds no
// certificate) or, without it, OpenSSL's default verify paths; and against each of
// `extra_ca_files` as well (each read as `ca_file` is). ALPN offers "http/1.1" only.
// Renegotiation refused. The name each connection must present is set per session
// (TlsSession::client), never here.
//
// Session cache: SSL_SESS_CACHE_CLIENT without OpenSSL's internal store, so OpenSSL keeps no
// sessions by itself (no unbounded memory); the caller keeps TlsSession::session() per
// (host, port) and passes it to the next TlsSession::client for that same pair.
Result<SslCtxPtr, std::string> makeUpstreamContext(
    const std::optional<std::string>& ca_file, std::span<const std::string> extra_ca_files = {});

}  // namespace sluice::proxy::tls
