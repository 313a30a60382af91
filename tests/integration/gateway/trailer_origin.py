"""An origin that records what a request ended with: its trailer fields, or that it never ended.
nginx cannot log a request's trailers; this one can. TLS as grpc.test (a leaf of the bed's test
CA) on 127.0.0.26, two ports of its own: `h2_port` selects ALPN h2 and speaks HTTP/2 (python3-h2),
`h1_port` selects http/1.1 and reads HTTP/1.1 by hand, chunked bodies and their trailer section
included. Threads of the test process; every connection its own thread.

Each request is answered 200 `ok` once it is whole, and recorded as a dict:
  proto     "h2" or "http/1.1"
  path      the request target (a test puts its marker there)
  headers   [(name, value)] of the head, as received (lower-cased names over h2)
  body      the body's bytes (de-chunked)
  trailers  [(name, value)] of the trailer section, as received; None when there was none
  ended     True: the request ended (END_STREAM, the last chunk, the Content-Length reached);
            False: the stream was reset or the connection closed first
  reset     over h2, the RST_STREAM error code that ended it early, else None

Each HTTP/2 connection, once it has ended, is in `h2_connections` as a dict:
  paths     the request targets it carried, in order
  goaway    the error code of the GOAWAY the client sent before closing, None if it sent none

    origin = TrailerOrigin(pki)        # listening
    origin.wait(m)                     # the records whose path has marker m, once one is there
    origin.stop()
"""
import socket
import ssl
import threading
import time

import h2.config
import h2.connection
import h2.events

ADDRESS, NAME = "127.0.0.26", "grpc.test"
HEAD_LIMIT = 64 * 1024


