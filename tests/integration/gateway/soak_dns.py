"""sluice's resolver for the soak: a small UDP DNS server in a thread, whose names say how it
behaves (A queries; AAAA gets the same treatment with an empty answer):

  slow.soak.test       answered after SLOW (1 s): later than c-ares's first try (a third of
                       dns.timeout), a second before the lookup's deadline; the retry's own
                       answer comes after the lookup ended, to a socket that may be gone
  servfail.soak.test   SERVFAIL
  timeout.soak.test    never answered
  nx.soak.test         NXDOMAIN (so is every name not in the zone)
  the zone             names given to the constructor, each with its address (TTL 1 s)

The fault names are answered with TTL 0, so every lookup asks again.
"""
import collections
import heapq
import select
import socket
import struct
import threading
import time

SLOW = 1.0
A, AAAA = 1, 28
NOERROR, SERVFAIL, NXDOMAIN = 0, 2, 3
FAULTS = ("slow.soak.test", "servfail.soak.test", "timeout.soak.test", "nx.soak.test")


def _question(packet):
    """(id, qname lower-case, qtype, the question's bytes) of a query, or None."""
    if len(packet) < 17:
        return None
    qid, flags, qd = struct.unpack("!HHH", packet[:6])
    if flags & 0x8000 or qd != 1:
        return None
    pos, labels = 12, []
    while pos < len(packet):
        length = packet[pos]
        if length == 0 or length & 0xC0:
            break
        labels.append(packet[pos + 1:pos + 1 + length].decode("latin-1"))
        pos += 1 + length
    if pos + 5 > len(packet) or packet[pos] != 0:
        return None
    qtype = struct.unpack("!H", packet[pos + 1:pos + 3])[0]
    return qid, ".".join(labels).lower(), qtype, packet[12:pos + 5]


def _answer(qid, question, rcode, address=None, ttl=0):
    flags = 0x8180 | rcode  # response, recursion desired and available
    body = question
    count = 0
    if address is not None:
        body += struct.pack("!HHHIH", 0xC00C, A, 1, ttl, 4) + socket.inet_aton(address)
        count = 1
    return struct.pack("!HHHHHH", qid, flags, 1, count, 0, 0) + body


class SoakResolver:
    def __init__(self, address, zone):
        self.zone = dict(zone)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, 0))
        self.address = address
        self.port = self.sock.getsockname()[1]
        self.counts = collections.Counter()  # queries by name (A and AAAA)
        self._due = []  # heap of (when, seq, answer, client)
        self._seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-dns", daemon=True)
        self._thread.start()

    @property
    def server(self):
        return "%s:%d" % (self.address, self.port)

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        self.sock.close()

    def _reply(self, packet):
        """(answer or None, delay) for one query."""
        q = _question(packet)
        if q is None:
            return None, 0
        qid, name, qtype, question = q
        self.counts[name] += 1
        if name == "timeout.soak.test":
            return None, 0
        if name == "servfail.soak.test":
            return _answer(qid, question, SERVFAIL), 0
        if name == "slow.soak.test":
            address = self.zone.get(name) if qtype == A else None
            return _answer(qid, question, NOERROR, address), SLOW
        if name not in self.zone:
            return _answer(qid, question, NXDOMAIN), 0
        return _answer(qid, question, NOERROR, self.zone[name] if qtype == A else None,
                       ttl=1), 0

    def _run(self):
        while not self._stop.is_set():
            wait = 0.1
            if self._due:
                wait = max(0.0, min(wait, self._due[0][0] - time.monotonic()))
            ready, _, _ = select.select([self.sock], [], [], wait)
            if ready:
                try:
                    packet, client = self.sock.recvfrom(4096)
                except OSError:
                    continue
                answer, delay = self._reply(packet)
                if answer is not None:
                    self._seq += 1
                    heapq.heappush(self._due, (time.monotonic() + delay, self._seq, answer,
                                               client))
            while self._due and self._due[0][0] <= time.monotonic():
                _, _, answer, client = heapq.heappop(self._due)
                try:
                    self.sock.sendto(answer, client)
                except OSError:
                    pass  # the asker is gone (a late answer to a closed socket)
