"""The abusive sandbox of the soak, run as a process of its own (so that its threads do not
share a Python interpreter lock with the well-behaved client whose latency is measured):

  flood     threads that open up to 100 connections a second each, each pipelining more
            requests than the sandbox's request bucket holds (429), racing the holder for
            connection slots (503);
  hold      one thread that keeps twice the sandbox's connection limit open and idle,
            opening a slot again 250 ms after sluice closed (or refused) it;
  trickle   threads that send a request head one byte every 200 ms (sluice cuts each at
            handshake_timeout), then start another.

The offered load is bounded (a few hundred connections a second in all): what is measured is
whether the limits keep one sandbox's abuse from the others, not what refusing costs in CPU
on a machine that the clients share with sluice (a flood that saturates the CPU is stopped
below sluice, by the host's firewall).

Runs until its stdin closes, then writes JSON to the file named by its argument:
{"outcomes": [[marker, status, reason], ...] of the flood's answered requests, "counts": {...}}.
Usage: soak_abuse.py CONFIG_JSON OUT_PATH, where CONFIG_JSON holds proxy [host, port],
target (the absolute URL's authority), max_connections, floods, tricklers.
"""
import json
import os
import selectors
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from http1 import ConnectionClosed, HttpReader  # noqa: E402
from oracles import marker  # noqa: E402
from tlsraw import PlainStream  # noqa: E402

TRICKLE_GAP = 0.2
PIPELINE = 32
FLOOD_GAP = 0.01     # at most 100 connections a second per flood thread
HOLD_REOPEN = 0.25   # a held slot that sluice closed is opened again after this


class Abuse:
    def __init__(self, config):
        self.proxy = tuple(config["proxy"])
        self.target = config["target"]
        self.max_connections = config["max_connections"]
        self.stop = threading.Event()
        self.outcomes = []
        self.counts = {"flood_sent": 0, "flood_unanswered": 0, "held_opened": 0,
                       "held_closed_by_sluice": 0, "held_refused_503": 0,
                       "trickled_heads": 0, "trickled_bytes": 0}
        self.threads = [threading.Thread(target=self.flood, daemon=True)
                        for _ in range(config["floods"])]
        self.threads.append(threading.Thread(target=self.hold, daemon=True))
        self.threads += [threading.Thread(target=self.trickle, daemon=True)
                         for _ in range(config["tricklers"])]

    def connect(self):
        sock = socket.create_connection(self.proxy, timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def flood(self):
        """Connections that each pipeline PIPELINE requests at once: whenever one gets a slot
        it asks for more than the bucket holds (429, and the connection closes)."""
        while not self.stop.wait(FLOOD_GAP):  # the offered load's bound (see the docstring)
            marks = [marker() for _ in range(PIPELINE)]
            heads = b"".join(("GET http://%s/whoami.txt?m=%s HTTP/1.1\r\nHost: %s\r\n\r\n"
                              % (self.target, m, self.target)).encode() for m in marks)
            self.counts["flood_sent"] += PIPELINE
            try:
                sock = self.connect()
            except OSError:
                self.counts["flood_unanswered"] += PIPELINE
                continue
            answered = 0
            try:
                try:
                    sock.sendall(heads)
                except OSError:
                    pass  # refused at once (503): the answer may still be readable
                reader = HttpReader(PlainStream(sock))
                for m in marks:
                    resp = reader.read_response("GET")
                    answered += 1
                    if resp.sluice_reason == "too_many_connections":
                        self.outcomes.append([None, resp.status, resp.sluice_reason])
                        break
                    self.outcomes.append([m, resp.status, resp.sluice_reason])
                    if resp.sluice_reason:
                        break
            except (ConnectionClosed, OSError, ValueError):
                pass
            finally:
                sock.close()
                self.counts["flood_unanswered"] += PIPELINE - answered

    def hold(self):
        sel = selectors.DefaultSelector()
        want = 2 * self.max_connections
        reopen = []  # when each slot that sluice closed may be opened again
        while not self.stop.is_set():
            now = time.monotonic()
            reopen = [t for t in reopen if t > now]
            while len(sel.get_map()) + len(reopen) < want and not self.stop.is_set():
                try:
                    sock = self.connect()
                except OSError:
                    break
                sock.setblocking(False)
                sel.register(sock, selectors.EVENT_READ)
                self.counts["held_opened"] += 1
            for key, _ in sel.select(timeout=0.05):
                sock = key.fileobj
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data.startswith(b"HTTP/1.1 503 "):
                    self.counts["held_refused_503"] += 1
                elif not data:
                    self.counts["held_closed_by_sluice"] += 1
                else:
                    continue
                sel.unregister(sock)
                sock.close()
                reopen.append(time.monotonic() + HOLD_REOPEN)
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    def trickle(self):
        while not self.stop.is_set():
            head = ("GET http://%s/whoami.txt?m=%s HTTP/1.1\r\nHost: %s\r\n\r\n"
                    % (self.target, marker(), self.target)).encode()
            try:
                sock = self.connect()
            except OSError:
                continue
            self.counts["trickled_heads"] += 1
            try:
                for i in range(len(head)):
                    if self.stop.wait(TRICKLE_GAP):  # the abuse itself: a head that crawls
                        break
                    sock.sendall(head[i:i + 1])
                    self.counts["trickled_bytes"] += 1
            except OSError:
                pass  # cut off by sluice: start another
            finally:
                sock.close()

    def run(self):
        for t in self.threads:
            t.start()
        sys.stdin.buffer.read()  # until the parent closes it
        self.stop.set()
        for t in self.threads:
            t.join(60)


def main():
    config = json.loads(sys.argv[1])
    abuse = Abuse(config)
    started = time.monotonic()
    abuse.run()
    abuse.counts["seconds"] = round(time.monotonic() - started, 2)
    with open(sys.argv[2], "w") as f:
        json.dump({"outcomes": abuse.outcomes, "counts": abuse.counts}, f)


if __name__ == "__main__":
    main()
