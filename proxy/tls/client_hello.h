#pragma once
// The ClientHello reader: sluice reads the sandbox's ClientHello itself, before OpenSSL sees
// it, to decide on the SNI before any certificate is minted or any upstream contacted
// (docs/wire.md#tls-toward-the-sandbox, docs/threat-model.md#tls-parser-disagreement). Sans-IO: the
// caller accumulates raw bytes as they arrive and calls parseClientHello() on the whole buffer each
// time; re-parsing from the start is cheap (hellos are small) and keeps this file free of state.
// The same raw bytes are then fed, unchanged, to OpenSSL.
//
// The reader is at least as strict as OpenSSL 3.0 wherever the server name is concerned:
// whatever OpenSSL refuses in the record framing, the hello's structure or the server_name
// extension, this refuses too (Malformed, or SniState::Malformed), so the two never see
// different names in one hello. It is stricter in places (duplicate unknown extensions, empty
// records, an empty host_name), which only ever denies. docs/wire.md still requires the caller
// to compare SSL_get_servername() with the SNI decided on here once the handshake completes.
//
// Every byte is hostile: all lengths are bounds-checked, nothing reads past the span, nothing
// throws or allocates.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sluice::proxy::tls {

enum class HelloStatus : std::uint8_t {
  NeedMore,   // a prefix of what may still become a valid hello: read more and call again
  Done,       // a complete, well-formed ClientHello; `info` describes it
  NotTls,     // not a TLS handshake (HTTP, SSH, an SSLv2-compatible hello, ...): decided from
              // as few bytes as possible, often the first one
  Malformed,  // TLS framing or ClientHello structure that a TLS server must refuse
  TooLarge,   // the hello's records would exceed kMaxClientHelloBytes (64 KiB)
};

enum class SniState : std::uint8_t {
  Absent,     // no server_name extension (the caller denies `sni_missing`)
  Present,    // exactly one non-empty host_name of at most 255 bytes
  Malformed,  // a server_name extension that names no single usable host: an empty list,
              // another name type, two host_names, an empty or over-long host_name
};

std::string_view toString(HelloStatus s);
std::string_view toString(SniState s);

// Raw bytes of the hello, record headers included, that sluice buffers at most.
inline constexpr std::size_t kMaxClientHelloBytes = 64 * 1024;
// RFC 6066 and OpenSSL (TLSEXT_MAXLEN_host_name): a longer host_name is refused.
inline constexpr std::size_t kMaxSniBytes = 255;

// What the hello says, meaningful when the status is Done. A value type: the SNI is copied
// into it (the host_name may be split across records, so it need not be contiguous in the
// caller's buffer), and copies are independent of the buffer and of each other.
struct ClientHelloInfo {
  SniState sni_state = SniState::Absent;
  // The raw host_name bytes when Present (may contain anything: NUL, upper case, dots; the
  // caller canonicalises with policy::canonicalizeHost); empty otherwise.
  std::array<char, kMaxSniBytes> sni_bytes{};
  std::uint8_t sni_length = 0;
  bool offers_alpn = false;
  bool offers_http11 = false;  // ALPN lists exactly "http/1.1"
  bool offers_h2 = false;      // ALPN lists exactly "h2"
  // encrypted_client_hello (0xfe0d, and the deployed drafts 0xfe08..0xfe0c) or ESNI (0xffce).
  // A terminating path ignores it as OpenSSL does; a non-terminating one must refuse it (L5).
  bool has_ech = false;
  std::uint16_t legacy_version = 0;  // the client_version field
  bool offers_tls13 = false;         // supported_versions lists 0x0304
  // Bytes at the start of the buffer that hold the records carrying the hello: the end of
  // the last of them, which may also carry the start of later messages.
  std::size_t consumed = 0;

  // Valid while this object lives; it points into sni_bytes.
  std::string_view sni() const { return {sni_bytes.data(), sni_length}; }
};

struct HelloResult {
  HelloStatus status = HelloStatus::NeedMore;
  ClientHelloInfo info;  // default unless status is Done
};

// Reads the ClientHello at the start of `buffered`: every byte received on the connection so
// far. The result for a buffer is final once it is not NeedMore: appending bytes never changes
// it (the fuzz target checks this).
HelloResult parseClientHello(std::span<const std::uint8_t> buffered);

// A fatal TLS alert record, for closing a connection that gets no TLS session
// (docs/wire.md#tunnels-that-get-no-tls-session):
// e.g. unrecognized_name (112), handshake_failure (40), illegal_parameter (47),
// decode_error (50), access_denied (49), internal_error (80).
inline constexpr std::uint8_t kAlertHandshakeFailure = 40;
inline constexpr std::uint8_t kAlertIllegalParameter = 47;
inline constexpr std::uint8_t kAlertAccessDenied = 49;
inline constexpr std::uint8_t kAlertDecodeError = 50;
inline constexpr std::uint8_t kAlertInternalError = 80;
inline constexpr std::uint8_t kAlertUnrecognizedName = 112;
std::array<std::uint8_t, 7> alertRecord(std::uint8_t description);

}  // namespace sluice::proxy::tls
