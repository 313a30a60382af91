"""An origin that misbehaves on purpose, for the soak: HTTP/1.1 over TLS and plain, on one
loopback address, run by asyncio in a thread of its own. The path says what it does:

  /ok/...         200 with a 1 KiB body, keep-alive
  /chunked/...    200 in four chunks, each its own write, keep-alive
  /close/...      200 with `Connection: close`, then closes (so nothing is pooled: the next
                  request for the name goes to DNS again)
  /drop/...       200 as if keep-alive, then closes at once without saying so: the connection
                  sluice pools is dead by the time (or just as) it is used again
  /reset/...      a head promising 32 KiB, 8 KiB of it, then a TCP reset
  /stall/...      reads the request and never answers (until the peer gives up)
  /stallbody/...  a head promising 4 KiB, 1 KiB of it, then nothing
  /trickle/...    a head promising 16 bytes, then one byte every 100 ms

Anything else is a 404. Counts of requests by behaviour are kept for the figures.
"""
import asyncio
import collections
import socket
import ssl
import struct
import threading

BEHAVIOURS = ("ok", "chunked", "close", "drop", "reset", "stall", "stallbody", "trickle")
TRICKLE_BYTES, TRICKLE_GAP = 16, 0.1
HEAD_LIMIT = 16 * 1024


def _head(status, length=None, extra=()):
    lines = ["HTTP/1.1 %d %s" % (status, "OK" if status == 200 else "Not Found"),
             "Server: sluice-soak-origin"]
    if length is not None:
        lines.append("Content-Length: %d" % length)
    lines += list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class FaultOrigin:
    """Listens on `address`: TLS on `tls_port` with `cert` (a Pair), plain on `plain_port`
    (both 0: chosen by the kernel). start() returns once both listen; stop() closes them and
    every open connection."""

    def __init__(self, address, cert):
        self.address = address
        self.cert = cert
        self.tls_port = self.plain_port = None
        self.counts = collections.Counter()
        self._loop = None
        self._thread = None
        self._servers = []
        self._writers = set()
        self._ready = threading.Event()
        self._error = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="fault-origin", daemon=True)
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("the fault origin did not start")
        if self._error:
            raise self._error
        return self

    def stop(self):
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(20)

    def _run(self):
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._listen())
        except Exception as e:  # noqa: BLE001: reported to start()
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            for server in self._servers:
                server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            self._loop.run_until_complete(_cancel_all())
            self._loop.close()

    async def _listen(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert.cert, self.cert.key)
        tls = await asyncio.start_server(self._serve, self.address, 0, ssl=ctx, backlog=512)
        plain = await asyncio.start_server(self._serve, self.address, 0, backlog=512)
        self._servers = [tls, plain]
        self.tls_port = tls.sockets[0].getsockname()[1]
        self.plain_port = plain.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer):
        self._writers.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ssl.SSLError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.transport.close()

    async def _one(self, reader, writer):
        """Serves one request; False when the connection is to end."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        if len(head) > HEAD_LIMIT:
            return False
        target = head.split(b"\r\n", 1)[0].split(b" ")
        path = target[1].decode("latin-1") if len(target) > 1 else "/"
        behaviour = path.split("/")[1] if path.count("/") >= 2 else ""
        if behaviour not in BEHAVIOURS:
            writer.write(_head(404, 0))
            await writer.drain()
            return True
        self.counts[behaviour] += 1
        return await getattr(self, "_" + behaviour)(reader, writer)

    async def _ok(self, reader, writer):
        writer.write(_head(200, 1024) + b"o" * 1024)
        await writer.drain()
        return True

    async def _chunked(self, reader, writer):
        writer.write(_head(200, None, ["Transfer-Encoding: chunked"]))
        for i in range(4):
            writer.write(b"100\r\n" + bytes([97 + i]) * 256 + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _close(self, reader, writer):
        writer.write(_head(200, 64, ["Connection: close"]) + b"c" * 64)
        await writer.drain()
        return False

    async def _drop(self, reader, writer):
        writer.write(_head(200, 64) + b"d" * 64)
        await writer.drain()
        return False

    async def _reset(self, reader, writer):
        writer.write(_head(200, 32 * 1024) + b"r" * 8192)
        await writer.drain()
        sock = writer.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return False

    async def _stall(self, reader, writer):
        await _until_closed(reader)
        return False

    async def _stallbody(self, reader, writer):
        writer.write(_head(200, 4096) + b"s" * 1024)
        await writer.drain()
        await _until_closed(reader)
        return False

    async def _trickle(self, reader, writer):
        writer.write(_head(200, TRICKLE_BYTES))
        await writer.drain()
        for _ in range(TRICKLE_BYTES):
            await asyncio.sleep(TRICKLE_GAP)  # the fault itself: bytes that come slowly
            writer.write(b"t")
            await writer.drain()
        return True


async def _cancel_all():
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _until_closed(reader):
    while await reader.read(65536):
        pass