class TrailerOrigin:
    def __init__(self, pki):
        leaf = pki.test_ca.issue("trailer-origin", NAME, dns=[NAME])
        self.records = []
        self.h2_connections = []
        self._lock = threading.Lock()
        self._stopping = False
        self._listeners = []
        self.h2_port = self._listen(leaf, "h2", self._serve_h2)
        self.h1_port = self._listen(leaf, "http/1.1", self._serve_h1)

    def _listen(self, leaf, alpn, serve):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(leaf.cert, leaf.key)
        context.set_alpn_protocols([alpn])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((ADDRESS, 0))
        sock.listen(64)
        self._listeners.append(sock)
        threading.Thread(target=self._accept, args=(sock, context, serve), daemon=True).start()
        return sock.getsockname()[1]

    def _accept(self, sock, context, serve):
        while not self._stopping:
            try:
                raw, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handshake_then, args=(raw, context, serve),
                             daemon=True).start()

    def _handshake_then(self, raw, context, serve):
        raw.settimeout(30)
        try:
            conn = context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        try:
            serve(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def _record(self, record):
        with self._lock:
            self.records.append(record)

    def wait(self, m, timeout=10):
        """The records whose path carries marker `m`, as soon as there is one (then a moment
        for any other to land)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [r for r in self.records if m in r["path"]]
            if found:
                time.sleep(0.2)
                with self._lock:
                    return [r for r in self.records if m in r["path"]]
            time.sleep(0.05)
        return []

    def seen(self, m):
        with self._lock:
            return [r for r in self.records if m in r["path"]]

    def connection_of(self, m, timeout=10):
        """The ended HTTP/2 connection that carried the request with marker `m`; None if it
        has not ended within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [c for c in self.h2_connections if any(m in p for p in c["paths"])]
            if found:
                return found[0]
            time.sleep(0.05)
        return None

    def stop(self):
        self._stopping = True
        for sock in self._listeners:
            sock.close()

    # --- HTTP/2 -------------------------------------------------------------------------

    def _serve_h2(self, conn):
        h2conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8"))
        h2conn.initiate_connection()
        conn.sendall(h2conn.data_to_send())
        open_streams = {}
        connection = {"paths": [], "goaway": None}
        while True:
            try:
                data = conn.recv(65536)
            except OSError:  # (ssl.SSLError included: a close without close_notify)
                break
            if not data:
                break
            for event in h2conn.receive_data(data):
                if isinstance(event, h2.events.ConnectionTerminated):
                    connection["goaway"] = event.error_code
                elif isinstance(event, h2.events.RequestReceived):
                    connection["paths"].append(dict(event.headers).get(":path", ""))
                self._on_h2(h2conn, event, open_streams)
            out = h2conn.data_to_send()
            if out:
                conn.sendall(out)
        for record in open_streams.values():
            self._record(record)  # the connection ended under them
        with self._lock:
            self.h2_connections.append(connection)

    def _on_h2(self, h2conn, event, open_streams):
        if isinstance(event, h2.events.RequestReceived):
            headers = list(event.headers)
            path = dict(headers).get(":path", "")
            open_streams[event.stream_id] = {
                "proto": "h2", "path": path, "headers": headers, "body": b"",
                "trailers": None, "ended": False, "reset": None}
        elif isinstance(event, h2.events.DataReceived):
            record = open_streams.get(event.stream_id)
            if record is not None:
                record["body"] += event.data
            h2conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.TrailersReceived):
            record = open_streams.get(event.stream_id)
            if record is not None:
                record["trailers"] = list(event.headers)
        elif isinstance(event, h2.events.StreamEnded):
            record = open_streams.pop(event.stream_id, None)
            if record is not None:
                record["ended"] = True
                self._record(record)
                h2conn.send_headers(event.stream_id, [(":status", "200"),
                                                      ("content-length", "3")])
                h2conn.send_data(event.stream_id, b"ok\n", end_stream=True)
        elif isinstance(event, h2.events.StreamReset):
            record = open_streams.pop(event.stream_id, None)
            if record is not None:
                record["reset"] = event.error_code
                self._record(record)

    # --- HTTP/1.1 -----------------------------------------------------------------------

    def _serve_h1(self, conn):
        reader = _Reader(conn)
        while True:
            head = reader.until(b"\r\n\r\n", HEAD_LIMIT)
            if head is None:
                return
            lines = head.decode("latin-1").split("\r\n")
            target = lines[0].split(" ")[1] if len(lines[0].split(" ")) == 3 else lines[0]
            headers = [tuple(part.strip() for part in line.split(":", 1))
                       for line in lines[1:] if line]
            record = {"proto": "http/1.1", "path": target, "headers": headers, "body": b"",
                      "trailers": None, "ended": False, "reset": None}
            fields = {name.lower(): value for name, value in headers}
            if not self._read_h1_body(reader, fields, record):
                self._record(record)
                return
            record["ended"] = True
            self._record(record)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")

    @staticmethod
    def _read_h1_body(reader, fields, record):
        """The body (and trailer section) into `record`; False if the connection ended first."""
        if fields.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = reader.until(b"\r\n", 1024)
                if size_line is None:
                    return False
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    break
                chunk = reader.exactly(size + 2)
                if chunk is None:
                    return False
                record["body"] += chunk[:-2]
            trailers = []
            while True:
                line = reader.until(b"\r\n", HEAD_LIMIT)
                if line is None:
                    return False
                if not line:
                    break
                name, value = line.decode("latin-1").split(":", 1)
                trailers.append((name, value.strip()))
            record["trailers"] = trailers
            return True
        length = int(fields.get("content-length", "0"))
        body = reader.exactly(length)
        if body is None:
            return False
        record["body"] = body
        return True


class _Reader:
    def __init__(self, conn):
        self.conn = conn
        self.buffer = b""

    def _more(self):
        try:
            data = self.conn.recv(65536)
        except OSError:  # (ssl.SSLError included: a close without close_notify)
            return False
        if not data:
            return False
        self.buffer += data
        return True

    def until(self, delimiter, limit):
        """The bytes before `delimiter` (which is consumed); None at the end of the stream."""
        while delimiter not in self.buffer:
            if len(self.buffer) > limit or not self._more():
                return None
        before, _, self.buffer = self.buffer.partition(delimiter)
        return before

    def exactly(self, n):
        while len(self.buffer) < n:
            if not self._more():
                return None
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data
