"""Raw ClientHellos for the TLS edge cases (L2, L4, R2 of docs/threat-model.md): take the first
flight of Python's TLS client, change its server_name, pad it, or grow its cipher-suite list, and
frame it again into TLS records. Only for hellos that sluice must refuse, or whose first answer
(ServerHello or alert) is all a test looks at: a changed hello cannot finish a handshake.
"""
import socket
import time

from tlsraw import client_hello

EXT_SERVER_NAME = 0
EXT_SUPPORTED_GROUPS = 10
EXT_PADDING = 21
EXT_KEY_SHARE = 51
GROUP_NAMES = {0x17: "secp256r1", 0x18: "secp384r1", 0x19: "secp521r1", 0x1d: "x25519",
               0x1e: "x448", 0x100: "ffdhe2048", 0x101: "ffdhe3072", 0x102: "ffdhe4096",
               0x103: "ffdhe6144", 0x104: "ffdhe8192"}
ALERTS = {0: "close_notify", 10: "unexpected_message", 40: "handshake_failure",
          47: "illegal_parameter", 50: "decode_error", 70: "protocol_version",
          80: "internal_error", 112: "unrecognized_name", 120: "no_application_protocol"}


def _u16(n):
    return n.to_bytes(2, "big")


def handshake_bytes(flight):
    """The handshake messages carried by the records of `flight`, concatenated."""
    out, pos = b"", 0
    while pos + 5 <= len(flight):
        length = int.from_bytes(flight[pos + 3:pos + 5], "big")
        out += flight[pos + 5:pos + 5 + length]
        pos += 5 + length
    return out


def server_name_data(names, name_type=0):
    """The body of a server_name extension listing `names` (raw bytes each)."""
    entries = b"".join(bytes([name_type]) + _u16(len(n)) + n for n in names)
    return _u16(len(entries)) + entries


