"""A tiny DNS client over UDP (or TCP): enough to ask the bed's resolver for A/AAAA records,
and to see what a resolver answers to any other query type (the answer's RR types)."""
from dataclasses import dataclass, field
import ipaddress
import os
import socket
import struct

A, AAAA = 1, 28
NULL, TXT, HTTPS, ANY = 10, 16, 65, 255
RCODES = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}


@dataclass
class Answer:
    rcode: str
    addresses: list = field(default_factory=list)
    types: list = field(default_factory=list)  # the RR type of each answer record, in order
    authoritative: bool = False                # the AA flag


def _encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode("ascii")
    return out + b"\0"


def _skip_name(msg, pos):
    while True:
        length = msg[pos]
        if length & 0xC0 == 0xC0:
            return pos + 2
        if length == 0:
            return pos + 1
        pos += 1 + length


def _query_tcp(server, port, packet, timeout):
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect((server, port))
        s.sendall(struct.pack("!H", len(packet)) + packet)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
            chunk = s.recv(4096)
            if not chunk:
                raise ConnectionError("the resolver closed the TCP connection without an answer")
            data += chunk
    return data[2:2 + struct.unpack("!H", data[:2])[0]]


def query(server, port, name, qtype=A, timeout=3.0, tcp=False):
    qid = int.from_bytes(os.urandom(2), "big")
    packet = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + _encode_name(name) + \
        struct.pack("!HH", qtype, 1)
    if tcp:
        msg = _query_tcp(server, port, packet, timeout)
        if len(msg) < 12 or struct.unpack("!H", msg[:2])[0] != qid:
            raise ValueError("a TCP answer with another id: %r" % msg[:12])
    else:
        family = socket.AF_INET6 if ":" in server else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.sendto(packet, (server, port))
            while True:
                msg, _ = s.recvfrom(4096)
                if len(msg) >= 12 and struct.unpack("!H", msg[:2])[0] == qid:
                    break
    flags, qd, an = struct.unpack("!HHH", msg[2:8])
    rcode = RCODES.get(flags & 0xF, str(flags & 0xF))
    pos = 12
    for _ in range(qd):
        pos = _skip_name(msg, pos) + 4
    addresses, types = [], []
    for _ in range(an):
        pos = _skip_name(msg, pos)
        rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[pos:pos + 10])
        pos += 10
        rdata = msg[pos:pos + rdlen]
        pos += rdlen
        types.append(rtype)
        if rtype in (A, AAAA):
            addresses.append(str(ipaddress.ip_address(rdata)))
    return Answer(rcode, addresses, types, bool(flags & 0x0400))
