"""A WebSocket origin (python3-websockets 10.4, the library Debian ships) for the tests of
docs/wire.md#websocket: TLS with a leaf of the bed's test CA, on its own loopback address, in a
thread of the test process with its own asyncio loop. It records each request for a feed it
read (path and request headers, before the handshake is checked) and serves three paths:

  /feed/echo      each text message comes back as "echo:<message>"
  /feed/push      sends "tick-0".."tick-<n-1>" spaced by `push_gap` seconds, then closes
  /feed/close     closes at once with code 4001
  /feed/forged    answers 101 with the upgrade fields but a Sec-WebSocket-Accept for another
                  key, then closes: an origin that did not read the handshake as a WebSocket's
  /feed/unkeyed   the same without any Sec-WebSocket-Accept
  /feed/declined  an ordinary 200 with a body: an origin that does not switch
Anything else is refused with 404 before the upgrade. With `alpn` (a list) its TLS selects the
first protocol of that list a client offers, e.g. h2 before http/1.1, like an origin that also
speaks HTTP/2, and `alpns` keeps what each session's handshake selected. With `subprotocols`
it selects the first of them the client offers (Sec-WebSocket-Protocol). `closes` keeps, for
each session once its connection is gone, the path and the close code and reason the client
sent (1006 and "" when no close frame came)."""
import asyncio
import http
import ssl
import threading

import websockets

ADDRESS = "127.0.0.23"
NAME = "ws.test"


class _ForgingProtocol(websockets.WebSocketServerProtocol):
    """The library's server, whose 101 to /feed/forged carries the accept of RFC 6455's sample
    key (which no client here sends) and to /feed/unkeyed none: everything else about the
    handshake is right, so only the accept tells it from a WebSocket's."""

    def write_http_response(self, status, headers, body=None):
        if status == http.HTTPStatus.SWITCHING_PROTOCOLS and \
                self.path.startswith(("/feed/forged", "/feed/unkeyed")):
            del headers["Sec-WebSocket-Accept"]
            if self.path.startswith("/feed/forged"):
                headers["Sec-WebSocket-Accept"] = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        super().write_http_response(status, headers, body)


class WsOrigin:
    def __init__(self, pki, push_count=3, push_gap=0.3, alpn=None, subprotocols=None):
        # (path, {lower-case header: value}) of each request for a feed, logged before its
        # handshake is checked (so a request that reached the origin is here, upgrade or not)
        self.handshakes = []
        self.alpns = []  # the ALPN protocol (or None) each session's TLS handshake selected
        self.closes = []  # (path, code, reason) of the client's close, each ended session
        self.subprotocols = subprotocols
        self.push_count = push_count
        self.push_gap = push_gap
        leaf = pki.test_ca.issue("ws-origin", NAME, dns=[NAME])
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(leaf.cert, leaf.key)
        if alpn:
            self._ctx.set_alpn_protocols(list(alpn))
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server = None
        self.port = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self.port is None:
            raise RuntimeError("the WebSocket origin did not start")

    def _run(self):
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(websockets.serve(
            self._handle, ADDRESS, 0, ssl=self._ctx, process_request=self._check,
            subprotocols=self.subprotocols, create_protocol=_ForgingProtocol))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _check(self, path, headers):
        if not path.startswith(("/feed/echo", "/feed/push", "/feed/close", "/feed/forged",
                                "/feed/unkeyed", "/feed/declined")):
            return http.HTTPStatus.NOT_FOUND, [], b"no such feed\n"
        self.handshakes.append((path, {k.lower(): v for k, v in headers.raw_items()}))
        if path.startswith("/feed/declined"):
            return http.HTTPStatus.OK, [("Content-Type", "text/plain")], b"no WebSocket here\n"
        return None

    async def _handle(self, ws, path):
        self.alpns.append(ws.transport.get_extra_info("ssl_object").selected_alpn_protocol())
        try:
            await self._serve(ws, path)
        except websockets.WebSocketException:
            pass  # a client that broke the protocol (a test's raw bytes): the session is over
        await ws.wait_closed()
        self.closes.append((path, ws.close_code, ws.close_reason))

    async def _serve(self, ws, path):
        if path.startswith("/feed/echo"):
            async for message in ws:
                await ws.send("echo:" + message)
        elif path.startswith(("/feed/forged", "/feed/unkeyed")):
            await ws.close()  # (a client that checks the accept is gone already)
        elif path.startswith("/feed/push"):
            for i in range(self.push_count):
                await ws.send("tick-%d" % i)
                await asyncio.sleep(self.push_gap)
            await ws.close()
        else:
            await ws.close(code=4001, reason="bye")

    def close(self):
        async def stop():
            self._server.close()
            await self._server.wait_closed()
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
