"""Run inside a sandbox namespace (`ip netns exec NAME /usr/bin/python3 -B netns_probe.py PROBES`):
the sandbox's attempts to get out, all at once, each with its own deadline.

PROBES is a JSON object {id: probe}; prints a JSON object {id: result}. A probe is a dict:
  {"kind": "tcp", "host": H, "port": P, "tag": T, "timeout": S}
      connect, send T and a newline, read what comes back until the peer closes
  {"kind": "udp", "host": H, "port": P, "tag": T, "timeout": S}
      send T, wait for one datagram back
  {"kind": "dns_udp" | "dns_tcp", "host": H, "port": P, "qname": N, "timeout": S}
      an A query for N; the answer's rcode and addresses
  {"kind": "icmp", "host": H, "timeout": S}
      one echo request over a raw socket (ICMPv6 when H is IPv6); waits for the reply
Socket probes take an optional "source" address to send from.
A result is {"outcome": O, ...}: O is "reply" (with "data" or "rcode"/"addresses"),
"timeout", "refused", "unreachable", "closed" (a TCP connection that ended without a byte),
"permission" or "error" (with "detail"). Addresses may carry a scope: fe80::1%veth.
"""
import errno
import json
import os
import socket
import struct
import sys
import threading
import time

sys.dont_write_bytecode = True


def _family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _sockaddr(host, port):
    info = socket.getaddrinfo(host, port, _family(host), 0, 0, socket.AI_NUMERICHOST)
    return info[0][4]


def _socket(p, kind):
    s = socket.socket(_family(p["host"]), kind)
    if p.get("source"):
        s.bind(_sockaddr(p["source"], 0))
    return s


def _error_result(exc):
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return {"outcome": "timeout"}
    if isinstance(exc, ConnectionRefusedError):
        return {"outcome": "refused"}
    if isinstance(exc, PermissionError):
        return {"outcome": "permission", "detail": str(exc)}
    if isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return {"outcome": "unreachable", "detail": str(exc)}
    return {"outcome": "error", "detail": repr(exc)}


def _read_all(sock, deadline):
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(4096)
        except (socket.timeout, TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def probe_tcp(p):
    deadline = time.monotonic() + p["timeout"]
    with _socket(p, socket.SOCK_STREAM) as s:
        s.settimeout(p["timeout"])
        s.connect(_sockaddr(p["host"], p["port"]))
        s.sendall(p["tag"].encode() + b"\n")
        data = _read_all(s, deadline)
    if not data:
        return {"outcome": "closed"}
    return {"outcome": "reply", "data": data.decode(errors="replace")}


def probe_udp(p):
    with _socket(p, socket.SOCK_DGRAM) as s:
        s.settimeout(p["timeout"])
        s.connect(_sockaddr(p["host"], p["port"]))  # connected: an ICMP error shows as refused
        s.send(p["tag"].encode())
        data = s.recv(4096)
    return {"outcome": "reply", "data": data.decode(errors="replace")}


def dns_query(qname, qid):
    question = b"".join(bytes([len(label)]) + label.encode() for label in qname.split("."))
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question + b"\0" + \
        struct.pack("!HH", 1, 1)


def dns_parse(msg):
    qd, an = struct.unpack("!HH", msg[4:8])
    pos = 12
    for _ in range(qd):
        while msg[pos]:
            pos += 1 + msg[pos]
        pos += 5
    addresses = []
    for _ in range(an):
        pos += 2 if msg[pos] & 0xC0 == 0xC0 else 0  # the stand-in answers with a pointer
        rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[pos:pos + 10])
        pos += 10
        if rtype == 1 and rdlen == 4:
            addresses.append(socket.inet_ntoa(msg[pos:pos + 4]))
        pos += rdlen
    return {"outcome": "reply", "rcode": msg[3] & 0xF, "addresses": addresses}


def probe_dns_udp(p):
    qid = int.from_bytes(os.urandom(2), "big")
    deadline = time.monotonic() + p["timeout"]
    with _socket(p, socket.SOCK_DGRAM) as s:
        s.connect(_sockaddr(p["host"], p["port"]))
        s.send(dns_query(p["qname"], qid))
        while True:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            msg = s.recv(4096)
            if len(msg) >= 12 and struct.unpack("!H", msg[:2])[0] == qid:
                return dns_parse(msg)


def probe_dns_tcp(p):
    qid = int.from_bytes(os.urandom(2), "big")
    deadline = time.monotonic() + p["timeout"]
    with _socket(p, socket.SOCK_STREAM) as s:
        s.settimeout(p["timeout"])
        s.connect(_sockaddr(p["host"], p["port"]))
        query = dns_query(p["qname"], qid)
        s.sendall(struct.pack("!H", len(query)) + query)
        data = b""
        while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = s.recv(4096)
            if not chunk:
                return {"outcome": "closed"}
            data += chunk
    return dns_parse(data[2:])


def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def probe_icmp(p):
    v6 = _family(p["host"]) == socket.AF_INET6
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    echo, echo_reply = (128, 129) if v6 else (8, 0)
    ident = int.from_bytes(os.urandom(2), "big")
    payload = b"sluice-netns-probe"
    packet = struct.pack("!BBHHH", echo, 0, 0, ident, 1) + payload
    if not v6:  # the kernel fills in the ICMPv6 checksum itself
        packet = packet[:2] + struct.pack("!H", _checksum(packet)) + packet[4:]
    deadline = time.monotonic() + p["timeout"]
    with socket.socket(_family(p["host"]), socket.SOCK_RAW, proto) as s:
        s.sendto(packet, _sockaddr(p["host"], 0))
        while True:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            msg = s.recv(4096)
            if not v6:
                msg = msg[(msg[0] & 0xF) * 4:]  # IPv4 raw sockets hand over the IP header
            if len(msg) >= 8 and msg[0] == echo_reply and struct.unpack("!H", msg[4:6])[0] == ident:
                return {"outcome": "reply", "data": ""}


PROBES = {"tcp": probe_tcp, "udp": probe_udp, "dns_udp": probe_dns_udp,
          "dns_tcp": probe_dns_tcp, "icmp": probe_icmp}


def run(spec):
    results = {}

    def one(key, p):
        try:
            results[key] = PROBES[p["kind"]](p)
        except Exception as exc:  # every failure is a result, never a crash of the batch
            results[key] = _error_result(exc)

    threads = [threading.Thread(target=one, args=item) for item in spec.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))))
