"""WebSocket frames by hand (RFC 6455 §5), for tests that carry them on something other than a
WebSocket library's own connection (the DATA frames of an RFC 8441 stream, test_websocket_h2):
the client's frames masked, as a client must send them, and a reader of the origin's (unmasked)
frames that keeps the bytes of every frame, so that a test can count what was relayed each way.
"""
from dataclasses import dataclass
import os
import struct
import zlib

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def client_frame(opcode, payload, fin=True, mask=None):
    """One masked frame: FIN, no RSV bits, `opcode`, `payload` (bytes) masked with `mask` (4
    random bytes unless given)."""
    mask = os.urandom(4) if mask is None else mask
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def text(message):
    return client_frame(TEXT, message.encode("utf-8"))


def close(code=1000, reason=""):
    return client_frame(CLOSE, struct.pack("!H", code) + reason.encode("utf-8"))


@dataclass
class Frame:
    fin: bool
    rsv1: bool      # permessage-deflate: the message is compressed
    opcode: int
    masked: bool
    payload: bytes
    size: int       # bytes of the whole frame on the wire

    @property
    def text(self):
        return self.payload.decode("utf-8")

    @property
    def close_code(self):
        return struct.unpack("!H", self.payload[:2])[0] if len(self.payload) >= 2 else None

    @property
    def close_reason(self):
        return self.payload[2:].decode("utf-8")


def parse(buf):
    """The whole frames at the start of `buf` (bytes) and the bytes left over (a frame not
    yet complete)."""
    frames, pos = [], 0
    while len(buf) - pos >= 2:
        b0, b1 = buf[pos], buf[pos + 1]
        n, at = b1 & 0x7F, pos + 2
        if n == 126:
            if len(buf) < at + 2:
                break
            n, at = struct.unpack("!H", buf[at:at + 2])[0], at + 2
        elif n == 127:
            if len(buf) < at + 8:
                break
            n, at = struct.unpack("!Q", buf[at:at + 8])[0], at + 8
        mask = None
        if b1 & 0x80:
            if len(buf) < at + 4:
                break
            mask, at = buf[at:at + 4], at + 4
        if len(buf) < at + n:
            break
        payload = bytes(buf[at:at + n])
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        frames.append(Frame(bool(b0 & 0x80), bool(b0 & 0x40), b0 & 0x0F, mask is not None,
                            payload, at + n - pos))
        pos = at + n
    return frames, bytes(buf[pos:])


class Inflater:
    """permessage-deflate (RFC 7692 §7.2.2) for the messages of one direction, context kept
    from message to message (no *_no_context_takeover was asked for)."""

    def __init__(self):
        self._z = zlib.decompressobj(-zlib.MAX_WBITS)

    def message(self, frame):
        return self._z.decompress(frame.payload + b"\x00\x00\xff\xff")