class Hello:
    """A parsed ClientHello: legacy fields kept as bytes, extensions as [(type, data)]. Python's
    own for `sni`, or the handshake message `message` (bytes) as another client sent it."""

    def __init__(self, sni="allowed.test", alpn=("http/1.1",), message=None):
        msg = message if message is not None else handshake_bytes(client_hello(sni, alpn=alpn))
        assert msg[0] == 1, "not a ClientHello"
        body = msg[4:4 + int.from_bytes(msg[1:4], "big")]
        pos = 2 + 32
        self.head = body[:pos]                      # legacy_version + random
        sid_len = body[pos]
        self.session_id = body[pos + 1:pos + 1 + sid_len]
        pos += 1 + sid_len
        cs_len = int.from_bytes(body[pos:pos + 2], "big")
        self.cipher_suites = body[pos + 2:pos + 2 + cs_len]
        pos += 2 + cs_len
        comp_len = body[pos]
        self.compression = body[pos + 1:pos + 1 + comp_len]
        pos += 1 + comp_len
        ext_len = int.from_bytes(body[pos:pos + 2], "big")
        exts, pos, end = [], pos + 2, pos + 2 + ext_len
        while pos < end:
            etype = int.from_bytes(body[pos:pos + 2], "big")
            elen = int.from_bytes(body[pos + 2:pos + 4], "big")
            exts.append((etype, body[pos + 4:pos + 4 + elen]))
            pos += 4 + elen
        self.extensions = exts

    # --- reading -----------------------------------------------------------------------------

    def extension(self, etype):
        return next((d for t, d in self.extensions if t == etype), None)

    def supported_groups(self):
        """The named groups offered (IANA code points), in order."""
        data = self.extension(EXT_SUPPORTED_GROUPS) or b"\0\0"
        return [int.from_bytes(data[i:i + 2], "big") for i in range(2, len(data), 2)]

    def key_share_groups(self):
        """The groups of the key_share entries, in order."""
        data, out, pos = self.extension(EXT_KEY_SHARE) or b"\0\0", [], 2
        while pos + 4 <= len(data):
            out.append(int.from_bytes(data[pos:pos + 2], "big"))
            pos += 4 + int.from_bytes(data[pos + 2:pos + 4], "big")
        return out

    def cipher_suite_ids(self):
        return [int.from_bytes(self.cipher_suites[i:i + 2], "big")
                for i in range(0, len(self.cipher_suites), 2)]

    # --- changes -----------------------------------------------------------------------------

    def set_server_names(self, names):
        """Replace the server_name extension: `names` is a list of raw byte strings (each a
        host_name entry), or None to drop the extension."""
        self.extensions = [(t, d) for t, d in self.extensions if t != EXT_SERVER_NAME]
        if names is not None:
            self.extensions.insert(0, (EXT_SERVER_NAME, server_name_data(names)))
        return self

    def add_extension(self, etype, data, first=False):
        if first:
            self.extensions.insert(0, (etype, data))
        else:
            self.extensions.append((etype, data))
        return self

    def pad(self, n):
        """An RFC 7685 padding extension of n zero bytes (replacing OpenSSL's own, if any:
        an extension type may appear only once)."""
        self.extensions = [(t, d) for t, d in self.extensions if t != EXT_PADDING]
        return self.add_extension(EXT_PADDING, b"\0" * n)

    def add_cipher_suites(self, count):
        """`count` more (unassigned, ignored) cipher suites, before the real ones."""
        bogus = b"".join(_u16(0x0a0a + 0x100 * (i % 200) + (i // 200) % 0x100)
                         for i in range(count))
        self.cipher_suites = bogus + self.cipher_suites
        return self

    # --- bytes -------------------------------------------------------------------------------

    def message(self):
        exts = b"".join(_u16(t) + _u16(len(d)) + d for t, d in self.extensions)
        assert len(exts) <= 0xFFFF and len(self.cipher_suites) <= 0xFFFE
        body = (self.head + bytes([len(self.session_id)]) + self.session_id +
                _u16(len(self.cipher_suites)) + self.cipher_suites +
                bytes([len(self.compression)]) + self.compression + _u16(len(exts)) + exts)
        return b"\x01" + len(body).to_bytes(3, "big") + body

    def records(self, size=16384):
        """The hello framed as handshake records of at most `size` bytes each."""
        msg = self.message()
        return [b"\x16\x03\x01" + _u16(len(msg[i:i + size])) + msg[i:i + size]
                for i in range(0, len(msg), size)]


def read_client_hello(sock, timeout=10):
    """The ClientHello a client sent to `sock` (a server's accepted socket), parsed: reads
    handshake records until the whole message is there."""
    sock.settimeout(timeout)
    data = b""
    while True:
        msg = handshake_bytes(data)
        if len(msg) >= 4 and len(msg) >= 4 + int.from_bytes(msg[1:4], "big"):
            return Hello(message=msg)
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a whole ClientHello (%d bytes)" % len(data))
        data += chunk


def send_records(sock, records, pause=0.0):
    for rec in records:
        sock.sendall(rec)
        if pause:
            time.sleep(pause)  # shapes the traffic only


def first_answer(sock, timeout=10):
    """What the server answered to a hello: ("server_hello", None), ("alert", name),
    ("eof", None), ("reset", None), ("timeout", None) or ("other", bytes). Reads until the
    first record is complete or the connection ends."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            if len(data) >= 5:
                length = int.from_bytes(data[3:5], "big")
                if len(data) >= 5 + length:
                    break
            chunk = sock.recv(65536)
            if not chunk:
                if not data:
                    return "eof", None
                break
            data += chunk
    except ConnectionResetError:
        if not data:
            return "reset", None
    except (socket.timeout, TimeoutError):
        if not data:
            return "timeout", None
    if data[:1] == b"\x16" and len(data) >= 6 and data[5] == 2:
        return "server_hello", None
    if data[:1] == b"\x15" and len(data) >= 7:
        return "alert", ALERTS.get(data[6], str(data[6]))
    return "other", data[:64]


def rest_until_closed(sock, timeout=10):
    """Bytes after the first answer until the peer closes, and how it ended."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data, "eof"
            data += chunk
    except ConnectionResetError:
        return data, "reset"
    except (socket.timeout, TimeoutError):
        return data, "timeout"
